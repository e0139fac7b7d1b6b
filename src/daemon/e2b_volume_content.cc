#include "src/daemon/e2b_volume_content.h"

#include <algorithm>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "src/common/log.h"
#include "src/common/sha256.h"
#include "src/daemon/e2b_envd.h"

namespace airlock {
namespace {

namespace e2b = gateway::e2b;

constexpr char kTokenPrefix[] = "vt_";
// How long a helper may live while a request runs in it (a long read or write included).
constexpr uint64_t kBusySeconds = 3600;

void Answer(gateway::GatewayConnection& c, int code, const std::string& json) {
  c.RespondWith(code, e2b::HttpReason(code), "application/json", json);
}

void Refuse(gateway::GatewayConnection& c, const absl::Status& s) {
  int code = e2b::HttpCode(s);
  Answer(c, code, e2b::ErrorJson(code, s.message()));
}

bool Writes(e2b::Op op) {
  return op == e2b::Op::kVolumeMakeDir || op == e2b::Op::kVolumeSetMetadata ||
         op == e2b::Op::kVolumeRemove || op == e2b::Op::kVolumeWrite;
}

// The attributes a query or a PATCH body asks for, on a request about path.
FsRequestMessage SetAttributes(const std::string& path, std::optional<uint32_t> uid,
                               std::optional<uint32_t> gid, std::optional<uint32_t> mode) {
  FsRequestMessage r{.op = FsOp::kSetAttributes, .path = path};
  if (uid) r.attributes |= kSetUid, r.uid = *uid;
  if (gid) r.attributes |= kSetGid, r.gid = *gid;
  if (mode) r.attributes |= kSetMode, r.mode = *mode;
  return r;
}

std::string Key(const SessionManager& sessions) {
  return sessions.DerivedKey("airlock e2b volume token v1");
}

}  // namespace

std::string E2bVolumeContent::TokenFor(const VolumeRecord& volume) const {
  return absl::StrCat(kTokenPrefix, absl::BytesToHexString(volume.tenant), "_",
                      HmacSha256Hex(Key(*sessions_), absl::StrCat(volume.tenant, "\n", volume.id)));
}

void E2bVolumeContent::Serve(const e2b::Route& route, const gateway::GatewayRequest& request,
                             gateway::GatewayConnection& connection) {
  auto unauthorized = [&](absl::string_view why) {
    Answer(connection, 401, e2b::ErrorJson(401, why));
  };
  const std::string* authorization = request.Header("authorization");
  std::optional<std::string> token =
      authorization != nullptr ? e2b::BearerToken(*authorization) : std::nullopt;
  if (!token) {
    return unauthorized(
        "the volume content API needs the volume's token (Authorization: Bearer TOKEN): E2B's "
        "SDKs send the one Volume.create and Volume.connect return");
  }
  // vt_<tenant in hex>_<mac>
  size_t mac_at = token->rfind('_');
  absl::string_view hex = mac_at == std::string::npos || mac_at < sizeof(kTokenPrefix) - 1
                              ? absl::string_view()
                              : absl::string_view(*token).substr(
                                    sizeof(kTokenPrefix) - 1, mac_at - (sizeof(kTokenPrefix) - 1));
  if (!absl::StartsWith(*token, kTokenPrefix) || hex.empty() || hex.size() % 2 != 0 ||
      token->size() > 512 ||
      !std::all_of(hex.begin(), hex.end(), [](char ch) { return absl::ascii_isxdigit(ch); })) {
    return unauthorized("this is not a volume's token: Volume.connect gives the volume's");
  }
  std::string tenant = absl::HexStringToBytes(hex);
  Principal who = PrincipalOfTenant(tenant);
  who.api_key = "volume-token";
  absl::StatusOr<VolumeRecord> volume = sessions_->volumes().Get(who, route.volume_id);
  if (!volume.ok() && !absl::IsNotFound(volume.status()))
    return Refuse(connection, volume.status());
  if (!volume.ok() || !SecretEquals(*token, TokenFor(*volume))) {
    return unauthorized(absl::StrCat("the token is not volume ", route.volume_id.substr(0, 256),
                                     "'s (Volume.connect gives the volume's current one)"));
  }
  if (absl::Status s = sessions_->TakeConnection(tenant); !s.ok()) {
    return Refuse(connection, s);
  }
  absl::Cleanup give = [&] { sessions_->GiveConnection(tenant); };
  if (Writes(route.op) && volume->read_only) {
    return Refuse(connection, absl::FailedPreconditionError(absl::StrCat(
                                  "volume ", volume->name,
                                  " is a snapshot, read-only: write a volume of yours instead")));
  }
  absl::StatusOr<Place> place = PlaceFor(who, *volume, Writes(route.op));
  if (!place.ok()) return Refuse(connection, place.status());
  Operate(route, who, *place, request, connection);
  if (place->helper) {
    // Once no request runs in it, the next one within the linger finds it; then it ends by
    // itself.
    absl::MutexLock lock(&mu_);
    if (--busy_[place->session_id] == 0) {
      busy_.erase(place->session_id);
      sessions_->EndIn(who, place->session_id, kLingerSeconds).IgnoreError();
    }
  }
}

absl::StatusOr<E2bVolumeContent::Place> E2bVolumeContent::PlaceFor(const Principal& who,
                                                                   const VolumeRecord& asked,
                                                                   bool write) {
  absl::MutexLock lock(&mu_);
  // Who holds it now, under the lock: another request may have started a helper meanwhile.
  absl::StatusOr<VolumeRecord> now = sessions_->volumes().Get(who, asked.name);
  if (!now.ok()) return now.status();
  if (now->id != asked.id) {
    return absl::NotFoundError(absl::StrCat("volume ", asked.name, " was removed meanwhile"));
  }
  const VolumeRecord& volume = *now;
  auto helper = helpers_.find(volume.id);
  std::vector<std::string> paused, read_only;
  for (const std::string& holder : volume.holders) {
    absl::StatusOr<SessionRecord> session = store_->sessions().Get(who.Tenant(), holder);
    if (!session.ok()) continue;
    if (session->state == SessionState::kPaused) {
      paused.push_back(holder);
      continue;
    }
    if (session->state != SessionState::kRunning) continue;
    for (const VolumeAttachment& a : session->volumes) {
      if (a.volume_id != volume.id) continue;
      if (a.read_only && write) {
        read_only.push_back(holder);
        continue;
      }
      bool is_helper = helper != helpers_.end() && helper->second == holder;
      if (is_helper) {
        // It lives while the request runs.
        absl::StatusOr<SessionRecord> kept = sessions_->EndIn(who, holder, kBusySeconds);
        if (!kept.ok()) continue;
        ++busy_[holder];
      }
      return Place{.session_id = holder, .mount = a.path, .helper = is_helper};
    }
  }
  if (!paused.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "volume ", volume.name, " is held by paused session ", paused.front(),
        ": resume it (Sandbox.connect) to reach the volume's files through it, or end it"));
  }
  if (!read_only.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("volume ", volume.name, " is attached read-only by session ",
                     read_only.front(), ": it can be written once no session reads it"));
  }
  if (helper != helpers_.end()) helpers_.erase(helper);  // ended by itself
  SessionLimits limits{.vcpus = 0,
                       .memory_bytes = 0,
                       .pids = 0,
                       .disk_bytes = 0,
                       .ttl_seconds = kBusySeconds,
                       .idle_timeout_seconds = 0};
  absl::StatusOr<SessionRecord> made = sessions_->Create(
      who, "", limits, {}, {}, nullptr, /*one_shot=*/false,
      {{.name = volume.name, .path = kHelperMount, .read_only = volume.read_only}});
  if (!made.ok()) {
    return absl::Status(made.status().code(),
                        absl::StrCat("a session to reach volume ", volume.name,
                                     "'s files could not start: ", made.status().message()));
  }
  helpers_[volume.id] = made->id;
  ++busy_[made->id];
  return Place{.session_id = made->id, .mount = kHelperMount, .helper = true};
}

