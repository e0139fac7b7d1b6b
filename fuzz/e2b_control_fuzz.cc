// Fuzz target: the E2B-compatible API's parsers of what API-key and volume-token holders send
// (create, timeout, fork and snapshot bodies, list queries, routes, snapshot names, the volume
// content API's queries and bodies). Besides not crashing: what a parse accepts is within the
// caps, and a volume path never leaves the volume.
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/gateway/e2b_control.h"
#include "src/gateway/e2b_volume_content.h"

namespace e2b = airlock::gateway::e2b;

namespace {
void Check(bool ok) {
  if (!ok) __builtin_trap();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<e2b::NewSandbox> n = e2b::ParseNewSandbox(text);
  if (n.ok()) {
    Check(n->metadata.size() <= e2b::kMaxEntries && n->env_vars.size() <= e2b::kMaxEntries);
    Check(!n->template_id.empty() && n->template_id.size() <= 256);
    Check(!n->timeout_seconds.has_value() || (*n->timeout_seconds >= 1));
  }
  (void)e2b::ParseTimeout(text, true);
  (void)e2b::ParseTimeout(text, false);
  absl::StatusOr<e2b::ListQuery> q = e2b::ParseListQuery(text);
  if (q.ok()) Check(q->limit >= 1 && q->limit <= 100 && q->metadata.size() <= e2b::kMaxEntries);
  // An operation on one sandbox names it; one on one volume names that.
  for (const char* method : {"POST", "GET"}) {
    e2b::Route r = e2b::RouteOf(method, text);
    switch (r.op) {
      case e2b::Op::kGet:
      case e2b::Op::kSetTimeout:
      case e2b::Op::kPause:
      case e2b::Op::kConnect:
      case e2b::Op::kMetrics:
      case e2b::Op::kFork:
      case e2b::Op::kSnapshot:
        Check(!r.sandbox_id.empty());
        break;
      case e2b::Op::kGetVolume:
        Check(!r.volume_id.empty());
        break;
      default:
        break;
    }
  }
  e2b::Route d = e2b::RouteOf("DELETE", text);
  Check(d.op != e2b::Op::kDeleteTemplate || !d.template_id.empty());
  Check(d.op != e2b::Op::kKill || !d.sandbox_id.empty());
  Check(d.op != e2b::Op::kDeleteVolume || !d.volume_id.empty());
  for (const char* method : {"GET", "POST", "PUT", "PATCH", "DELETE"}) {
    e2b::Route r = e2b::RouteOf(method, text);
    Check(!e2b::IsVolumeContent(r.op) || !r.volume_id.empty());
  }
  absl::StatusOr<e2b::VolumeContentQuery> vq = e2b::ParseVolumeContentQuery(text);
  if (vq.ok()) {
    Check(!vq->path.empty() && vq->path[0] == '/');
    Check(vq->path.find("/../") == std::string::npos && !vq->path.ends_with("/..") &&
          vq->path.find("//") == std::string::npos);
    Check(vq->depth >= 1 && vq->depth <= airlock::kMaxFsDepth);
    Check(!vq->mode || *vq->mode <= 07777);
  }
  absl::StatusOr<e2b::VolumeMetadata> vm = e2b::ParseVolumeMetadata(text);
  if (vm.ok()) Check((vm->uid || vm->gid || vm->mode) && (!vm->mode || *vm->mode <= 07777));
  std::optional<std::string> bearer = e2b::BearerToken(text);
  if (bearer) Check(!bearer->empty());
  absl::StatusOr<e2b::ForkRequest> fork = e2b::ParseForkRequest(text);
  if (fork.ok()) Check(fork->count >= 1 && fork->count <= e2b::kMaxForkCount);
  absl::StatusOr<std::optional<std::string>> snapshot = e2b::ParseSnapshotRequest(text);
  if (snapshot.ok() && snapshot->has_value()) {
    Check(e2b::SnapshotName(**snapshot) == **snapshot);
  }
  absl::StatusOr<e2b::SnapshotQuery> sq = e2b::ParseSnapshotQuery(text);
  if (sq.ok()) Check(sq->limit >= 1 && sq->limit <= 100 && sq->sandbox_id.size() <= 64);
  absl::StatusOr<e2b::MetricsQuery> mq = e2b::ParseMetricsQuery(text);
  if (mq.ok()) Check(mq->start_s >= 0 && mq->end_s >= mq->start_s);
  absl::StatusOr<std::map<std::string, std::string>> templates = e2b::ParseTemplateMap(text);
  if (templates.ok()) Check(templates->size() <= 1024);
  std::optional<std::string> name = e2b::SnapshotName(text);
  if (name) Check(!name->empty() && name->size() <= 128 && name->find(':') == std::string::npos);
  (void)e2b::PercentDecode(text);
  return 0;
}
