// The E2B-compatible control API (E2B's REST API as its SDKs use it) as plain data: which
// operation a request names, its JSON bodies and query parsed and checked, and the JSON and
// error bodies the SDKs expect back. The wire formats follow E2B's published API; what each
// operation does is the daemon's (src/daemon/e2b_sandboxes.cc).
//
// Every byte comes from whoever holds (or guesses) an API key: bodies are parsed with
// nlohmann::json under a size cap, every field is checked for its type and range, and unknown
// fields are ignored as E2B's server does.
#ifndef AIRLOCK_GATEWAY_E2B_CONTROL_H_
#define AIRLOCK_GATEWAY_E2B_CONTROL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::gateway::e2b {

// Bodies larger than this are refused (413).
inline constexpr size_t kMaxBodyBytes = 1 << 20;
// At most this many metadata or environment entries, each key and value at most kMaxFieldBytes.
inline constexpr size_t kMaxEntries = 256;
inline constexpr size_t kMaxFieldBytes = 4096;
// What the API reports as its envd version (the SDKs require a semantic version).
inline constexpr char kEnvdVersion[] = "0.6.13";

enum class Op {
  kNotApi,          // not a control-API path: the gateway answers 404 as for any unknown path
  kUnknown,         // a control-API path this server does not serve (yet): 404 with what to use
  kCreate,          // POST /v2/sandboxes, POST /sandboxes
  kList,            // GET /v2/sandboxes, GET /sandboxes
  kGet,             // GET /sandboxes/ID
  kKill,            // DELETE /sandboxes/ID
  kSetTimeout,      // POST /sandboxes/ID/timeout
  kPause,           // POST /sandboxes/ID/pause
  kConnect,         // POST /v2/sandboxes/ID/connect, /sandboxes/ID/connect, /sandboxes/ID/resume
  kMetrics,         // GET /sandboxes/ID/metrics
  kFork,            // POST /sandboxes/ID/fork
  kSnapshot,        // POST /sandboxes/ID/snapshots
  kSnapshots,       // GET /snapshots
  kDeleteTemplate,  // DELETE /templates/ID (how the SDKs delete a snapshot)
  kCreateVolume,    // POST /volumes
  kListVolumes,     // GET /volumes
  kGetVolume,       // GET /volumes/ID
  kDeleteVolume,    // DELETE /volumes/ID
  // The volume content API (E2B_VOLUME_API_URL; a volume's token, not an API key):
  kVolumeList,         // GET /volumecontent/ID/dir
  kVolumeMakeDir,      // POST /volumecontent/ID/dir
  kVolumeStat,         // GET /volumecontent/ID/path
  kVolumeSetMetadata,  // PATCH /volumecontent/ID/path
  kVolumeRemove,       // DELETE /volumecontent/ID/path
  kVolumeRead,         // GET /volumecontent/ID/file
  kVolumeWrite,        // PUT /volumecontent/ID/file
};
// Whether op is one of the volume content API's.
bool IsVolumeContent(Op op);

struct Route {
  Op op = Op::kNotApi;
  std::string sandbox_id;   // for the operations on one sandbox
  std::string template_id;  // kDeleteTemplate's, percent-decoded
  std::string volume_id;    // the volume operations', percent-decoded
};
// method and request-target as sent.
Route RouteOf(absl::string_view method, absl::string_view target);

struct NewSandbox {
  std::string template_id = "base";
  std::optional<uint64_t> timeout_seconds;
  std::map<std::string, std::string> metadata;
  std::map<std::string, std::string> env_vars;
  std::optional<bool> allow_internet_access;
  std::vector<std::string> allow_out, deny_out;  // network.allowOut / denyOut
  // network.allowPublicTraffic: the sandbox's ports are reached without a token.
  bool allow_public_traffic = true;
  // volumeMounts: {name, path} of the caller's volumes.
  std::vector<std::pair<std::string, std::string>> volume_mounts;
  // autoPause (the SDK's lifecycle.onTimeout: 'pause'): paused, not killed, at its timeout.
  bool auto_pause = false;
};
// INVALID_ARGUMENT saying which field is wrong.
[[nodiscard]] absl::StatusOr<NewSandbox> ParseNewSandbox(absl::string_view body);
// {"timeout": SECONDS} (set timeout: required; connect: optional, and the body may be empty).
[[nodiscard]] absl::StatusOr<std::optional<uint64_t>> ParseTimeout(absl::string_view body,
                                                                   bool required);

// POST /sandboxes/ID/fork: {"count", "timeout"}.
struct ForkRequest {
  uint32_t count = 1;             // 1 to kMaxForkCount
  uint64_t timeout_seconds = 15;  // the forks' time to live; E2B's default
};
inline constexpr uint32_t kMaxForkCount = 100;
[[nodiscard]] absl::StatusOr<ForkRequest> ParseForkRequest(absl::string_view body);

// POST /sandboxes/ID/snapshots: {"name"}, optional. A name is 1 to 128 of lowercase letters,
// digits, '-', '_', '.' and '/', not starting with one of the last four; a ":TAG" after it
// (E2B's tags) is accepted and dropped, as this server keeps one snapshot per name.
[[nodiscard]] absl::StatusOr<std::optional<std::string>> ParseSnapshotRequest(
    absl::string_view body);
