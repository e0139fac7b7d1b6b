#include "src/gateway/e2b_control.h"

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"

namespace airlock::gateway::e2b {
namespace {

using json = nlohmann::json;

absl::Status Invalid(absl::string_view what) {
  return absl::InvalidArgumentError(std::string(what));
}

// A string map of at most kMaxEntries entries of at most kMaxFieldBytes each.
absl::Status ReadStringMap(const json& j, const char* field,
                           std::map<std::string, std::string>* out) {
  if (!j.contains(field) || j[field].is_null()) return absl::OkStatus();
  const json& m = j[field];
  if (!m.is_object() || m.size() > kMaxEntries) {
    return Invalid(
        absl::StrCat(field, " must be an object of at most ", kMaxEntries, " string values"));
  }
  for (const auto& [key, value] : m.items()) {
    if (!value.is_string() || key.empty() || key.size() > kMaxFieldBytes ||
        value.get_ref<const std::string&>().size() > kMaxFieldBytes) {
      return Invalid(absl::StrCat(field, " must map names to strings (each at most ",
                                  kMaxFieldBytes, " bytes)"));
    }
    (*out)[key] = value.get<std::string>();
  }
  return absl::OkStatus();
}

absl::Status ReadStringList(const json& j, const char* field, std::vector<std::string>* out) {
  if (!j.contains(field) || j[field].is_null()) return absl::OkStatus();
  const json& a = j[field];
  if (!a.is_array() || a.size() > kMaxEntries) {
    return Invalid(absl::StrCat(field, " must be a list of at most ", kMaxEntries, " strings"));
  }
  for (const json& v : a) {
    if (!v.is_string() || v.get_ref<const std::string&>().size() > kMaxFieldBytes) {
      return Invalid(absl::StrCat(field, " must be a list of strings"));
    }
    out->push_back(v.get<std::string>());
  }
  return absl::OkStatus();
}

absl::StatusOr<json> ParseObject(absl::string_view body, bool empty_ok) {
  if (body.size() > kMaxBodyBytes) return Invalid("the body is too large");
  if (body.find_first_not_of(" \t\r\n") == absl::string_view::npos) {
    if (empty_ok) return json::object();
    return Invalid("the body must be a JSON object");
  }
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return Invalid("the body must be a JSON object");
  return j;
}

// limit and nextToken, as the lists take them: whether name was one of them.
absl::StatusOr<bool> ReadPaging(const std::string& name, const std::string& value, uint32_t* limit,
                                uint64_t* offset) {
  if (name == "limit") {
    if (!absl::SimpleAtoi(value, limit) || *limit < 1 || *limit > 100) {
      return Invalid("limit must be a whole number from 1 to 100");
    }
    return true;
  }
  if (name == "nextToken") {
    if (!value.empty() && !absl::SimpleAtoi(value, offset)) {
      return Invalid("nextToken is not one this server gave");
    }
    return true;
  }
  return false;
}

// A timeout in whole seconds: 1 to 30 days.
absl::StatusOr<std::optional<uint64_t>> ReadTimeout(const json& j) {
  if (!j.contains("timeout") || j["timeout"].is_null()) return std::optional<uint64_t>();
  const json& t = j["timeout"];
  if (!t.is_number_integer() || t.get<int64_t>() < 1 || t.get<int64_t>() > 30 * 24 * 3600) {
    return Invalid("timeout must be a whole number of seconds from 1 to 2592000 (30 days)");
  }
  return std::optional<uint64_t>(t.get<uint64_t>());
}

// Guest- and caller-chosen strings may not be UTF-8: replaced, never thrown on.
std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string Rfc3339(int64_t unix_ms) {
  return absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromUnixMillis(unix_ms),
                          absl::UTCTimeZone());
}

json Common(const Sandbox& s) {
  return {{"sandboxID", s.sandbox_id},
          {"templateID", s.template_id},
          {"clientID", "airlock"},
          {"envdVersion", kEnvdVersion}};
}

// E2B's Sandbox: what a create, connect or fork answers.
json Created(const Sandbox& s) {
  json j = Common(s);
  j["envdAccessToken"] = s.envd_access_token;
  j["domain"] = s.domain;
  if (!s.traffic_access_token.empty()) j["trafficAccessToken"] = s.traffic_access_token;
  return j;
}

json Listed(const Sandbox& s) {
  json j = Common(s);
  j["startedAt"] = Rfc3339(s.started_ms);
  j["endAt"] = Rfc3339(s.end_ms);
  j["state"] = s.state;
  j["cpuCount"] = s.cpu_count;
  j["memoryMB"] = s.memory_mb;
  j["diskSizeMB"] = s.disk_mb;
  j["metadata"] = s.metadata;
  j["lifecycle"] = {{"onTimeout", s.auto_pause ? "pause" : "kill"}, {"autoResume", false}};
  return j;
}

}  // namespace

