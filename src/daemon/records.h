// The daemon's vocabulary: who calls (Principal), a session's record and limits, and the
// records of its logs, commands, agents' events and the audit log. What the state store keeps
// (state_store.h) and every part of the daemon passes around; plain data, no behaviour beyond
// naming.
#ifndef AIRLOCK_DAEMON_RECORDS_H_
#define AIRLOCK_DAEMON_RECORDS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "src/secrets/secret_spec.h"

namespace airlock {

// Who makes a call: resolved by the daemon from the connection, never from a request field.
struct Principal {
  uint32_t uid = 0;
  uint32_t gid = 0;
  std::string certificate;  // common name of a TLS client certificate; empty for Unix callers
  std::string oidc;         // ISSUER#SUBJECT of a verified bearer token (oidc_auth.h)
  // Named by airlockd --operator (operators.h): reads every tenant's sessions, changes nothing.
  bool read_only_operator = false;
  // The name of the API key that authenticated the caller (the HTTP gateway's E2B-compatible
  // API): it acts as the key's tenant, never with that tenant's host privileges.
  std::string api_key;
  // The groups a bearer token named (what --operator may name), as the call carried them.
  std::vector<std::string> groups;
  // The fleet host that forwarded the call (fleet_forward.h); empty: called on this host.
  std::string via_host;
  // A caller over the Unix socket, named by its uid.
  bool Local() const { return certificate.empty() && oidc.empty(); }
  // "uid:1000", "cert:NAME" or "oidc:ISSUER#SUBJECT"; every principal is its own tenant.
  std::string Tenant() const {
    return !oidc.empty() ? "oidc:" + oidc
           : Local()     ? "uid:" + std::to_string(uid)
                         : "cert:" + certificate;
  }
  std::string Name() const {
    if (!api_key.empty()) return Tenant() + "/key:" + api_key;
    return Local() ? "uid:" + std::to_string(uid) + "/gid:" + std::to_string(gid) : Tenant();
  }
  // Root on this host (over the Unix socket): the host's administrator, whose image tags and
  // registry logins are the host's.
  bool IsHostRoot() const { return Local() && uid == 0 && api_key.empty(); }
  // Root and the read-only operators see every tenant's sessions, VMs and the audit log.
  bool SeesEveryTenant() const { return IsHostRoot() || read_only_operator; }
  // The image store's view for this principal (image_store.h): "" is root's, the host's.
  std::string ImageScope() const { return IsHostRoot() ? "" : Tenant(); }
};

// The principal a tenant's own requests act as ("uid:N", "cert:NAME", "oidc:ISSUER#SUBJECT"),
// for callers that prove the tenant some other way (an exposure's token, an API key).
Principal PrincipalOfTenant(const std::string& tenant);

// kPaused: the VM is gone but its snapshot is on disk; the next use resumes it.
enum class SessionState { kCreating = 1, kRunning = 2, kStopped = 3, kFailed = 4, kPaused = 5 };
const char* SessionStateName(SessionState state);
// The state SessionStateName names; nullopt for any other text.
std::optional<SessionState> ParseSessionState(absl::string_view name);

struct SessionLimits {
  uint32_t vcpus = 1;
  uint64_t memory_bytes = 512ull << 20;
  uint32_t pids = 1024;
  uint64_t disk_bytes = 1ull << 30;
  uint64_t ttl_seconds = 0;
  uint64_t idle_timeout_seconds = 300;  // pause after this long without use; 0: never
  uint64_t net_bytes_per_second = 0;    // egress bandwidth each way; 0: no limit
  // When its time to live runs out it is paused, not stopped (and has none until given one).
  bool pause_at_ttl = false;
};

// One egress rule a session holds (see src/net/egress_rule.h), where it came from ("create",
// "preset:pypi", "allow") and when it expires (0: never).
struct EgressGrant {
  std::string rule;  // canonical text
  std::string source;
  int64_t expires_ms = 0;
  bool deny = false;  // a deny wins over the session's allows
};

// A secret bound to a session: what it is and what the guest holds. Never its value.
struct SecretGrant {
  secrets::SecretSpec spec;
  std::string placeholder;
};

// Where a session's workspace came from (its files are in the session's directory).
struct WorkspaceRecord {
  std::string path;         // the project directory on the client's host
  std::string head;         // its HEAD commit (git projects)
  std::string branch;       // its branch then
  std::string tree_digest;  // of its base manifest; empty: the session has no workspace
  uint64_t files = 0;
  uint64_t bytes = 0;
  int64_t synced_ms = 0;  // the base last advanced by a sync
  bool present() const { return !tree_digest.empty(); }
};

// A volume a session has attached, in its slot (its index in SessionRecord::volumes).
struct VolumeAttachment {
  std::string volume_id;  // the volume's disk is volumes/<id>.ext4
  std::string name;       // the volume's name when it was attached
  std::string path;       // where the guest mounts it
  bool read_only = false;
  int64_t generation = 0;  // the volume's content when attached (VolumeRecord::generation)
  bool operator==(const VolumeAttachment&) const = default;
};

// A named volume of a tenant's: an ext4 disk that outlives sessions (src/daemon/volumes.h).
struct VolumeRecord {
  std::string id;  // 16 lowercase hex digits; the disk is volumes/<id>.ext4
  std::string tenant;
  std::string name;
  uint64_t size_bytes = 0;  // its filesystem's size (the disk file is kVolumeDiskBytes, sparse)
  // A snapshot (`volume snapshot`): attached read-only only, never changed.
  bool read_only = false;
  // Where it came from: "" (created), "snapshot of NAME", "fork of NAME for session ID".
  std::string origin;
  int64_t generation = 0;  // grows with every import that replaces its content
  int64_t created_ms = 0;
  // Who holds it now (filled by VolumeRepository::List/Get): the sessions that attach it and
  // are not stopped or failed, and whether one of them attaches it read-write.
  std::vector<std::string> holders;
  bool held_read_write = false;
};

// A session's id: 12 lowercase hex digits (6 random bytes).
inline constexpr size_t kSessionIdLength = 12;
// INVALID_ARGUMENT, saying what an id looks like, unless id could be a session's. Requests are
// checked with this before any lock or lookup.
[[nodiscard]] absl::Status CheckSessionId(std::string_view id);

// The wall clock in Unix milliseconds, as records are stamped.
int64_t NowUnixMs();

struct SessionRecord {
  std::string id;
  std::string tenant;
  std::string image;
  std::string image_digest;
  SessionState state = SessionState::kCreating;
  std::string reason;
  int64_t created_ms = 0;
  int64_t last_used_ms = 0;
  SessionLimits limits;
  std::string hostname;
  int64_t pid = 0;
  std::vector<EgressGrant> egress;
  int64_t egress_version = 1;  // grows with every change of `egress`
  std::vector<SecretGrant> secrets;
  WorkspaceRecord workspace;
  std::vector<VolumeAttachment> volumes;  // by slot
};

enum class LogStream { kStdout = 1, kStderr = 2, kEvent = 3 };

struct LogRecord {
  int64_t seq = 0;
  int64_t unix_ms = 0;
  int64_t exec_id = 0;
  LogStream stream = LogStream::kEvent;
  std::string data;
};

// One command of a session, as the timeline shows it.
struct ExecRecord {
  int64_t id = 0;
  std::vector<std::string> argv;
  std::string user;  // as asked ("" : the image's User, else root)
  std::string cwd;
  bool tty = false;
  int64_t started_ms = 0;
  int64_t ended_ms = -1;  // -1: not ended (running, or airlockd stopped meanwhile)
  int exit_code = 0;
  std::string message;
};

// A command's stored output: its first bytes (stdout and stderr as they came) and how much.
struct ExecOutput {
  std::string kept;
  uint64_t total = 0;
};

// Something a coding agent in a session said or did, from its own transcript (hostile: the
// guest wrote it).
struct AgentEvent {
  int64_t seq = 0;
  int64_t unix_ms = 0;
  std::string kind;     // agent.prompt, agent.message, agent.tool_call, agent.tool_result
  std::string agent;    // claude, opencode
  int64_t exec_id = 0;  // the command the agent ran in, 0 if unknown
  std::string tool_id;
  std::string tool;
  std::string text;
};

// One record of the audit log. The log is one hash chain per host: each record's hash covers
// its fields and the hash of the record before it, so a record changed, removed or moved in the
// database breaks the chain where it was (VerifyAudit).
struct AuditRecord {
  int64_t seq = 0;  // 1, 2, ... in the order they were written
  int64_t unix_ms = 0;
  std::string principal;
  std::string tenant;
  std::string action;
  std::string target;
  std::string outcome;
  std::string hash;  // AuditHash(the previous record's hash, this one), hex
};

// What VerifyAudit found.
struct AuditCheck {
  bool ok = false;
  uint64_t records = 0;
  int64_t last_seq = 0;
  std::string problem;        // the first break in the chain, for people; empty when ok
  int64_t first_bad_seq = 0;  // where it is
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_RECORDS_H_