// A snapshot's name as a create's templateID or a delete names it (":default" and other
// tags dropped); nullopt if it cannot be one.
std::optional<std::string> SnapshotName(absl::string_view text);

// GET /snapshots: by the sandbox they were taken of, by name, paged as ListQuery.
struct SnapshotQuery {
  std::string sandbox_id;
  std::string name;
  uint32_t limit = 100;
  uint64_t offset = 0;
};
[[nodiscard]] absl::StatusOr<SnapshotQuery> ParseSnapshotQuery(absl::string_view target);

struct SnapshotInfo {
  std::string snapshot_id;  // what a create names as its templateID
  std::vector<std::string> names;
};
std::string SnapshotJson(const SnapshotInfo& s);
std::string SnapshotListJson(const std::vector<SnapshotInfo>& all);

struct ListQuery {
  std::set<std::string> states;  // "running", "paused"; empty: both
  std::map<std::string, std::string> metadata;
  uint32_t limit = 100;
  uint64_t offset = 0;  // from nextToken, which is ours (a decimal offset)
};
[[nodiscard]] absl::StatusOr<ListQuery> ParseListQuery(absl::string_view target);

// POST /volumes: {"name": NAME}; INVALID_ARGUMENT without a name.
[[nodiscard]] absl::StatusOr<std::string> ParseNewVolume(absl::string_view body);
// A volume as the API describes it (E2B's VolumeAndToken; the id is its name, and the token
// is what the volume content API takes).
std::string VolumeJson(const std::string& name, const std::string& token);
// GET /volumes (E2B's Volume[]).
std::string VolumeListJson(const std::vector<std::string>& names);

// A sandbox as the API describes it.
struct Sandbox {
  std::string sandbox_id;
  std::string template_id;
  std::string state;  // "running" or "paused"
  int64_t started_ms = 0;
  int64_t end_ms = 0;
  uint32_t cpu_count = 0;
  uint64_t memory_mb = 0, disk_mb = 0;
  std::map<std::string, std::string> metadata;
  std::string envd_access_token;
  // What reaches its ports when they are not public (E2B's header e2b-traffic-access-token).
  std::string traffic_access_token;
  std::string domain;
  std::vector<std::pair<std::string, std::string>> volume_mounts;  // {name, path}
  bool auto_pause = false;  // lifecycle.onTimeout: paused at its timeout rather than killed
};
// The create/connect answer (E2B's Sandbox schema).
std::string SandboxJson(const Sandbox& s);
// The answer to a fork: one {"sandbox": ...} per fork (E2B's SandboxForkResult[]).
std::string ForkResultsJson(const std::vector<Sandbox>& forks);
// GET /sandboxes/ID (SandboxDetail).
std::string SandboxDetailJson(const Sandbox& s);
// GET /v2/sandboxes (ListedSandbox[]).
std::string SandboxListJson(const std::vector<Sandbox>& all);
// One sample of a sandbox's use (E2B's SandboxMetric).
struct Metric {
  int64_t unix_ms = 0;
  uint32_t cpu_count = 0;
  double cpu_used_pct = 0;
  uint64_t mem_used = 0, mem_total = 0;
  uint64_t disk_used = 0, disk_total = 0;
};
std::string MetricsJson(const std::vector<Metric>& samples);
// GET /sandboxes/ID/metrics?start=S&end=E (Unix seconds, each optional: from the start, to
// now). INVALID_ARGUMENT for one that is not a whole number, or an end before the start.
struct MetricsQuery {
  int64_t start_s = 0;
  int64_t end_s = INT64_MAX;
};
[[nodiscard]] absl::StatusOr<MetricsQuery> ParseMetricsQuery(absl::string_view target);
// The HTTP status the SDKs expect for an error of this code (NOT_FOUND 404, ALREADY_EXISTS and
// FAILED_PRECONDITION 409, ...).
int HttpCode(const absl::Status& s);
// {"code": CODE, "message": MESSAGE}: the SDKs read 404 and 409 from `code`.
std::string ErrorJson(int code, absl::string_view message);

// The query of a request-target, each name and value percent-decoded, in order;
// INVALID_ARGUMENT for a broken escape.
[[nodiscard]] absl::StatusOr<std::vector<std::pair<std::string, std::string>>> QueryParameters(
    absl::string_view target);

// An operator's map from E2B template names to Airlock images (airlockd --e2b-templates):
// lines of `NAME IMAGE`, blank lines and `#` comments; each NAME once, at most 256 bytes and
// 1024 lines. INVALID_ARGUMENT naming the line.
[[nodiscard]] absl::StatusOr<std::map<std::string, std::string>> ParseTemplateMap(
    absl::string_view text);

// The reason phrase of an HTTP status this API answers with.
const char* HttpReason(int code);

// Percent-decoding as URLs use it ('+' stays '+'); nullopt for a broken escape.
std::optional<std::string> PercentDecode(absl::string_view text);

}  // namespace airlock::gateway::e2b

#endif  // AIRLOCK_GATEWAY_E2B_CONTROL_H_