std::optional<std::string> PercentDecode(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out.push_back(text[i]);
      continue;
    }
    int value = 0;
    if (i + 2 >= text.size()) return std::nullopt;
    for (size_t k = 1; k <= 2; ++k) {
      char c = text[i + k];
      int d = c >= '0' && c <= '9'   ? c - '0'
              : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                     : -1;
      if (d < 0) return std::nullopt;
      value = value * 16 + d;
    }
    out.push_back(static_cast<char>(value));
    i += 2;
  }
  return out;
}

int HttpCode(const absl::Status& s) {
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
      return 400;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kFailedPrecondition:
      return 409;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kOutOfRange:
      return 413;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

bool IsVolumeContent(Op op) {
  return op == Op::kVolumeList || op == Op::kVolumeMakeDir || op == Op::kVolumeStat ||
         op == Op::kVolumeSetMetadata || op == Op::kVolumeRemove || op == Op::kVolumeRead ||
         op == Op::kVolumeWrite;
}

Route RouteOf(absl::string_view method, absl::string_view target) {
  absl::string_view path = target.substr(0, target.find('?'));
  std::vector<absl::string_view> parts = absl::StrSplit(path, '/', absl::SkipEmpty());
  Route r;
  if (parts.empty()) return r;
  bool v2 = parts[0] == "v2";
  if (v2) parts.erase(parts.begin());
  if (parts.empty()) return r;
  if (parts[0] == "snapshots" || parts[0] == "templates" || parts[0] == "volumes" ||
      parts[0] == "volumecontent" || parts[0] == "secrets" ||
      (parts[0] == "v3" && parts.size() > 1)) {
    r.op = Op::kUnknown;
    if (parts[0] == "snapshots" && parts.size() == 1 && method == "GET" && !v2) {
      r.op = Op::kSnapshots;
    } else if (parts[0] == "templates" && parts.size() == 2 && method == "DELETE" && !v2) {
      std::optional<std::string> id = PercentDecode(parts[1]);
      if (id) {
        r.op = Op::kDeleteTemplate;
        r.template_id = *std::move(id);
      }
    } else if (parts[0] == "volumes" && parts.size() == 1 && !v2) {
      if (method == "POST") r.op = Op::kCreateVolume;
      if (method == "GET") r.op = Op::kListVolumes;
    } else if (parts[0] == "volumecontent" && parts.size() == 3 && !v2) {
      std::optional<std::string> id = PercentDecode(parts[1]);
      if (id) {
        if (parts[2] == "dir" && method == "GET") r.op = Op::kVolumeList;
        if (parts[2] == "dir" && method == "POST") r.op = Op::kVolumeMakeDir;
        if (parts[2] == "path" && method == "GET") r.op = Op::kVolumeStat;
        if (parts[2] == "path" && method == "PATCH") r.op = Op::kVolumeSetMetadata;
        if (parts[2] == "path" && method == "DELETE") r.op = Op::kVolumeRemove;
        if (parts[2] == "file" && method == "GET") r.op = Op::kVolumeRead;
        if (parts[2] == "file" && method == "PUT") r.op = Op::kVolumeWrite;
        if (r.op != Op::kUnknown) r.volume_id = *std::move(id);
      }
    } else if (parts[0] == "volumes" && parts.size() == 2 && !v2) {
      std::optional<std::string> id = PercentDecode(parts[1]);
      if (id && (method == "GET" || method == "DELETE")) {
        r.op = method == "GET" ? Op::kGetVolume : Op::kDeleteVolume;
        r.volume_id = *std::move(id);
      }
    }
    return r;
  }
  if (parts[0] != "sandboxes") return r;
  r.op = Op::kUnknown;
  if (parts.size() == 1) {
    if (method == "POST") r.op = Op::kCreate;
    if (method == "GET") r.op = Op::kList;
    return r;
  }
  r.sandbox_id = std::string(parts[1]);
  if (parts.size() == 2) {
    if (method == "GET" && !v2) r.op = Op::kGet;
    if (method == "DELETE" && !v2) r.op = Op::kKill;
    return r;
  }
  if (parts.size() == 3 && method == "GET" && parts[2] == "metrics" && !v2) r.op = Op::kMetrics;
  if (parts.size() == 3 && method == "POST") {
    if (parts[2] == "timeout" && !v2) r.op = Op::kSetTimeout;
    if (parts[2] == "pause" && !v2) r.op = Op::kPause;
    if (parts[2] == "connect" || (parts[2] == "resume" && !v2)) r.op = Op::kConnect;
    if (parts[2] == "fork" && !v2) r.op = Op::kFork;
    if (parts[2] == "snapshots" && !v2) r.op = Op::kSnapshot;
  }
  return r;
}

absl::StatusOr<NewSandbox> ParseNewSandbox(absl::string_view body) {
  absl::StatusOr<json> j = ParseObject(body, false);
  if (!j.ok()) return j.status();
  NewSandbox n;
  if (j->contains("templateID") && !(*j)["templateID"].is_null()) {
    const json& t = (*j)["templateID"];
    if (!t.is_string() || t.get_ref<const std::string&>().empty() ||
        t.get_ref<const std::string&>().size() > 256) {
      return Invalid("templateID must be a template name (at most 256 characters)");
    }
    n.template_id = t.get<std::string>();
  }
  absl::StatusOr<std::optional<uint64_t>> timeout = ReadTimeout(*j);
  if (!timeout.ok()) return timeout.status();
  n.timeout_seconds = *timeout;
  if (absl::Status s = ReadStringMap(*j, "metadata", &n.metadata); !s.ok()) return s;
  if (absl::Status s = ReadStringMap(*j, "envVars", &n.env_vars); !s.ok()) return s;
  if (j->contains("allow_internet_access") && !(*j)["allow_internet_access"].is_null()) {
    if (!(*j)["allow_internet_access"].is_boolean()) {
      return Invalid("allow_internet_access must be true or false");
    }
    n.allow_internet_access = (*j)["allow_internet_access"].get<bool>();
  }
  if (j->contains("network") && !(*j)["network"].is_null()) {
    const json& net = (*j)["network"];
    if (!net.is_object()) return Invalid("network must be an object");
    if (absl::Status s = ReadStringList(net, "allowOut", &n.allow_out); !s.ok()) return s;
    if (absl::Status s = ReadStringList(net, "denyOut", &n.deny_out); !s.ok()) return s;
    if (net.contains("allowPublicTraffic") && !net["allowPublicTraffic"].is_null()) {
      if (!net["allowPublicTraffic"].is_boolean()) {
        return Invalid("network.allowPublicTraffic must be true or false");
      }
      n.allow_public_traffic = net["allowPublicTraffic"].get<bool>();
    }
  }
  if (j->contains("volumeMounts") && !(*j)["volumeMounts"].is_null()) {
    const json& mounts = (*j)["volumeMounts"];
    if (!mounts.is_array() || mounts.size() > 16) {
      return Invalid("volumeMounts must be a list of {\"name\", \"path\"} (a few at most)");
    }
    for (const json& m : mounts) {
      if (!m.is_object() || !m.contains("name") || !m["name"].is_string() || !m.contains("path") ||
          !m["path"].is_string() || m["name"].get_ref<const std::string&>().size() > 256 ||
          m["path"].get_ref<const std::string&>().size() > 4096) {
        return Invalid("each of volumeMounts is {\"name\": VOLUME, \"path\": \"/mnt/data\"}");
      }
      n.volume_mounts.emplace_back(m["name"].get<std::string>(), m["path"].get<std::string>());
    }
  }
  auto present = [&](const char* name) { return j->contains(name) && !(*j)[name].is_null(); };
  if (present("autoPause")) {
    if (!(*j)["autoPause"].is_boolean()) return Invalid("autoPause must be true or false");
    n.auto_pause = (*j)["autoPause"].get<bool>();
  }
  if (present("autoPauseMemory") && (*j)["autoPauseMemory"] != json(true)) {
    return Invalid(
        "lifecycle.onTimeout.keepMemory: Airlock pauses a sandbox with its memory, always (its "
        "processes go on after connect); leave keepMemory out");
  }
  if (present("autoResume") &&
      !((*j)["autoResume"].is_object() && (*j)["autoResume"].value("enabled", json()) != true)) {
    return Invalid(
        "lifecycle.autoResume: Airlock does not resume a paused sandbox when traffic reaches it "
        "yet; leave autoResume out and resume it with Sandbox.connect()");
  }
  if (present("mcp")) {
    return Invalid("mcp: Airlock runs no MCP gateway in a sandbox; leave mcp out");
  }
  if (present("iam")) {
    return Invalid(
        "iam: Airlock gives a sandbox no identity tokens; give it secrets with `airlock secret` "
        "instead, and leave iam out");
  }
  return n;
}

absl::StatusOr<std::string> ParseNewVolume(absl::string_view body) {
  absl::StatusOr<json> j = ParseObject(body, false);
  if (!j.ok()) return j.status();
  if (!j->contains("name") || !(*j)["name"].is_string() ||
      (*j)["name"].get_ref<const std::string&>().empty() ||
      (*j)["name"].get_ref<const std::string&>().size() > 256) {
    return Invalid("name the volume: {\"name\": \"data\"}");
  }
  return (*j)["name"].get<std::string>();
}

std::string VolumeJson(const std::string& name, const std::string& token) {
  return Dump({{"volumeID", name}, {"name", name}, {"token", token}});
}

std::string VolumeListJson(const std::vector<std::string>& names) {
  json list = json::array();
  for (const std::string& name : names) list.push_back({{"volumeID", name}, {"name", name}});
  return Dump(list);
}

absl::StatusOr<std::optional<uint64_t>> ParseTimeout(absl::string_view body, bool required) {
  absl::StatusOr<json> j = ParseObject(body, !required);
  if (!j.ok()) return j.status();
  absl::StatusOr<std::optional<uint64_t>> timeout = ReadTimeout(*j);
  if (!timeout.ok()) return timeout.status();
  if (required && !timeout->has_value()) return Invalid("timeout is required (seconds)");
  return *timeout;
}

absl::StatusOr<ForkRequest> ParseForkRequest(absl::string_view body) {
  absl::StatusOr<json> j = ParseObject(body, true);
  if (!j.ok()) return j.status();
  ForkRequest out;
  absl::StatusOr<std::optional<uint64_t>> timeout = ReadTimeout(*j);
  if (!timeout.ok()) return timeout.status();
  if (timeout->has_value()) out.timeout_seconds = **timeout;
  if (j->contains("count") && !(*j)["count"].is_null()) {
    const json& c = (*j)["count"];
    if (!c.is_number_integer() || c.get<int64_t>() < 1 || c.get<int64_t>() > kMaxForkCount) {
      return Invalid(absl::StrCat("count must be a whole number from 1 to ", kMaxForkCount));
    }
    out.count = c.get<uint32_t>();
  }
  return out;
}

std::optional<std::string> SnapshotName(absl::string_view text) {
  text = text.substr(0, text.find(':'));
  if (text.empty() || text.size() > 128) return std::nullopt;
  for (char c : text) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
              c == '.' || c == '/';
    if (!ok) return std::nullopt;
  }
  char first = text.front();
  if (first == '-' || first == '_' || first == '.' || first == '/') return std::nullopt;
  return std::string(text);
}

