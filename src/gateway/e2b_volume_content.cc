#include "src/gateway/e2b_volume_content.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "src/gateway/e2b_control.h"
#include "src/gateway/e2b_envd.h"

namespace airlock::gateway::e2b {
namespace {

using json = nlohmann::json;

absl::Status Invalid(absl::string_view why) { return absl::InvalidArgumentError(why); }

// A path inside the volume, "/"-rooted, without empty or "." parts; nullopt for a ".." part.
std::optional<std::string> CleanVolumePath(absl::string_view path) {
  std::string out;
  for (absl::string_view part : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (part == ".") continue;
    if (part == "..") return std::nullopt;
    absl::StrAppend(&out, "/", part);
  }
  return out.empty() ? "/" : out;
}

absl::Status ReadId(absl::string_view name, absl::string_view value, std::optional<uint32_t>* out,
                    uint32_t max) {
  uint32_t n;
  if (!absl::SimpleAtoi(value, &n) || n > max) {
    return Invalid(absl::StrCat(name, " must be a whole number up to ", max,
                                name == "mode" ? " (permission bits, e.g. 420 for 0644)" : ""));
  }
  *out = n;
  return absl::OkStatus();
}

json EntryObject(const FsEntry& e, absl::string_view mount) {
  absl::string_view inside = e.path;
  if (absl::StartsWith(inside, mount)) inside.remove_prefix(mount.size());
  std::string path = inside.empty() ? "/" : std::string(inside);
  const char* type = e.type == FsType::kFile        ? "file"
                     : e.type == FsType::kDirectory ? "directory"
                     : e.type == FsType::kSymlink   ? "symlink"
                                                    : "unknown";
  json j = {{"name", path == "/" ? "/" : e.name},
            {"path", path},
            {"type", type},
            {"size", e.size},
            {"mode", e.mode & 07777},
            {"uid", e.uid},
            {"gid", e.gid},
            {"atime", TimestampJson(e.atime_seconds, e.atime_nanos)},
            {"mtime", TimestampJson(e.mtime_seconds, e.mtime_nanos)},
            {"ctime", TimestampJson(e.ctime_seconds, e.ctime_nanos)}};
  if (e.type == FsType::kSymlink) j["target"] = e.symlink_target;
  return j;
}

}  // namespace

absl::StatusOr<VolumeContentQuery> ParseVolumeContentQuery(absl::string_view target) {
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> params = QueryParameters(target);
  if (!params.ok()) return params.status();
  VolumeContentQuery q;
  bool has_path = false;
  for (const auto& [name, value] : *params) {
    if (name == "path") {
      if (value.size() > kMaxFsPathBytes / 2 || value.find('\0') != std::string::npos) {
        return Invalid("path is too long");
      }
      std::optional<std::string> clean = CleanVolumePath(value);
      if (!clean) return Invalid("path cannot go above the volume's root (..)");
      q.path = *std::move(clean);
      has_path = true;
    } else if (name == "depth") {
      if (!absl::SimpleAtoi(value, &q.depth) || q.depth < 1 || q.depth > kMaxFsDepth) {
        return Invalid(absl::StrCat("depth must be 1 to ", kMaxFsDepth));
      }
    } else if (name == "uid" || name == "gid") {
      if (absl::Status s = ReadId(name, value, name == "uid" ? &q.uid : &q.gid, UINT32_MAX - 1);
          !s.ok()) {
        return s;
      }
    } else if (name == "mode") {
      if (absl::Status s = ReadId(name, value, &q.mode, 07777); !s.ok()) return s;
    } else if (name == "force") {
      std::string lower = absl::AsciiStrToLower(value);
      if (lower != "true" && lower != "false") return Invalid("force must be true or false");
      q.force = lower == "true";
    }
  }
  if (!has_path) return Invalid("name the path in the volume: ?path=/dir/file");
  return q;
}

absl::StatusOr<VolumeMetadata> ParseVolumeMetadata(absl::string_view body) {
  if (body.size() > kMaxBodyBytes) return Invalid("the body is too large");
  json j = json::parse(body.begin(), body.end(), nullptr, false);
  if (!j.is_object()) return Invalid("the body must be a JSON object: {\"mode\": 420}");
  VolumeMetadata m;
  for (const char* name : {"uid", "gid", "mode"}) {
    if (!j.contains(name) || j[name].is_null()) continue;
    uint32_t max = std::string_view(name) == "mode" ? 07777 : UINT32_MAX - 1;
    if (!j[name].is_number_unsigned() || j[name].get<uint64_t>() > max) {
      return Invalid(absl::StrCat(name, " must be a whole number up to ", max));
    }
    uint32_t value = static_cast<uint32_t>(j[name].get<uint64_t>());
    (std::string_view(name) == "uid"   ? m.uid
     : std::string_view(name) == "gid" ? m.gid
                                       : m.mode) = value;
  }
  if (!m.uid && !m.gid && !m.mode) return Invalid("set at least one of uid, gid and mode");
  return m;
}

std::string VolumeEntryJson(const FsEntry& entry, absl::string_view mount) {
  return EntryObject(entry, mount).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string VolumeListingJson(const std::vector<FsEntry>& entries, absl::string_view mount) {
  json list = json::array();
  for (const FsEntry& e : entries) list.push_back(EntryObject(e, mount));
  return list.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::optional<std::string> BearerToken(absl::string_view authorization) {
  authorization = absl::StripAsciiWhitespace(authorization);
  if (!absl::StartsWithIgnoreCase(authorization, "bearer ")) return std::nullopt;
  absl::string_view token = absl::StripAsciiWhitespace(authorization.substr(7));
  if (token.empty()) return std::nullopt;
  return std::string(token);
}

}  // namespace airlock::gateway::e2b