bool E2bVolumeContent::IsHelper(const std::string& session_id) {
  absl::MutexLock lock(&mu_);
  for (const auto& [volume, session] : helpers_) {
    if (session == session_id) return true;
  }
  return false;
}

void E2bVolumeContent::Release(const Principal& who, const std::vector<std::string>& names) {
  absl::MutexLock lock(&mu_);
  for (const std::string& name : names) {
    absl::StatusOr<VolumeRecord> volume = sessions_->volumes().Get(who, name);
    if (!volume.ok()) continue;
    auto helper = helpers_.find(volume->id);
    if (helper == helpers_.end()) continue;
    LogIfFailed(sessions_->Remove(who, helper->second, "its volume is attached by a new sandbox"),
                absl::StrCat("session ", helper->second, ": not removed"));
    helpers_.erase(helper);
  }
}

void E2bVolumeContent::Operate(const e2b::Route& route, const Principal& who, const Place& place,
                               const gateway::GatewayRequest& request,
                               gateway::GatewayConnection& c) {
  absl::StatusOr<e2b::VolumeContentQuery> query = e2b::ParseVolumeContentQuery(request.target);
  if (!query.ok()) return Refuse(c, query.status());
  std::string path = query->path == "/" ? place.mount : place.mount + query->path;
  auto one = [&](const FsRequestMessage& r) -> absl::StatusOr<std::string> {
    absl::StatusOr<std::vector<FsEntry>> entries = files_.Operate(who, place.session_id, r);
    if (!entries.ok()) return entries.status();
    if (entries->size() != 1) return absl::InternalError("the guest answered no entry");
    return e2b::VolumeEntryJson(entries->front(), place.mount);
  };
  absl::StatusOr<std::string> answer;
  switch (route.op) {
    case e2b::Op::kVolumeList: {
      absl::StatusOr<std::vector<FsEntry>> entries = files_.Operate(
          who, place.session_id, {.op = FsOp::kList, .path = path, .depth = query->depth});
      answer = entries.ok()
                   ? absl::StatusOr<std::string>(e2b::VolumeListingJson(*entries, place.mount))
                   : entries.status();
      break;
    }
    case e2b::Op::kVolumeStat:
      answer = one({.op = FsOp::kStat, .path = path});
      break;
    case e2b::Op::kVolumeMakeDir: {
      if (query->path == "/") {
        answer = absl::AlreadyExistsError("the volume's root is there already");
        break;
      }
      std::string parent = path.substr(0, path.rfind('/'));
      if (!query->force) {
        absl::StatusOr<std::vector<FsEntry>> up =
            files_.Operate(who, place.session_id, {.op = FsOp::kStat, .path = parent});
        if (!up.ok()) {
          answer = absl::IsNotFound(up.status())
                       ? absl::NotFoundError(absl::StrCat(
                             "the directory above ", query->path,
                             " is not there: make it first, or pass force: true to make both"))
                       : up.status();
          break;
        }
      }
      FsRequestMessage make = SetAttributes(path, query->uid, query->gid, query->mode);
      make.op = FsOp::kMakeDir;
      answer = one(make);
      break;
    }
    case e2b::Op::kVolumeSetMetadata: {
      absl::StatusOr<std::string> body = c.ReadBody(request, e2b::kMaxBodyBytes);
      if (!body.ok()) return Refuse(c, body.status());
      absl::StatusOr<e2b::VolumeMetadata> wanted = e2b::ParseVolumeMetadata(*body);
      if (!wanted.ok()) return Refuse(c, wanted.status());
      answer = one(SetAttributes(path, wanted->uid, wanted->gid, wanted->mode));
      break;
    }
    case e2b::Op::kVolumeRemove: {
      if (query->path == "/") {
        answer = absl::InvalidArgumentError(
            "the volume's root cannot be removed: remove what is in it, or the volume");
        break;
      }
      // Not there is an error here (404), as E2B's API has it.
      absl::StatusOr<std::vector<FsEntry>> there =
          files_.Operate(who, place.session_id, {.op = FsOp::kStat, .path = path});
      if (!there.ok()) {
        answer = there.status();
        break;
      }
      absl::StatusOr<std::vector<FsEntry>> removed =
          files_.Operate(who, place.session_id, {.op = FsOp::kRemove, .path = path});
      if (!removed.ok()) {
        answer = removed.status();
        break;
      }
      c.RespondWith(204, "No Content", "application/json", "");
      return;
    }
    case e2b::Op::kVolumeRead:
      if (absl::Status s = SendGuestFile(files_, who, place.session_id, path, "", c); !s.ok()) {
        Refuse(c, s);
      }
      return;
    case e2b::Op::kVolumeWrite:
      answer = Write(who, place, path, *query, request, c);
      break;
    default:
      answer = absl::InternalError("not a volume content operation");
  }
  if (!answer.ok()) return Refuse(c, answer.status());
  Answer(c, route.op == e2b::Op::kVolumeMakeDir ? 201 : 200, *answer);
}

