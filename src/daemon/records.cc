#include "src/daemon/records.h"

#include <chrono>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace airlock {

absl::Status CheckSessionId(std::string_view id) {
  bool ok = id.size() == kSessionIdLength;
  for (char ch : id) ok = ok && ((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'));
  if (ok) return absl::OkStatus();
  if (id.empty()) {
    return absl::InvalidArgumentError("give a session id (as `airlock ls` lists them)");
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "\"", absl::CHexEscape(std::string(id.substr(0, 40))), id.size() > 40 ? "...\"" : "\"",
      " is not a session id: those are 12 lowercase hex digits, as `airlock ls` lists them"));
}

Principal PrincipalOfTenant(const std::string& tenant) {
  Principal p;
  absl::string_view t = tenant;
  if (absl::ConsumePrefix(&t, "uid:")) {
    uint32_t uid = 0;
    if (absl::SimpleAtoi(t, &uid)) p.uid = p.gid = uid;
  } else if (absl::ConsumePrefix(&t, "cert:")) {
    p.certificate = std::string(t);
  } else if (absl::ConsumePrefix(&t, "oidc:")) {
    p.oidc = std::string(t);
  }
  return p;
}

int64_t NowUnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

const char* SessionStateName(SessionState state) {
  switch (state) {
    case SessionState::kCreating:
      return "creating";
    case SessionState::kRunning:
      return "running";
    case SessionState::kStopped:
      return "stopped";
    case SessionState::kFailed:
      return "failed";
    case SessionState::kPaused:
      return "paused";
  }
  return "unknown";
}

std::optional<SessionState> ParseSessionState(absl::string_view name) {
  for (SessionState s : {SessionState::kCreating, SessionState::kRunning, SessionState::kStopped,
                         SessionState::kFailed, SessionState::kPaused}) {
    if (name == SessionStateName(s)) return s;
  }
  return std::nullopt;
}

}  // namespace airlock
