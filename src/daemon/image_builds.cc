#include "src/daemon/image_builds.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "src/common/byte_size.h"
#include "src/common/file_util.h"
#include "src/common/log.h"
#include "src/common/sha256.h"
#include "src/common/unique_fd.h"
#include "src/common/utf8.h"
#include "src/image/npm_layer.h"
#include "src/image/npm_spec.h"
#include "src/image/tar_to_ext4.h"

namespace airlock {
namespace {

constexpr size_t kMaxPackages = 512;
constexpr size_t kMaxNpmSpecs = 64;
constexpr size_t kMaxEnv = 256;
constexpr size_t kMaxEnvBytes = 32 << 10;  // one variable
// The build VM's output reaches the client as at most this many lines of at most this many
// bytes (the rest is not shown; a failure's exit status still is).
constexpr int kMaxOutputLines = 500;
constexpr size_t kMaxLineBytes = 500;
// One command in the build VM (npm rebuild under TCG is slow, but ends).
constexpr absl::Duration kBuildCommandTimeout = absl::Hours(1);
// Builds at once on the host (each per tenant: one).
constexpr size_t kMaxBuildsAtOnce = 2;
// The tags of builds' own images (a base with npm packages, for the build VM).
constexpr char kBuildTagPrefix[] = "airlock-build/";
constexpr char kGuestPath[] = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// Client input, quoted in a message: at most 100 bytes, valid UTF-8.
std::string Quote(const std::string& s) {
  return absl::StrCat("\"", EscapeInvalidUtf8(s.substr(0, 100)), s.size() > 100 ? "..." : "", "\"");
}

// A command's output as lines for the client: at most kMaxOutputLines of kMaxLineBytes, valid
// UTF-8, without terminal escapes or other control characters (the guest's bytes are hostile).
class OutputLines {
 public:
  explicit OutputLines(const ImageBuilder::Progress& progress) : progress_(progress) {}
  ~OutputLines() { Finish(); }
  void Add(std::string_view data) {
    for (char c : data) {
      if (c == '\n') {
        Emit();
      } else if (pending_.size() < kMaxLineBytes) {
        pending_.push_back(c);
      }
    }
  }
  // The last line, if it had no newline.
  void Finish() {
    if (!pending_.empty()) Emit();
  }
  // The last few lines (all shown or not), for a failure's message.
  std::string Last() const { return absl::StrJoin(last_, "\n"); }