absl::StatusOr<std::optional<std::string>> ParseSnapshotRequest(absl::string_view body) {
  absl::StatusOr<json> j = ParseObject(body, true);
  if (!j.ok()) return j.status();
  if (!j->contains("name") || (*j)["name"].is_null()) return std::optional<std::string>();
  const json& n = (*j)["name"];
  std::optional<std::string> name =
      n.is_string() ? SnapshotName(n.get_ref<const std::string&>()) : std::nullopt;
  if (!name) {
    return Invalid(
        "name must be 1 to 128 lowercase letters, digits, '-', '_', '.' and '/', starting "
        "with a letter or digit");
  }
  return name;
}

absl::StatusOr<SnapshotQuery> ParseSnapshotQuery(absl::string_view target) {
  SnapshotQuery q;
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> params = QueryParameters(target);
  if (!params.ok()) return params.status();
  for (const auto& [name, value] : *params) {
    if (name == "sandboxID") {
      if (value.size() > 64) return Invalid("sandboxID is too long");
      q.sandbox_id = value;
    } else if (name == "name") {
      if (value.empty()) continue;
      std::optional<std::string> snapshot = SnapshotName(value);
      if (!snapshot) return Invalid("name is not a snapshot's name");
      q.name = *std::move(snapshot);
    } else if (absl::StatusOr<bool> paging = ReadPaging(name, value, &q.limit, &q.offset);
               !paging.ok()) {
      return paging.status();
    }
  }
  return q;
}

