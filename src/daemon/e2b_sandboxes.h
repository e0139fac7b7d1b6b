// The E2B-compatible control API on airlockd's HTTP gateway: E2B's SDKs (E2B_API_URL pointed
// at the gateway, E2B_API_KEY an Airlock API key) create, list, inspect, time, pause, resume and
// kill sandboxes, which are Airlock sessions of the key's tenant. Requests and answers follow
// E2B's REST API (src/gateway/e2b_control.h); each call acts as that tenant through
// SessionManager, so quotas, the egress ceiling and the audit apply as to any other caller (the
// audit names the key). What is not served yet answers 404 saying so.
//
// Mapping: a template is an image ("base" is Airlock's default image); `timeout` is the time
// left to live (300 s by default, as E2B's); sandboxes do not pause when idle (E2B's do not);
// network.allowOut lists the destinations the sandbox may reach (Airlock egress rules); a
// volume is an Airlock volume of the tenant's (its id is its name), attached read-write by one
// sandbox at a time (E2B lets several write one; Airlock refuses the second, naming the first);
// its files are reached without a sandbox through the volume content API (E2bVolumeContent).
// Thread-safe.
#ifndef AIRLOCK_DAEMON_E2B_SANDBOXES_H_
#define AIRLOCK_DAEMON_E2B_SANDBOXES_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "src/daemon/e2b_envd.h"
#include "src/daemon/e2b_metrics.h"
#include "src/daemon/e2b_volume_content.h"
#include "src/daemon/exposure_repository.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/state_store.h"
#include "src/gateway/e2b_control.h"
#include "src/gateway/http_gateway.h"

namespace airlock {

class E2bSandboxes {
 public:
  E2bSandboxes(SessionManager* sessions, StateStore* store, WorkspaceUploads* uploads)
      : sessions_(sessions),
        store_(store),
        envd_(sessions, store, uploads),
        metrics_(sessions, store),
        volume_content_(sessions, store) {}

  // E2B template names and the images they stand for (before serving).
  void set_templates(std::map<std::string, std::string> templates) {
    templates_ = std::move(templates);
  }
  // The size of a volume made through this API (E2B's have none); before serving.
  void set_volume_bytes(uint64_t bytes) { volume_bytes_ = bytes; }
  // Starts keeping sandboxes' metrics (before serving).
  void Start() { metrics_.Start(); }

  // The domain sandboxes' hosts are under (the gateway's --http-domain); before serving.
  void set_domain(std::string domain) { domain_ = std::move(domain); }

  // Serves one request if its path is the control API's, or it names a sandbox's envd by the
  // headers E2b-Sandbox-Id and E2b-Sandbox-Port (false: neither).
  bool Serve(const gateway::GatewayRequest& request, gateway::GatewayConnection& connection);
  // A request the gateway routed to port 49983 of a session: served by envd if the session is
  // a sandbox of this API (false: it is not; the port is an ordinary one).
  bool ServeEnvd(const gateway::GatewayRequest& request, gateway::GatewayConnection& connection);
  // Every port of a sandbox this API made is reached through the gateway as E2B's are (its
  // getHost(port)): public unless it was created with network.allowPublicTraffic false, then
  // with its traffic access token. nullopt: not such a sandbox.
  std::optional<Exposure> SandboxPort(const std::string& session_id, uint16_t port);
  // Ends the processes envd started (before airlockd pauses its sessions).
  void Stop() {
    metrics_.Stop();
    envd_.Stop();
  }

  // Requests refused for a missing or unknown API key since start.
  uint64_t refused() const { return refused_; }

 private:
  struct Answer {
    int code = 200;
    std::string body;           // JSON
    std::string extra_headers;  // whole lines
  };
  static Answer Failed(const absl::Status& s);
  Answer Handle(const gateway::e2b::Route& route, const Principal& who,
                const gateway::GatewayRequest& request, gateway::GatewayConnection& connection);
  Answer Create(const Principal& who, const std::string& body);
  Answer Get(const Principal& who, const std::string& id);
  Answer List(const Principal& who, const std::string& target);
  Answer Connect(const Principal& who, const std::string& id, const std::string& body);
  // The samples E2bMetrics kept in the range asked for; one of now if it has none yet.
  Answer Metrics(const Principal& who, const std::string& id, const std::string& target);
  // count sandboxes from one snapshot of a running or paused one, each living `timeout`.
  Answer Fork(const Principal& who, const std::string& id, const std::string& body);
  // A snapshot: a fork of the sandbox, paused, kept (never ending) as a template that creates
  // fork; a name moves from an older snapshot to the new one, and the older one is removed.
  Answer Snapshot(const Principal& who, const std::string& id, const std::string& body);
  Answer Snapshots(const Principal& who, const std::string& target);
  // A snapshot's removal (E2B's SDKs delete snapshots as templates).
  Answer DeleteTemplate(const Principal& who, const std::string& template_id);
  // The tenant's volumes, as E2B's volume API: the id is the name; snapshots are left out.
  Answer Volumes(const Principal& who, const gateway::e2b::Route& route, const std::string& body);
  Answer CreateFromSnapshot(const Principal& who, const E2bSandboxRecord& snapshot,
                            const gateway::e2b::NewSandbox& wanted,
                            const std::vector<EgressGrant>& egress);

  // The tenant's session `id` if it is a sandbox of this API's view: running or paused, and
  // not a snapshot (NOT_FOUND saying which).
  absl::StatusOr<SessionRecord> FindSandbox(const Principal& who, const std::string& id);
  // What this API keeps of a session: its record, or one made up of the session's image for
  // a session made otherwise (airlock session create).
  absl::StatusOr<E2bSandboxRecord> RecordOf(const SessionRecord& session);
  // Makes the new session `session` (a fork) a sandbox like `like` with a token of its own,
  // living ttl_seconds (0: as long as it is not killed), paused then with auto_pause (unset:
  // as its source).
  absl::StatusOr<gateway::e2b::Sandbox> Adopt(const Principal& who, const SessionRecord& session,
                                              E2bSandboxRecord like, uint64_t ttl_seconds,
                                              std::optional<bool> auto_pause = std::nullopt);
  // The sandbox as the API describes it; NOT_FOUND for a session that is not running or
  // paused.
  absl::StatusOr<gateway::e2b::Sandbox> Describe(const SessionRecord& record);

  SessionManager* sessions_;
  StateStore* store_;
  std::string domain_ = "airlock.localhost";
  std::map<std::string, std::string> templates_;
  uint64_t volume_bytes_ = 10ull << 30;
  std::atomic<uint64_t> refused_{0};
  E2bEnvd envd_;
  E2bMetrics metrics_;
  E2bVolumeContent volume_content_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_E2B_SANDBOXES_H_