 private:
  void Emit() {
    std::string line;
    for (size_t i = 0; i < pending_.size(); ++i) {
      unsigned char c = static_cast<unsigned char>(pending_[i]);
      if (c == 0x1b && i + 1 < pending_.size() && pending_[i + 1] == '[') {
        // A CSI sequence (colours, cursor movement): dropped up to its final byte.
        for (i += 2; i < pending_.size() && !(pending_[i] >= 0x40 && pending_[i] <= 0x7e); ++i) {
        }
        continue;
      }
      if (c == '\t') {
        line.push_back(' ');
      } else if (c >= 0x20 && c != 0x7f) {
        line.push_back(static_cast<char>(c));
      }
    }
    pending_.clear();
    last_.push_back("  " + EscapeInvalidUtf8(line));
    if (last_.size() > kLastLines) last_.pop_front();
    if (lines_ > kMaxOutputLines) return;
    if (++lines_ > kMaxOutputLines) {
      progress_(absl::StrCat("  (the build VM's output goes on; only its first ", kMaxOutputLines,
                             " lines are shown)"));
      return;
    }
    progress_("  " + EscapeInvalidUtf8(line));
  }
  static constexpr size_t kLastLines = 10;
  const ImageBuilder::Progress& progress_;
  std::string pending_;
  std::deque<std::string> last_;
  int lines_ = 0;
};

}  // namespace

std::string UniqueSuffix() {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat("-", getpid(), "-", counter.fetch_add(1));
}

ExecRequest RootCommand(const std::vector<std::string>& argv) {
  ExecRequest request;
  request.argv = argv;
  request.env = {kGuestPath, "LANG=C.UTF-8"};
  return request;
}

absl::Status RunInBuildVm(LiveSession& live, const ExecRequest& request, int out_fd, uint64_t cap,
                          const ImageBuilder::Progress& progress,
                          const ImageBuilder::Cancelled& cancelled,
                          const std::string& output_what) {
  const std::vector<std::string>& argv = request.argv;
  absl::StatusOr<std::unique_ptr<ExecStream>> started = live.vm->channel().StartExec(request);
  if (!started.ok()) {
    return absl::UnavailableError(absl::StrCat("the build VM: ", started.status().message()));
  }
  std::unique_ptr<ExecStream> exec = std::move(*started);
  OutputLines lines(progress);
  uint64_t written = 0;
  bool overflow = false;
  absl::Status write_failed;
  absl::Time deadline = absl::Now() + kBuildCommandTimeout;
  auto kill = [&] {
    // The session is removed right after (its VM with it); a channel that already failed
    // has no command left to kill.
    exec->Signal(SIGKILL).IgnoreError();
    exec->Abandon();
  };
  std::string what = absl::StrCat("`", absl::StrJoin(argv, " "), "`");
  for (;;) {
    if (cancelled()) {
      kill();
      return absl::CancelledError(
          absl::StrCat("the client cancelled; ", what, " was killed in the build VM"));
    }
    if (absl::Now() >= deadline) {
      kill();
      return absl::DeadlineExceededError(absl::StrCat(what, " did not end in the build VM within ",
                                                      absl::FormatDuration(kBuildCommandTimeout)));
    }
    absl::StatusOr<ExecEvent> event =
        exec->Next(std::min(deadline, absl::Now() + absl::Milliseconds(250)));
    if (!event.ok()) {
      if (absl::IsDeadlineExceeded(event.status())) continue;
      return absl::UnavailableError(
          absl::StrCat("the build VM failed: ", event.status().message()));
    }
    switch (event->type) {
      case ExecEvent::Type::kStdout:
        if (out_fd < 0) {
          lines.Add(event->data);
        } else if (!overflow && write_failed.ok()) {
          written += event->data.size();
          if (written > cap) {
            overflow = true;
          } else {
            write_failed = WriteAll(out_fd, event->data);
          }
        }
        break;
      case ExecEvent::Type::kStderr:
        lines.Add(event->data);
        break;
      case ExecEvent::Type::kExit:
        lines.Finish();
        if (event->exit_kind != ExitKind::kExited || event->code != 0) {
          std::string how =
              event->exit_kind == ExitKind::kExited     ? absl::StrCat("exit ", event->code)
              : event->exit_kind == ExitKind::kSignaled ? absl::StrCat("signal ", event->code)
                                                        : "could not start";
          std::string last = lines.Last();
          return absl::Status(event->exit_kind == ExitKind::kExited
                                  ? absl::StatusCode::kFailedPrecondition
                                  : absl::StatusCode::kUnavailable,
                              absl::StrCat(what, " failed in the build VM (", how,
                                           event->message.empty() ? "" : ": ", event->message, ")",
                                           last.empty() ? "" : "; its last lines:\n", last));
        }
        if (overflow) {
          return absl::ResourceExhaustedError(absl::StrCat(
              output_what, " is larger than ", FormatBytes(cap),
              ", the most this image may add (an image's size, or what your images quota has "
              "left: airlock quota shows it)"));
        }
        return write_failed;
    }
  }
}

absl::StatusOr<std::shared_ptr<void>> BuildSlots::Take(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  if (running_.contains(tenant)) {
    return absl::ResourceExhaustedError(
        "an image build of yours is running; wait for it to end (one build at a time per user)");
  }
  if (running_.size() >= host_max_) {
    return absl::ResourceExhaustedError(
        absl::StrCat(running_.size(),
                     " image builds are running on this host, the most at once; "
                     "try again when one has ended"));
  }
  running_.insert(tenant);
  // No object: the deleter runs when the last copy goes, and frees the slot.
  return std::shared_ptr<void>(nullptr, [this, tenant](void*) {
    absl::MutexLock lock(&mu_);
    running_.erase(tenant);
  });
}

absl::Status ValidateImageBuild(const ImageBuildSpec& spec) {
  if (spec.suite.empty()) {
    return absl::InvalidArgumentError("name the Debian suite to build from, like bookworm");
  }
  if (!IsDebianSuiteName(spec.suite)) {
    return absl::InvalidArgumentError(
        absl::StrCat("suite ", Quote(spec.suite),
                     " is not a Debian suite name; give one like bookworm or trixie (lowercase "
                     "letters, digits and -)"));
  }
  if (spec.packages.size() > kMaxPackages) {
    return absl::InvalidArgumentError(
        absl::StrCat("at most ", kMaxPackages, " Debian packages; name fewer"));
  }
  for (const std::string& p : spec.packages) {
    if (!IsDebianPackageName(p)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "package ", Quote(p),
          " is not a Debian package name; give names like python3 or libssl3 (lowercase "
          "letters, digits and + - ., one name each, no versions)"));
    }
  }
  if (spec.npm.size() > kMaxNpmSpecs) {
    return absl::InvalidArgumentError(
        absl::StrCat("at most ", kMaxNpmSpecs, " npm packages; name fewer"));
  }
  for (const std::string& n : spec.npm) {
    if (absl::Status s = ValidateNpmSpec(n); !s.ok()) return s;
  }
  if (spec.env.size() > kMaxEnv) {
    return absl::InvalidArgumentError(
        absl::StrCat("at most ", kMaxEnv, " environment variables; set fewer"));
  }
  for (const std::string& e : spec.env) {
    size_t eq = e.find('=');
    bool ok = eq != std::string::npos && eq > 0 && e.size() <= kMaxEnvBytes &&
              e.find('\0') == std::string::npos;
    for (size_t i = 0; ok && i < eq; ++i) {
      ok = absl::ascii_isgraph(static_cast<unsigned char>(e[i]));
    }
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable ", Quote(e),
                       " is not KEY=VALUE; give one like PIP_BREAK_SYSTEM_PACKAGES=1 (a name "
                       "of printable characters without spaces, at most 32 KiB in all)"));
    }
  }
  if (spec.tag.empty()) {
    return absl::InvalidArgumentError("give the image a name (tag), like team/devbox:1");
  }
  return ImageStore::ValidateName(spec.tag);
}

