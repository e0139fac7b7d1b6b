#include "src/daemon/e2b_sandboxes.h"

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "src/common/hex.h"
#include "src/common/log.h"

namespace airlock {
namespace {

namespace e2b = gateway::e2b;

// E2B's default time to live, when a create gives none.
constexpr uint64_t kDefaultTimeoutSeconds = 300;

bool Live(SessionState s) { return s == SessionState::kRunning || s == SessionState::kPaused; }

// limit items from offset on.
template <typename T>
std::vector<T> Page(const std::vector<T>& all, uint32_t limit, uint64_t offset) {
  std::vector<T> page;
  for (size_t i = offset; i < all.size() && page.size() < limit; ++i) page.push_back(all[i]);
  return page;
}

// The header that tells the SDKs where the next page starts, if there is one.
std::string NextToken(uint64_t offset, size_t shown, size_t total) {
  if (offset + shown >= total) return "";
  return absl::StrCat("X-Next-Token: ", offset + shown, "\r\n");
}

}  // namespace

E2bSandboxes::Answer E2bSandboxes::Failed(const absl::Status& s) {
  return Answer{e2b::HttpCode(s), e2b::ErrorJson(e2b::HttpCode(s), s.message())};
}

bool E2bSandboxes::ServeEnvd(const gateway::GatewayRequest& request,
                             gateway::GatewayConnection& connection) {
  if (request.port != e2b::kEnvdPort) return false;
  absl::StatusOr<std::optional<E2bSandboxRecord>> found =
      store_->api_keys().FindSandbox(request.session_id);
  if (found.ok() && !found->has_value()) return false;
  envd_.Serve(request.session_id, request, connection);  // which says what failed, if it did
  return true;
}

std::optional<Exposure> E2bSandboxes::SandboxPort(const std::string& session_id, uint16_t port) {
  absl::StatusOr<std::optional<E2bSandboxRecord>> found =
      store_->api_keys().FindSandbox(session_id);
  if (!found.ok() || !found->has_value() || (*found)->is_snapshot()) return std::nullopt;
  return Exposure{.tenant = (*found)->tenant,
                  .session_id = session_id,
                  .port = port,
                  .is_public = (*found)->traffic_token.empty(),
                  .token = (*found)->traffic_token,
                  .created_ms = 0};
}

bool E2bSandboxes::Serve(const gateway::GatewayRequest& request,
                         gateway::GatewayConnection& connection) {
  if (const std::string* id = request.Header("e2b-sandbox-id"); id != nullptr) {
    const std::string* port = request.Header("e2b-sandbox-port");
    if (port != nullptr && *port != absl::StrCat(e2b::kEnvdPort)) {
      connection.RespondWith(
          404, "Not Found", "application/json",
          e2b::ErrorJson(404,
                         absl::StrCat("E2b-Sandbox-Port reaches envd (", e2b::kEnvdPort,
                                      ") only; a sandbox's other ports are at getHost(port)")));
      return true;
    }
    if (!CheckSessionId(*id).ok()) {
      connection.RespondWith(
          502, "Bad Gateway", "application/json",
          e2b::ErrorJson(502, absl::StrCat("sandbox ", absl::CHexEscape(id->substr(0, 40)),
                                           " was not found")));
      return true;
    }
    envd_.Serve(*id, request, connection);
    return true;
  }
  e2b::Route route = e2b::RouteOf(request.method, request.target);
  if (route.op == e2b::Op::kNotApi) return false;
  if (e2b::IsVolumeContent(route.op)) {  // admitted by the volume's token, not an API key
    volume_content_.Serve(route, request, connection);
    return true;
  }
  auto answer = [&](const Answer& a) {
    connection.RespondWith(a.code, e2b::HttpReason(a.code), "application/json",
                           a.code == 204 ? "" : a.body, a.extra_headers);
  };
  const std::string* key = request.Header("x-api-key");
  absl::StatusOr<std::optional<ApiKeyInfo>> found =
      key != nullptr ? store_->api_keys().Lookup(*key) : std::optional<ApiKeyInfo>();
  if (!found.ok()) {
    LogError(absl::StrCat("E2B API: ", found.status().message()));
    answer({503, e2b::ErrorJson(503, "airlockd could not read its state; try again")});
    return true;
  }
  if (!found->has_value()) {
    refused_++;
    answer({401, e2b::ErrorJson(401, key == nullptr
                                         ? "no API key: set E2B_API_KEY to a key from `airlock "
                                           "api-key create --name NAME`"
                                         : "this API key is not one of this airlockd's (airlock "
                                           "api-key ls lists yours)")});
    return true;
  }
  Principal who = PrincipalOfTenant((*found)->tenant);
  who.api_key = (*found)->name;
  Answer a = Handle(route, who, request, connection);
  // The SDKs show their own words for a refusal ("Paused sandbox ... not found"): the
  // operator's log keeps airlockd's reason for every one that changed nothing it was asked to.
  if (a.code >= 500 || (a.code >= 400 && route.op != e2b::Op::kGet)) {
    LogInfo(absl::StrCat("E2B API: ", request.method, " ",
                         absl::CHexEscape(request.target.substr(0, 120)), " by key:", who.api_key,
                         ": ", a.code, " ", a.body));
  }
  answer(a);
  return true;
}

E2bSandboxes::Answer E2bSandboxes::Handle(const e2b::Route& route, const Principal& who,
                                          const gateway::GatewayRequest& request,
                                          gateway::GatewayConnection& connection) {
  std::string body;
  if (request.method == "POST" || request.method == "PUT") {  // (not a volume content request)
    absl::StatusOr<std::string> read = connection.ReadBody(request, e2b::kMaxBodyBytes);
    if (!read.ok()) return Failed(read.status());
    body = *std::move(read);
  }
  bool about_volumes = route.op == e2b::Op::kCreateVolume || route.op == e2b::Op::kListVolumes ||
                       route.op == e2b::Op::kGetVolume || route.op == e2b::Op::kDeleteVolume;
  if (about_volumes) return Volumes(who, route, body);
  if (route.op != e2b::Op::kUnknown && route.op != e2b::Op::kCreate && route.op != e2b::Op::kList &&
      route.op != e2b::Op::kSnapshots && route.op != e2b::Op::kDeleteTemplate) {
    if (absl::Status s = CheckSessionId(route.sandbox_id); !s.ok()) {
      return Failed(
          absl::NotFoundError(absl::StrCat("no sandbox ", route.sandbox_id.substr(0, 40))));
    }
  }
  switch (route.op) {
    case e2b::Op::kNotApi:
    case e2b::Op::kUnknown:
      return Failed(absl::NotFoundError(absl::StrCat(
          "Airlock's E2B-compatible API does not serve ", request.method, " ",
          request.target.substr(0, request.target.find('?')),
          " yet (sandboxes: create, list, get, kill, timeout, pause, connect, metrics, fork "
          "and snapshots, volumes: create, list, get, delete, and their content, are served; "
          "templates are Airlock's images: airlock image build or import)")));
    case e2b::Op::kCreate:
      return Create(who, body);
    case e2b::Op::kList:
      return List(who, request.target);
    case e2b::Op::kGet:
      return Get(who, route.sandbox_id);
    case e2b::Op::kKill: {
      absl::StatusOr<SessionRecord> record = FindSandbox(who, route.sandbox_id);
      if (!record.ok()) return Failed(record.status());
      if (absl::Status s = sessions_->Remove(who, route.sandbox_id, "killed through the E2B API");
          !s.ok()) {
        return Failed(s);
      }
      return {204};
    }
    case e2b::Op::kSetTimeout: {
      absl::StatusOr<std::optional<uint64_t>> timeout = e2b::ParseTimeout(body, true);
      if (!timeout.ok()) return Failed(timeout.status());
      if (absl::StatusOr<SessionRecord> r = FindSandbox(who, route.sandbox_id); !r.ok()) {
        return Failed(r.status());
      }
      absl::StatusOr<SessionRecord> ended = sessions_->EndIn(who, route.sandbox_id, **timeout);
      if (!ended.ok()) {
        return Failed(absl::IsFailedPrecondition(ended.status())
                          ? absl::NotFoundError(ended.status().message())
                          : ended.status());
      }
      return {204};
    }
    case e2b::Op::kPause: {
      absl::StatusOr<SessionRecord> record = FindSandbox(who, route.sandbox_id);
      if (!record.ok()) return Failed(record.status());
      if (record->state == SessionState::kPaused) {
        return Failed(absl::FailedPreconditionError(
            absl::StrCat("sandbox ", route.sandbox_id, " is paused already")));
      }
      absl::StatusOr<SessionRecord> paused = sessions_->Pause(who, route.sandbox_id);
      if (!paused.ok() && absl::IsFailedPrecondition(paused.status())) {
        // E2B's SDKs take 409 for "paused already" and say nothing; a sandbox that cannot be
        // paused now (a command runs) must be an error they show.
        return {400, e2b::ErrorJson(400, paused.status().message())};
      }
      if (!paused.ok()) return Failed(paused.status());
      return {204};
    }
    case e2b::Op::kConnect:
      return Connect(who, route.sandbox_id, body);
    case e2b::Op::kMetrics:
      return Metrics(who, route.sandbox_id, request.target);
    case e2b::Op::kFork:
      return Fork(who, route.sandbox_id, body);
    case e2b::Op::kSnapshot:
      return Snapshot(who, route.sandbox_id, body);
    case e2b::Op::kSnapshots:
      return Snapshots(who, request.target);
    case e2b::Op::kDeleteTemplate:
      return DeleteTemplate(who, route.template_id);
    case e2b::Op::kCreateVolume:
    case e2b::Op::kListVolumes:
    case e2b::Op::kGetVolume:
    case e2b::Op::kDeleteVolume:
      return Volumes(who, route, body);
    case e2b::Op::kVolumeList:  // volume content: answered before, by the volume's token
    case e2b::Op::kVolumeMakeDir:
    case e2b::Op::kVolumeStat:
    case e2b::Op::kVolumeSetMetadata:
    case e2b::Op::kVolumeRemove:
    case e2b::Op::kVolumeRead:
    case e2b::Op::kVolumeWrite:
      break;
  }
  return Failed(absl::InternalError("unreachable"));
}

E2bSandboxes::Answer E2bSandboxes::Volumes(const Principal& who, const e2b::Route& route,
                                           const std::string& body) {
  airlock::Volumes& volumes = sessions_->volumes();
  switch (route.op) {
    case e2b::Op::kCreateVolume: {
      absl::StatusOr<std::string> name = e2b::ParseNewVolume(body);
      if (!name.ok()) return Failed(name.status());
      absl::StatusOr<VolumeRecord> made = volumes.Create(who, *name, volume_bytes_);
      if (!made.ok()) return Failed(made.status());
      return {201, e2b::VolumeJson(made->name, volume_content_.TokenFor(*made))};
    }
    case e2b::Op::kListVolumes: {
      absl::StatusOr<std::vector<VolumeRecord>> all = volumes.List(who);
      if (!all.ok()) return Failed(all.status());
      std::vector<std::string> names;
      for (const VolumeRecord& v : *all) {
        if (!v.read_only) names.push_back(v.name);
      }
      return {200, e2b::VolumeListJson(names)};
    }
    case e2b::Op::kGetVolume: {
      absl::StatusOr<VolumeRecord> v = volumes.Get(who, route.volume_id);
      if (!v.ok()) return Failed(v.status());
      return {200, e2b::VolumeJson(v->name, volume_content_.TokenFor(*v))};
    }
    case e2b::Op::kDeleteVolume: {
      volume_content_.Release(who, {route.volume_id});
      if (absl::Status s = volumes.Remove(who, route.volume_id); !s.ok()) return Failed(s);
      return {204};
    }
    default:
      return Failed(absl::InternalError("not a volume operation"));
  }
}

E2bSandboxes::Answer E2bSandboxes::Create(const Principal& who, const std::string& body) {
  absl::StatusOr<e2b::NewSandbox> wanted = e2b::ParseNewSandbox(body);
  if (!wanted.ok()) return Failed(wanted.status());
  if (!wanted->deny_out.empty()) {
    return Failed(absl::InvalidArgumentError(
        "network.denyOut: an Airlock sandbox reaches nothing but what network.allowOut lists, "
        "so there is nothing to deny; list the destinations it may reach in allowOut"));
  }
  if (wanted->allow_internet_access.value_or(false)) {
    return Failed(absl::InvalidArgumentError(
        "allowInternetAccess: an Airlock sandbox reaches no destination it was not given, so "
        "it cannot be given the whole internet; list what it may reach in network.allowOut "
        "(names, like pypi.org, or addresses)"));
  }
  absl::StatusOr<std::vector<EgressGrant>> egress =
      sessions_->ResolveEgress(wanted->allow_out, {}, "create");
  if (!egress.ok()) return Failed(egress.status());
  SessionLimits limits{.vcpus = 0,
                       .memory_bytes = 0,
                       .pids = 0,
                       .disk_bytes = 0,
                       .ttl_seconds = wanted->timeout_seconds.value_or(kDefaultTimeoutSeconds),
                       .idle_timeout_seconds = 0,
                       .pause_at_ttl = wanted->auto_pause};
  // A snapshot of the tenant's by that name is forked rather than an image booted.
  if (std::optional<std::string> name = e2b::SnapshotName(wanted->template_id);
      name && wanted->template_id != "base") {
    absl::StatusOr<std::optional<E2bSandboxRecord>> snapshot =
        store_->api_keys().FindSnapshot(who.Tenant(), *name);
    if (!snapshot.ok()) return Failed(snapshot.status());
    if (snapshot->has_value()) {
      if (!wanted->volume_mounts.empty()) {
        return Failed(absl::InvalidArgumentError(
            "volumeMounts: a sandbox made from a snapshot has the volumes the snapshot was "
            "taken with (their copies); leave volumeMounts out"));
      }
      return CreateFromSnapshot(who, **snapshot, *wanted, *egress);
    }
  }
  // A template is an image already here: a create never pulls (that is `airlock image pull`).
  auto mapped = templates_.find(wanted->template_id);
  std::string image = mapped != templates_.end()      ? mapped->second
                      : wanted->template_id == "base" ? ""
                                                      : wanted->template_id;
  if (!image.empty() && !sessions_->images().For(who).Resolve(image).ok()) {
    return Failed(absl::NotFoundError(absl::StrCat(
        "no template ", image.substr(0, 256),
        ": E2B templates are Airlock images of yours (airlock image ls); pull, import or build "
        "it first, or leave the template out for the default image")));
  }
  std::vector<VolumeRequest> volumes;
  std::vector<std::string> names;
  for (const auto& [name, path] : wanted->volume_mounts) {
    volumes.push_back({name, path, false});
    names.push_back(name);
  }
  volume_content_.Release(who, names);  // a helper session of the content API gives way
  absl::StatusOr<SessionRecord> made = sessions_->Create(who, image, limits, *egress, {}, nullptr,
                                                         /*one_shot=*/false, volumes);
  if (!made.ok()) return Failed(made.status());
  E2bSandboxRecord record{.session_id = made->id,
                          .tenant = made->tenant,
                          .template_id = wanted->template_id,
                          .metadata = wanted->metadata,
                          .env_vars = wanted->env_vars,
                          .access_token = RandomHex(16),
                          .api_key = who.api_key,
                          .traffic_token = wanted->allow_public_traffic ? "" : RandomHex(16)};
  if (absl::Status s = store_->api_keys().PutSandbox(record); !s.ok()) {
    sessions_->Remove(who, made->id, "its E2B record could not be stored").IgnoreError();
    return Failed(s);
  }
  absl::StatusOr<e2b::Sandbox> described = Describe(*made);
  if (!described.ok()) return Failed(described.status());
  return {201, e2b::SandboxJson(*described)};
}

E2bSandboxes::Answer E2bSandboxes::CreateFromSnapshot(const Principal& who,
                                                      const E2bSandboxRecord& snapshot,
                                                      const e2b::NewSandbox& wanted,
                                                      const std::vector<EgressGrant>& egress) {
  absl::StatusOr<std::vector<SessionRecord>> forks = sessions_->Fork(who, snapshot.session_id, 1);
  if (!forks.ok()) return Failed(forks.status());
  const SessionRecord& made = forks->front();
  E2bSandboxRecord like = snapshot;
  like.template_id = wanted.template_id;
  like.metadata = wanted.metadata;
  for (const auto& [key, value] : wanted.env_vars) like.env_vars[key] = value;
  like.traffic_token = wanted.allow_public_traffic ? "" : "set by Adopt";
  // The snapshot's own rules stay; the create's are added to them.
  absl::Status ready =
      egress.empty() ? absl::OkStatus()
                     : sessions_->ChangeEgress(who, made.id, egress, {}, "session.egress").status();
  absl::StatusOr<gateway::e2b::Sandbox> adopted =
      ready.ok() ? Adopt(who, made, like, wanted.timeout_seconds.value_or(kDefaultTimeoutSeconds),
                         wanted.auto_pause)
                 : absl::StatusOr<gateway::e2b::Sandbox>(ready);
  if (!adopted.ok()) {
    sessions_->Remove(who, made.id, "its E2B create failed").IgnoreError();
    return Failed(adopted.status());
  }
  return {201, e2b::SandboxJson(*adopted)};
}

absl::StatusOr<SessionRecord> E2bSandboxes::FindSandbox(const Principal& who,
                                                        const std::string& id) {
  absl::StatusOr<SessionRecord> record = store_->sessions().Get(who.Tenant(), id);
  if (!record.ok()) return record.status();
  if (!Live(record->state)) return absl::NotFoundError(absl::StrCat("sandbox ", id, " ended"));
  absl::StatusOr<std::optional<E2bSandboxRecord>> extra =
      store_->api_keys().GetSandbox(who.Tenant(), id);
  if (!extra.ok()) return extra.status();
  if (extra->has_value() && (*extra)->is_snapshot()) {
    return absl::NotFoundError(
        absl::StrCat(id, " is a snapshot, not a sandbox: create a sandbox from it"));
  }
  return record;
}

absl::StatusOr<E2bSandboxRecord> E2bSandboxes::RecordOf(const SessionRecord& session) {
  absl::StatusOr<std::optional<E2bSandboxRecord>> extra =
      store_->api_keys().GetSandbox(session.tenant, session.id);
  if (!extra.ok()) return extra.status();
  if (extra->has_value()) return **extra;
  return E2bSandboxRecord{.session_id = session.id,
                          .tenant = session.tenant,
                          .template_id = session.image.empty() ? "base" : session.image};
}

absl::StatusOr<gateway::e2b::Sandbox> E2bSandboxes::Adopt(const Principal& who,
                                                          const SessionRecord& session,
                                                          E2bSandboxRecord like,
                                                          uint64_t ttl_seconds,
                                                          std::optional<bool> auto_pause) {
  like.session_id = session.id;
  like.tenant = session.tenant;
  like.access_token = RandomHex(16);
  like.api_key = who.api_key;
  if (!like.traffic_token.empty()) like.traffic_token = RandomHex(16);
  like.snapshot_of.clear();
  like.snapshot_name.clear();
  absl::StatusOr<SessionRecord> timed = sessions_->EndIn(who, session.id, ttl_seconds, auto_pause);
  if (!timed.ok()) return timed.status();
  if (absl::Status s = store_->api_keys().PutSandbox(like); !s.ok()) return s;
  return Describe(*timed);
}

E2bSandboxes::Answer E2bSandboxes::Fork(const Principal& who, const std::string& id,
                                        const std::string& body) {
  absl::StatusOr<e2b::ForkRequest> wanted = e2b::ParseForkRequest(body);
  if (!wanted.ok()) return Failed(wanted.status());
  absl::StatusOr<SessionRecord> source = FindSandbox(who, id);
  if (!source.ok()) return Failed(source.status());
  absl::StatusOr<E2bSandboxRecord> like = RecordOf(*source);
  if (!like.ok()) return Failed(like.status());
  absl::StatusOr<std::vector<SessionRecord>> forks = sessions_->Fork(who, id, wanted->count);
  if (!forks.ok()) return Failed(forks.status());
  std::vector<e2b::Sandbox> made;
  absl::Status failure;
  for (const SessionRecord& fork : *forks) {
    absl::StatusOr<e2b::Sandbox> adopted = Adopt(who, fork, *like, wanted->timeout_seconds);
    if (!adopted.ok()) {
      failure = adopted.status();
      break;
    }
    made.push_back(*std::move(adopted));
  }
  if (!failure.ok()) {
    for (const SessionRecord& fork : *forks) {
      sessions_->Remove(who, fork.id, "its E2B fork failed").IgnoreError();
    }
    return Failed(failure);
  }
  return {201, e2b::ForkResultsJson(made)};
}

E2bSandboxes::Answer E2bSandboxes::Snapshot(const Principal& who, const std::string& id,
                                            const std::string& body) {
  absl::StatusOr<std::optional<std::string>> name = e2b::ParseSnapshotRequest(body);
  if (!name.ok()) return Failed(name.status());
  absl::StatusOr<SessionRecord> source = FindSandbox(who, id);
  if (!source.ok()) return Failed(source.status());
  absl::StatusOr<E2bSandboxRecord> record = RecordOf(*source);
  if (!record.ok()) return Failed(record.status());
  absl::StatusOr<std::vector<SessionRecord>> forks = sessions_->Fork(who, id, 1);
  if (!forks.ok()) return Failed(forks.status());
  const SessionRecord& copy = forks->front();
  record->session_id = copy.id;
  record->access_token = RandomHex(16);  // never admits anything: a snapshot has no envd
  record->api_key = who.api_key;
  record->snapshot_of = id;
  record->snapshot_name = name->value_or("");
  absl::Status kept = sessions_->Pause(who, copy.id).status();
  if (kept.ok()) kept = sessions_->EndIn(who, copy.id, 0).status();
  if (kept.ok()) kept = store_->api_keys().PutSandbox(*record);
  if (!kept.ok()) {
    sessions_->Remove(who, copy.id, "its E2B snapshot failed").IgnoreError();
    return Failed(kept);
  }
  if (name->has_value()) {
    absl::StatusOr<std::vector<E2bSandboxRecord>> all =
        store_->api_keys().ListSnapshots(who.Tenant());
    for (const E2bSandboxRecord& older : all.ok() ? *all : std::vector<E2bSandboxRecord>{}) {
      if (older.snapshot_name == **name && older.session_id != copy.id) {
        LogIfFailed(sessions_->Remove(who, older.session_id,
                                      absl::StrCat("replaced by snapshot ", copy.id)),
                    absl::StrCat("snapshot ", older.session_id, " not replaced"));
      }
    }
  }
  e2b::SnapshotInfo info{.snapshot_id = name->value_or(copy.id), .names = {}};
  if (name->has_value()) info.names.push_back(**name);
  return {201, e2b::SnapshotJson(info)};
}

E2bSandboxes::Answer E2bSandboxes::Snapshots(const Principal& who, const std::string& target) {
  absl::StatusOr<e2b::SnapshotQuery> query = e2b::ParseSnapshotQuery(target);
  if (!query.ok()) return Failed(query.status());
  absl::StatusOr<std::vector<E2bSandboxRecord>> all =
      store_->api_keys().ListSnapshots(who.Tenant());
  if (!all.ok()) return Failed(all.status());
  std::vector<e2b::SnapshotInfo> matching;
  for (const E2bSandboxRecord& r : *all) {
    if (!query->sandbox_id.empty() && r.snapshot_of != query->sandbox_id) continue;
    if (!query->name.empty() && r.snapshot_name != query->name) continue;
    e2b::SnapshotInfo info{.snapshot_id = r.snapshot_name.empty() ? r.session_id : r.snapshot_name,
                           .names = {}};
    if (!r.snapshot_name.empty()) info.names.push_back(r.snapshot_name);
    matching.push_back(std::move(info));
  }
  std::vector<e2b::SnapshotInfo> page = Page(matching, query->limit, query->offset);
  Answer a{200, e2b::SnapshotListJson(page)};
  a.extra_headers = NextToken(query->offset, page.size(), matching.size());
  return a;
}

E2bSandboxes::Answer E2bSandboxes::DeleteTemplate(const Principal& who,
                                                  const std::string& template_id) {
  std::optional<std::string> name = e2b::SnapshotName(template_id);
  absl::StatusOr<std::optional<E2bSandboxRecord>> found =
      name ? store_->api_keys().FindSnapshot(who.Tenant(), *name)
           : absl::StatusOr<std::optional<E2bSandboxRecord>>(std::nullopt);
  if (!found.ok()) return Failed(found.status());
  if (!found->has_value()) {
    return Failed(absl::NotFoundError(
        absl::StrCat("no snapshot ", absl::CHexEscape(template_id.substr(0, 128)),
                     " (templates are Airlock images, removed with `airlock image rm`)")));
  }
  absl::Status removed =
      sessions_->Remove(who, (*found)->session_id, "snapshot deleted through the E2B API");
  if (!removed.ok()) return Failed(removed);
  return {204};
}

absl::StatusOr<gateway::e2b::Sandbox> E2bSandboxes::Describe(const SessionRecord& r) {
  if (!Live(r.state)) return absl::NotFoundError(absl::StrCat("sandbox ", r.id, " ended"));
  absl::StatusOr<std::optional<E2bSandboxRecord>> extra =
      store_->api_keys().GetSandbox(r.tenant, r.id);
  if (!extra.ok()) return extra.status();
  if (extra->has_value() && (*extra)->is_snapshot()) {
    return absl::NotFoundError(
        absl::StrCat(r.id, " is a snapshot, not a sandbox: create a sandbox from it"));
  }
  e2b::Sandbox s;
  s.sandbox_id = r.id;
  s.template_id = extra->has_value() ? (*extra)->template_id : r.image;
  if (extra->has_value()) {
    s.metadata = (*extra)->metadata;
    s.envd_access_token = (*extra)->access_token;
    s.traffic_access_token = (*extra)->traffic_token;
  }
  s.state = r.state == SessionState::kPaused ? "paused" : "running";
  s.started_ms = r.created_ms;
  // No time to live: as far as a 32-bit time_t reaches, for clients that parse it.
  s.end_ms = r.limits.ttl_seconds == 0
                 ? int64_t{2147483647} * 1000
                 : r.created_ms + static_cast<int64_t>(r.limits.ttl_seconds) * 1000;
  s.cpu_count = r.limits.vcpus;
  s.memory_mb = r.limits.memory_bytes >> 20;
  s.disk_mb = r.limits.disk_bytes >> 20;
  s.domain = domain_;
  s.auto_pause = r.limits.pause_at_ttl;
  for (const VolumeAttachment& v : r.volumes) s.volume_mounts.emplace_back(v.name, v.path);
  return s;
}

E2bSandboxes::Answer E2bSandboxes::Get(const Principal& who, const std::string& id) {
  absl::StatusOr<SessionRecord> record = FindSandbox(who, id);
  absl::StatusOr<e2b::Sandbox> described =
      record.ok() ? Describe(*record) : absl::StatusOr<e2b::Sandbox>(record.status());
  if (!described.ok()) return Failed(described.status());
  return {200, e2b::SandboxDetailJson(*described)};
}

E2bSandboxes::Answer E2bSandboxes::List(const Principal& who, const std::string& target) {
  absl::StatusOr<e2b::ListQuery> query = e2b::ParseListQuery(target);
  if (!query.ok()) return {400, e2b::ErrorJson(400, query.status().message())};
  absl::StatusOr<std::vector<SessionRecord>> all = store_->sessions().List(who.Tenant());
  if (!all.ok()) return {500, e2b::ErrorJson(500, all.status().message())};
  std::sort(all->begin(), all->end(), [](const SessionRecord& a, const SessionRecord& b) {
    return a.created_ms != b.created_ms ? a.created_ms > b.created_ms : a.id < b.id;
  });
  std::vector<e2b::Sandbox> matching;
  for (const SessionRecord& r : *all) {
    if (volume_content_.IsHelper(r.id)) continue;
    absl::StatusOr<e2b::Sandbox> s = Describe(r);
    if (!s.ok()) continue;  // ended
    if (!query->states.empty() && query->states.count(s->state) == 0) continue;
    bool wanted = true;
    for (const auto& [key, value] : query->metadata) {
      auto it = s->metadata.find(key);
      wanted = wanted && it != s->metadata.end() && it->second == value;
    }
    if (wanted) matching.push_back(*std::move(s));
  }
  std::vector<e2b::Sandbox> page = Page(matching, query->limit, query->offset);
  Answer a{200, e2b::SandboxListJson(page)};
  a.extra_headers = NextToken(query->offset, page.size(), matching.size());
  return a;
}

E2bSandboxes::Answer E2bSandboxes::Connect(const Principal& who, const std::string& id,
                                           const std::string& body) {
  absl::StatusOr<std::optional<uint64_t>> timeout = e2b::ParseTimeout(body, false);
  if (!timeout.ok()) return Failed(timeout.status());
  absl::StatusOr<SessionRecord> record = FindSandbox(who, id);
  if (!record.ok()) return Failed(record.status());
  bool resumed = record->state == SessionState::kPaused;
  if (resumed) {
    absl::StatusOr<SessionRecord> running = sessions_->Resume(who, id);
    if (!running.ok()) return Failed(running.status());
    record = *std::move(running);
  }
  // One paused at its timeout has none left: E2B's default, unless the connect gives one.
  if (!timeout->has_value() && resumed && record->limits.ttl_seconds == 0 &&
      record->limits.pause_at_ttl) {
    *timeout = kDefaultTimeoutSeconds;
  }
  if (timeout->has_value()) {
    absl::StatusOr<SessionRecord> timed = sessions_->EndIn(who, id, **timeout);
    if (!timed.ok()) return Failed(timed.status());
    record = *std::move(timed);
  }
  absl::StatusOr<e2b::Sandbox> described = Describe(*record);
  if (!described.ok()) return Failed(described.status());
  return {resumed ? 201 : 200, e2b::SandboxJson(*described)};
}

E2bSandboxes::Answer E2bSandboxes::Metrics(const Principal& who, const std::string& id,
                                           const std::string& target) {
  absl::StatusOr<e2b::MetricsQuery> query = e2b::ParseMetricsQuery(target);
  if (!query.ok()) return Failed(query.status());
  absl::StatusOr<SessionRecord> record = FindSandbox(who, id);
  if (!record.ok()) return Failed(record.status());
  std::vector<e2b::Metric> samples = metrics_.History(id, query->start_s, query->end_s);
  int64_t now_s = absl::ToUnixSeconds(absl::Now());
  if (samples.empty() && query->start_s <= now_s && now_s <= query->end_s) {
    // None kept yet (a sandbox younger than a sampling round): one of now, over a quarter
    // of a second of CPU. A paused sandbox has none (it is not woken).
    std::optional<GuestMetrics> before =
        sessions_->SampleMetrics(record->tenant, id, absl::Seconds(5));
    absl::SleepFor(absl::Milliseconds(250));
    std::optional<GuestMetrics> after =
        sessions_->SampleMetrics(record->tenant, id, absl::Seconds(5));
    std::optional<e2b::Metric> now =
        before && after ? E2bMetrics::Between(*before, *after, absl::Now()) : std::nullopt;
    if (now) samples.push_back(*now);
  }
  return {200, e2b::MetricsJson(samples)};
}

}  // namespace airlock