absl::StatusOr<std::string> E2bVolumeContent::Write(const Principal& who, const Place& place,
                                                    const std::string& path,
                                                    const e2b::VolumeContentQuery& query,
                                                    const gateway::GatewayRequest& request,
                                                    gateway::GatewayConnection& c) {
  if (query.path == "/") return absl::InvalidArgumentError("name a file, not the volume's root");
  if (!query.force) {
    absl::StatusOr<std::vector<FsEntry>> there =
        files_.Operate(who, place.session_id, {.op = FsOp::kStat, .path = path});
    if (there.ok()) {
      return absl::AlreadyExistsError(
          absl::StrCat(query.path, " is there already: pass force: true to replace it"));
    }
    if (!absl::IsNotFound(there.status())) return there.status();
  }
  if (uploads_.fetch_add(1) >= kMaxUploadsAtOnce) {
    uploads_--;
    return absl::ResourceExhaustedError(
        "airlockd is taking in too many uploads at once; try again in a moment");
  }
  absl::Cleanup done = [&] { uploads_--; };
  absl::StatusOr<std::string> body = c.ReadBody(request, kMaxUploadBytes);
  if (!body.ok()) {
    if (!absl::IsOutOfRange(body.status())) return body.status();
    return absl::OutOfRangeError(absl::StrCat(
        "a write is at most ", kMaxUploadBytes >> 20,
        " MiB here: write larger files from a sandbox that mounts the volume, or with `airlock "
        "volume import`"));
  }
  size_t at = 0;
  absl::StatusOr<uint64_t> wrote = files_.Write(
      who, place.session_id, path, query.mode.value_or(0644), [&](std::string* piece, bool* last) {
        size_t n = std::min(kMaxFilePiece, body->size() - at);
        piece->assign(*body, at, n);
        at += n;
        *last = at == body->size();
        return absl::OkStatus();
      });
  if (!wrote.ok()) return wrote.status();
  FsRequestMessage after = SetAttributes(path, query.uid, query.gid, query.mode);
  if (after.attributes == 0) after.op = FsOp::kStat;
  absl::StatusOr<std::vector<FsEntry>> entries = files_.Operate(who, place.session_id, after);
  if (!entries.ok()) return entries.status();
  if (entries->size() != 1) return absl::InternalError("the guest answered no entry");
  return e2b::VolumeEntryJson(entries->front(), place.mount);
}

}  // namespace airlock