ImageBuilder::ImageBuilder(HostPaths paths, SessionManager* sessions, StateStore* store,
                           std::function<void(const std::vector<std::string>&)> remove_templates)
    : paths_(std::move(paths)),
      sessions_(sessions),
      store_(store),
      remove_templates_(std::move(remove_templates)),
      slots_(kMaxBuildsAtOnce) {
  const char* cache = std::getenv("AIRLOCK_CACHE");
  cache_ = cache != nullptr && *cache != '\0' ? cache : "/var/cache/airlock";
}

void ImageBuilder::RemoveBuildTag(ImageStore& images, const std::string& tag) {
  absl::StatusOr<std::vector<std::string>> in_use = sessions_->images().InUse();
  LogIfFailed(in_use.status(), "image build: the sessions' images not listed");
  if (!in_use.ok()) {
    in_use.emplace();
    absl::StatusOr<ImageInfo> info = images.Resolve(tag);
    if (info.ok()) in_use->push_back(info->digest);  // Prune frees it later
  }
  absl::StatusOr<ImageStore::RemoveResult> removed = images.Remove(tag, *in_use);
  LogIfFailed(removed.status(), absl::StrCat("image build: build image ", tag, " not removed"));
  if (removed.ok() && removed->freed) remove_templates_({removed->digest});
}

ImageBuilder::BuildVm::~BuildVm() {
  if (!id.empty()) {
    LogIfFailed(builder->sessions_->Remove(who, id, "its image build ended"),
                absl::StrCat("build VM ", id, " not removed"));
    LogIfFailed(builder->store_->sessions().Delete(who, who.Tenant(), id),
                absl::StrCat("build VM ", id, ": its record not deleted"));
  }
  if (tagged) builder->RemoveBuildTag(images, tag);
}

absl::Status ImageBuilder::BuildVm::Start(const std::vector<EgressGrant>& egress,
                                          const std::vector<SecretRequest>& secrets) {
  SessionLimits limits;
  limits.vcpus = 2;
  limits.memory_bytes = 2ull << 30;
  limits.disk_bytes = 16ull << 30;
  limits.idle_timeout_seconds = 0;
  limits.ttl_seconds = 0;
  absl::StatusOr<SessionRecord> created =
      builder->sessions_->Create(who, tag, limits, egress, secrets, nullptr, /*one_shot=*/true);
  if (!created.ok()) {
    return absl::Status(created.status().code(),
                        absl::StrCat("the build VM: ", created.status().message()));
  }
  id = created->id;
  return absl::OkStatus();
}

