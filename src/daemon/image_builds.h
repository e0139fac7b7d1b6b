// Image builds in airlockd (Images.Build): a Debian root filesystem from mmdebstrap and, with npm
// packages, a layer of them whose install scripts ran in a build VM. The build VM is a one-shot
// session of the caller (within its quotas) made with airlockd's own SessionManager, and removed
// with its image whatever happens; the image is tagged in the caller's view of the store, as an
// import is (root's are everyone's, another user's theirs alone).
//
// Files: $AIRLOCK_CACHE (default /var/cache/airlock)/rootfs (mmdebstrap's tars, keyed by suite
// and packages), npm/ (the npm layers, keyed by base and packages as written), npm-cache/
// (npm's own). Thread-safe: builds may run at once (work in progress has names of its own), one
// per tenant and two on the host (BuildSlots).
#ifndef AIRLOCK_DAEMON_IMAGE_BUILDS_H_
#define AIRLOCK_DAEMON_IMAGE_BUILDS_H_

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "src/common/host_paths.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/state_store.h"
#include "src/image/image_store.h"

namespace airlock {

struct ImageBuildSpec {
  std::string suite;                  // bookworm
  std::vector<std::string> packages;  // Debian packages besides minbase
  std::vector<std::string> npm;       // npm specs (ValidateNpmSpec)
  std::vector<std::string> env;       // KEY=VALUE, the image's environment
  std::string tag;                    // the image's name
};

// Checks every field of a build request (client input) before anything runs: INVALID_ARGUMENT
// saying what to write instead.
[[nodiscard]] absl::Status ValidateImageBuild(const ImageBuildSpec& spec);

// How many image builds run at once: one per tenant, and at most host_max on the host (a build
// holds mmdebstrap, npm or a build VM for minutes). Thread-safe.
class BuildSlots {
 public:
  explicit BuildSlots(size_t host_max) : host_max_(host_max) {}
  // A slot for tenant's build, held until the returned pointer (and its copies) go;
  // RESOURCE_EXHAUSTED saying why when there is none.
  [[nodiscard]] absl::StatusOr<std::shared_ptr<void>> Take(const std::string& tenant);

 private:
  const size_t host_max_;
  absl::Mutex mu_;
  std::set<std::string> running_ ABSL_GUARDED_BY(mu_);  // tenants with a build
};

struct DockerfileBuildSpec {
  std::string dockerfile;   // its text
  std::string context_tar;  // the build context, a tar the client sent (BuildContext)
  std::map<std::string, std::string> build_args;  // --build-arg NAME=VALUE
  std::string target;               // the stage to build (its AS name); empty: the last
  std::vector<EgressGrant> egress;  // RUN's network (none: no network)
  // RUN's secrets (placeholders in the build VM, values swapped in by the proxy), for the
  // steps that have the network.
  std::vector<SecretRequest> secrets;
  bool no_cache = false;  // run every step again
  std::string tag;        // the image's name
};

class ImageBuilder {
 public:
  // remove_templates: deletes the templates of images freed (the build VM's image has one).
  ImageBuilder(HostPaths paths, SessionManager* sessions, StateStore* store,
               std::function<void(const std::vector<std::string>&)> remove_templates);

  // A line for the client: the step that runs, or a line of the build VM's output.
  using Progress = std::function<void(const std::string& line)>;
  // Whether the client gave up: asked between steps, while npm runs and while the build VM
  // runs a command. mmdebstrap is not stopped mid-way (see Build in image_builds.cc).
  using Cancelled = std::function<bool()>;

  // What builds of an earlier airlockd left when it stopped mid-way: their images' tags
  // (airlock-build/...) in every view of the store, and npm layers half written by a process
  // that is gone. Call at start, after SessionManager::Recover (whose sessions keep their
  // images).
  void RemoveLeftovers();

  // Builds a Dockerfile (src/daemon/dockerfile_build.cc): each RUN in a build VM of the step
  // before, each step's layer cached by what it did and on, the result tagged in who's
  // images. INVALID_ARGUMENT for a Dockerfile or context it cannot build (the line named),
  // FAILED_PRECONDITION for a RUN that failed (its exit status and last lines).
  [[nodiscard]] absl::StatusOr<ImageInfo> BuildDockerfile(const Principal& who,
                                                          const DockerfileBuildSpec& spec,
                                                          const Progress& progress,
                                                          const Cancelled& cancelled);

  // Builds spec (ValidateImageBuild first) for who and tags it in who's images.
  [[nodiscard]] absl::StatusOr<ImageInfo> Build(const Principal& who, const ImageBuildSpec& spec,
                                                const Progress& progress,
                                                const Cancelled& cancelled);

 private:
  friend class DockerfileBuild;
  // A one-shot session of the caller on an image the build tagged for itself (`tag`, once
  // `tagged`): the session, its record and the tag go when this does, whatever happened.
  struct BuildVm {
    ImageBuilder* builder;
    const Principal& who;
    ImageStore& images;
    std::string tag;
    bool tagged = false;
    std::string id;  // once started
    // 2 vCPUs, 2 GiB, a 16 GiB disk, no idle timeout; egress as given (none: no network),
    // and secrets bound as a session's are.
    [[nodiscard]] absl::Status Start(const std::vector<EgressGrant>& egress,
                                     const std::vector<SecretRequest>& secrets = {});
    ~BuildVm();
  };

  // The npm layer of an image (a tar of usr/local), cached under cache/npm.
  absl::StatusOr<std::string> NpmLayer(const Principal& who, const std::string& rootfs_tar,
                                       const std::vector<std::string>& specs, uint64_t cap,
                                       const Progress& progress, const Cancelled& cancelled);
  // Removes a build's tag from images, and its image unless a session uses it (all of it
  // stays when which ones do is unknown).
  void RemoveBuildTag(ImageStore& images, const std::string& tag);
  HostPaths paths_;
  SessionManager* sessions_;
  StateStore* store_;
  std::function<void(const std::vector<std::string>&)> remove_templates_;
  std::string cache_;  // $AIRLOCK_CACHE or /var/cache/airlock
  BuildSlots slots_;
};

// For the image builds' own files: a command as root with the build VM's PATH, and running one
// in a build VM: its stdout into out_fd (at most cap bytes; `output_what` names it in the
// error) when out_fd >= 0, else to the client as lines, as its stderr always is. A command
// that exits non-zero is FAILED_PRECONDITION with its status and last lines; killed and
// CANCELLED when the client gives up.
ExecRequest RootCommand(const std::vector<std::string>& argv);
// "-<pid>-<n>": unique among the threads of airlockd, for work in progress and build tags.
std::string UniqueSuffix();
[[nodiscard]] absl::Status RunInBuildVm(LiveSession& live, const ExecRequest& request, int out_fd,
                                        uint64_t cap, const ImageBuilder::Progress& progress,
                                        const ImageBuilder::Cancelled& cancelled,
                                        const std::string& output_what = "its output");

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_IMAGE_BUILDS_H_