namespace {
json SnapshotObject(const SnapshotInfo& s) {
  return {{"snapshotID", s.snapshot_id}, {"names", s.names}};
}
}  // namespace

std::string SnapshotJson(const SnapshotInfo& s) { return Dump(SnapshotObject(s)); }

std::string SnapshotListJson(const std::vector<SnapshotInfo>& all) {
  json list = json::array();
  for (const SnapshotInfo& s : all) list.push_back(SnapshotObject(s));
  return Dump(list);
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> QueryParameters(
    absl::string_view target) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t question = target.find('?');
  if (question == absl::string_view::npos) return out;
  for (absl::string_view param :
       absl::StrSplit(target.substr(question + 1), '&', absl::SkipEmpty())) {
    size_t eq = param.find('=');
    std::optional<std::string> name = PercentDecode(param.substr(0, eq));
    std::optional<std::string> value =
        PercentDecode(eq == absl::string_view::npos ? "" : param.substr(eq + 1));
    if (!name || !value) return Invalid("the query has a broken %-escape");
    out.emplace_back(*std::move(name), *std::move(value));
  }
  return out;
}

absl::StatusOr<ListQuery> ParseListQuery(absl::string_view target) {
  ListQuery q;
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> params = QueryParameters(target);
  if (!params.ok()) return params.status();
  for (const auto& [name, value] : *params) {
    if (name == "state") {
      for (absl::string_view state : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        if (state != "running" && state != "paused") {
          return Invalid("state takes running and paused");
        }
        q.states.insert(std::string(state));
      }
    } else if (absl::StatusOr<bool> paging = ReadPaging(name, value, &q.limit, &q.offset);
               !paging.ok()) {
      return paging.status();
    } else if (name == "metadata") {
      // Its value is a query string of its own, escaped once more by the SDKs.
      std::optional<std::string> inner = PercentDecode(value);
      if (!inner) return Invalid("metadata has a broken %-escape");
      for (absl::string_view pair : absl::StrSplit(*inner, '&', absl::SkipEmpty())) {
        size_t at = pair.find('=');
        std::optional<std::string> key = PercentDecode(pair.substr(0, at));
        std::optional<std::string> v =
            PercentDecode(at == absl::string_view::npos ? "" : pair.substr(at + 1));
        if (!key || !v || key->empty()) return Invalid("metadata must be key=value pairs");
        if (q.metadata.size() >= kMaxEntries) return Invalid("too many metadata filters");
        q.metadata[*key] = *v;
      }
    }
  }
  return q;
}