void ImageBuilder::RemoveLeftovers() {
  for (const std::string& tenant : ImageStore::Tenants(sessions_->images().dir())) {
    ImageStore images = sessions_->images().ForScope(tenant);
    for (const std::string& name : images.OwnNames()) {
      if (!name.starts_with(kBuildTagPrefix)) continue;
      LogInfo(absl::StrCat("image build: removing ", name, ", left by a build that did not end"));
      RemoveBuildTag(images, name);
    }
  }
  // "<layer>.fetched-<pid>-<n>" and "<layer>.tmp-<pid>-<n>" (npm's layers, and each user's
  // Dockerfile layers):
  // written by airlockd <pid>, which may be another one sharing the cache (only a process that
  // is gone left them).
  std::vector<std::string> dirs = {cache_ + "/npm"};
  for (const std::string& user : ListDirectory(cache_ + "/dockerfile")) {
    dirs.push_back(absl::StrCat(cache_, "/dockerfile/", user));
  }
  for (const std::string& dir : dirs) {
    for (const std::string& file : ListDirectory(dir)) {
      size_t dot = file.find(".fetched-");
      if (dot == std::string::npos) dot = file.find(".tmp-");
      if (dot == std::string::npos) continue;
      size_t pid_at = file.find('-', dot) + 1;
      std::string pid = file.substr(pid_at, file.find('-', pid_at) - pid_at);
      if (pid.empty() || access(("/proc/" + pid).c_str(), F_OK) == 0) continue;
      if (unlink((dir + "/" + file).c_str()) != 0 && errno != ENOENT) {
        LogWarning(
            absl::StrCat("image build: ", dir, "/", file, " not removed: ", strerror(errno)));
      }
    }
  }
}

absl::StatusOr<ImageInfo> ImageBuilder::Build(const Principal& who, const ImageBuildSpec& spec,
                                              const Progress& progress,
                                              const Cancelled& cancelled) {
  if (absl::Status s = ValidateImageBuild(spec); !s.ok()) return s;
  absl::StatusOr<std::shared_ptr<void>> slot = slots_.Take(who.Tenant());
  if (!slot.ok()) return slot.status();
  std::vector<std::string> packages = spec.packages;
  // npm packages need Node.js and npm in the image (their scripts run there), and the
  // registry's certificates for the agents that use them.
  for (const char* needed : {"nodejs", "npm", "ca-certificates"}) {
    if (!spec.npm.empty() &&
        std::find(packages.begin(), packages.end(), needed) == packages.end()) {
      packages.push_back(needed);
    }
  }
  // What the caller may still add: all of an image for root, the rest of its quota otherwise.
  uint64_t cap = std::min(sessions_->images().AccessFor(who).max_bytes, kMaxImageBytes);
  progress(absl::StrCat("debian ", spec.suite, " + ",
                        packages.empty() ? "nothing" : absl::StrJoin(packages, ","),
                        spec.npm.empty() ? "" : " + npm ", absl::StrJoin(spec.npm, " ")));
  progress(
      "mmdebstrap: the root filesystem (minbase and the packages, from the host's apt "
      "sources; cached by suite and packages)");
  // mmdebstrap is not stopped mid-way when the client cancels: as root it mounts /proc, /sys
  // and /dev into the tree it builds, and killed it would leave those mounts and the tree
  // behind. It ends by itself (its tar is cached, so the next build of the same suite and
  // packages starts from it), and the cancellation is seen right after.
  absl::StatusOr<std::string> rootfs = ImageStore::DebianRootfs(spec.suite, packages, cache_);
  if (!rootfs.ok()) return rootfs.status();
  if (cancelled()) return absl::CancelledError("the client cancelled; no image was made");
  std::vector<std::string> tars = {*rootfs};
  if (!spec.npm.empty()) {
    absl::StatusOr<std::string> layer = NpmLayer(who, *rootfs, spec.npm, cap, progress, cancelled);
    if (!layer.ok()) return layer.status();
    tars.push_back(*layer);
  }
  if (cancelled()) return absl::CancelledError("the client cancelled; no image was made");
  uint64_t bytes = 0;
  for (const std::string& tar : tars) {
    struct stat st;
    if (stat(tar.c_str(), &st) == 0) bytes += static_cast<uint64_t>(st.st_size);
  }
  if (bytes > cap) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the image would be about ", FormatBytes(bytes), ", more than ", FormatBytes(cap),
        who.IsHostRoot() ? ", the most an image may be"
                         : ", what your images quota has left (airlock quota shows it)"));
  }
  progress("converting to an ext4 image");
  // Converting is not stopped mid-way either (it is quick, and leaves nothing half-made).
  ImageService::QuotaCheck within_quota = sessions_->images().CheckQuotaAfter(who);
  ImageStore images = sessions_->images().For(who);
  absl::StatusOr<ImageInfo> info = images.ImportRootfsLayers(tars, spec.tag, spec.env);
  if (!info.ok()) return info;
  if (absl::Status s = within_quota(*info); !s.ok()) return s;
  return info;
}

