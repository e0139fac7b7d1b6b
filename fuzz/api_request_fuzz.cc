// Fuzz target: API requests as airlockd receives them: protobuf bytes of an Exec message, a
// session creation or an image build, then the daemon's own checks of them.
#include <cstddef>
#include <cstdint>

#include "src/daemon/airlock_service.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  airlock::v1::ExecRequest exec;
  if (exec.ParseFromArray(data, static_cast<int>(size)) && exec.has_start()) {
    airlock::ValidateExecStart(exec.start()).IgnoreError();
  }
  airlock::v1::CreateSessionRequest create;
  if (create.ParseFromArray(data, static_cast<int>(size))) {
    airlock::SessionLimits limits;
    limits.vcpus = create.limits().vcpus();
    limits.memory_bytes = create.limits().memory_bytes();
    limits.pids = create.limits().pids();
    limits.disk_bytes = create.limits().disk_bytes();
    limits.ttl_seconds = create.limits().ttl_seconds();
    airlock::SessionManager::ResolveLimits(limits).IgnoreError();
  }
  airlock::v1::BuildImageRequest build;
  if (build.ParseFromArray(data, static_cast<int>(size))) {
    airlock::ImageBuildSpec spec;
    spec.suite = build.suite();
    spec.packages.assign(build.packages().begin(), build.packages().end());
    spec.npm.assign(build.npm().begin(), build.npm().end());
    spec.env.assign(build.env().begin(), build.env().end());
    spec.tag = build.tag();
    airlock::ValidateImageBuild(spec).IgnoreError();
  }
  return 0;
}