std::string SandboxJson(const Sandbox& s) { return Dump(Created(s)); }

std::string ForkResultsJson(const std::vector<Sandbox>& forks) {
  json list = json::array();
  for (const Sandbox& s : forks) list.push_back({{"sandbox", Created(s)}});
  return Dump(list);
}

std::string SandboxDetailJson(const Sandbox& s) {
  json j = Listed(s);
  j["envdAccessToken"] = s.envd_access_token;
  j["domain"] = s.domain;
  json mounts = json::array();
  for (const auto& [name, path] : s.volume_mounts)
    mounts.push_back({{"name", name}, {"path", path}});
  j["volumeMounts"] = std::move(mounts);
  return Dump(j);
}

std::string SandboxListJson(const std::vector<Sandbox>& all) {
  json list = json::array();
  for (const Sandbox& s : all) list.push_back(Listed(s));
  return Dump(list);
}

std::string MetricsJson(const std::vector<Metric>& samples) {
  json list = json::array();
  for (const Metric& m : samples) {
    list.push_back({{"timestamp", Rfc3339(m.unix_ms)},
                    {"timestampUnix", m.unix_ms / 1000},
                    {"cpuCount", m.cpu_count},
                    {"cpuUsedPct", m.cpu_used_pct},
                    {"memUsed", m.mem_used},
                    {"memTotal", m.mem_total},
                    {"memCache", 0},
                    {"diskUsed", m.disk_used},
                    {"diskTotal", m.disk_total}});
  }
  return Dump(list);
}