// The npm layer of an image: packages fetched on the host without their scripts, then
// installed for real in a build VM of the base image (scripts run there, with no network),
// and /usr/local taken back out as a tar (parsed like any image layer). Cached under
// cache/npm keyed by the base and the specs as written.
absl::StatusOr<std::string> ImageBuilder::NpmLayer(const Principal& who,
                                                   const std::string& rootfs_tar,
                                                   const std::vector<std::string>& specs,
                                                   uint64_t cap, const Progress& progress,
                                                   const Cancelled& cancelled) {
  absl::StatusOr<std::string> base_digest = Sha256FileHex(rootfs_tar);
  if (!base_digest.ok()) return base_digest.status();
  std::string key =
      Sha256Hex(absl::StrCat("npm-layer-v1\n", *base_digest, "\n", absl::StrJoin(specs, "\n")));
  std::string layer = absl::StrCat(cache_, "/npm/", key.substr(0, 24), ".tar");
  if (access(layer.c_str(), F_OK) == 0) {
    progress("npm: the packages' layer is cached");
    return layer;
  }
  if (absl::Status s = MakeDirectories(cache_ + "/npm", 0700); !s.ok()) return s;
  const std::string suffix = UniqueSuffix();
  std::string fetched = absl::StrCat(layer, ".fetched", suffix);
  struct RemoveFile {
    std::string path;
    ~RemoveFile() {
      if (unlink(path.c_str()) != 0 && errno != ENOENT) {
        LogWarning(absl::StrCat("image build: ", path, " not removed: ", strerror(errno)));
      }
    }
  } fetched_cleanup{fetched};
  progress(absl::StrCat("npm: fetching ", absl::StrJoin(specs, " "),
                        " with the host's npm (--ignore-scripts: no package's code runs on the "
                        "host)"));
  NpmFetchOptions fetch;
  // Root's npm settings (and logins) serve root's builds only, as registry logins serve only
  // root's pulls.
  fetch.own_settings = who.IsHostRoot();
  fetch.cancelled = cancelled;
  if (absl::Status s = FetchNpmLayer(specs, cache_, fetched, fetch); !s.ok()) return s;
  if (cancelled()) return absl::CancelledError("the client cancelled; no image was made");

  // The base plus the fetched packages, under a name of the build's own in the caller's images,
  // and a one-shot session of it: removed, with the name, whatever happens.
  ImageStore images = sessions_->images().For(who);
  std::string build_tag =
      absl::StrCat(kBuildTagPrefix, "npm", suffix, "-", absl::ToUnixMillis(absl::Now()));
  BuildVm build_vm{this, who, images, build_tag, false, ""};
  absl::StatusOr<ImageInfo> base = images.ImportRootfsLayers({rootfs_tar, fetched}, build_tag);
  if (!base.ok()) return base.status();
  build_vm.tagged = true;
  if (cancelled()) return absl::CancelledError("the client cancelled; no image was made");
  progress("npm: starting a build VM of the new image (2 vCPUs, 2 GiB, no network)");
  if (absl::Status s = build_vm.Start({}); !s.ok()) return s;
  // Booting is not stopped mid-way (Create waits for the VM): a client gone by then is seen here.
  if (cancelled()) return absl::CancelledError("the client cancelled; no image was made");
  // Held only while commands run: released before the session is removed.
  absl::StatusOr<std::shared_ptr<LiveSession>> live = sessions_->Live(who, build_vm.id);
  if (!live.ok()) return live.status();
  progress(absl::StrCat("npm: running the packages' install scripts in build VM ", build_vm.id));
  if (absl::Status s =
          RunInBuildVm(**live,
                       RootCommand({"npm", "rebuild", "--global", "--prefix", "/usr/local",
                                    "--foreground-scripts", "--no-update-notifier"}),
                       -1, 0, progress, cancelled);
      !s.ok()) {
    return s;
  }
  progress("npm: taking /usr/local out of the build VM");
  std::string tmp = absl::StrCat(layer, ".tmp", suffix);
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (fd.get() < 0) {
    return absl::UnavailableError(absl::StrCat("create ", tmp, ": ", strerror(errno)));
  }
  RemoveFile tmp_cleanup{tmp};
  absl::Status taken = RunInBuildVm(
      **live, RootCommand({"tar", "--create", "--file=-", "--directory=/", "usr/local"}), fd.get(),
      cap, progress, cancelled, "the build VM's /usr/local");
  live->reset();
  fd.reset();
  if (taken.ok()) taken = CommitFile(tmp, layer);  // fsynced, then renamed into place
  if (!taken.ok()) return taken;
  return layer;
}

}  // namespace airlock