absl::StatusOr<MetricsQuery> ParseMetricsQuery(absl::string_view target) {
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> params = QueryParameters(target);
  if (!params.ok()) return params.status();
  MetricsQuery q;
  for (const auto& [name, value] : *params) {
    if (name != "start" && name != "end") continue;
    int64_t* field = name == "start" ? &q.start_s : &q.end_s;
    if (!absl::SimpleAtoi(value, field) || *field < 0) {
      return Invalid(absl::StrCat(name, " must be a time in Unix seconds"));
    }
  }
  if (q.end_s < q.start_s) return Invalid("end is before start");
  return q;
}

absl::StatusOr<std::map<std::string, std::string>> ParseTemplateMap(absl::string_view text) {
  std::map<std::string, std::string> out;
  int number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++number;
    if (number > 1024) return Invalid("more than 1024 lines");
    line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::vector<absl::string_view> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (words.size() != 2 || words[0].size() > 256 || words[1].size() > 256) {
      return Invalid(absl::StrCat("line ", number,
                                  ": write `NAME IMAGE` (an E2B template name, then an Airlock "
                                  "image as `airlock image ls` lists it)"));
    }
    if (!out.emplace(std::string(words[0]), std::string(words[1])).second) {
      return Invalid(absl::StrCat("line ", number, ": ", words[0], " is mapped twice"));
    }
  }
  return out;
}

std::string ErrorJson(int code, absl::string_view message) {
  return Dump(json{{"code", code}, {"message", std::string(message)}});
}

const char* HttpReason(int code) {
  switch (code) {
    case 200:
      return "OK";
    case 201:
      return "Created";
    case 204:
      return "No Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 412:
      return "Precondition Failed";
    case 429:
      return "Too Many Requests";
    case 499:
      return "Client Closed Request";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    case 507:
      return "Insufficient Storage";
    default:
      return "Internal Server Error";
  }
}

}  // namespace airlock::gateway::e2b
