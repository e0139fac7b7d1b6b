// `airlock image`: pull, import, list and remove images through airlockd; build and push here.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "src/cli/cli_commands.h"
#include "src/cli/cli_flags.h"
#include "src/cli/daemon_client.h"
#include "src/cli/exec_client.h"
#include "src/common/byte_size.h"
#include "src/common/file_util.h"
#include "src/common/host_paths.h"
#include "src/common/unique_fd.h"
#include "src/image/image_store.h"
#include "src/image/npm_layer.h"
#include "src/image/oci_archive.h"
#include "src/image/registry_client.h"
#include "src/image/tar_to_ext4.h"

namespace airlock {
namespace {

constexpr char kImageUsage[] =
    "usage: airlock image import ARCHIVE [--tag NAME]\n"
    "       airlock image import --rootfs TAR --tag NAME\n"
    "       airlock image build --debian SUITE [--packages P1,P2] [--npm PKG]... [--env K=V]...\n"
    "                           --tag NAME\n"
    "       airlock image pull REF\n"
    "       airlock image push ARCHIVE REF\n"
    "       airlock image ls [--json]\n"
    "       airlock image rm NAME...\n"
    "       airlock image prune\n"
    "import ARCHIVE takes an OCI image layout or a `docker save` archive (tar, any compression):\n"
    "its layers become one read-only ext4 image, and `airlock run NAME` with no command runs its\n"
    "Entrypoint/Cmd with its Env and WorkingDir. --rootfs takes a root filesystem tar (e.g.\n"
    "from mmdebstrap --format=tar). Neither is ever unpacked on the host.\n"
    "build makes an image from Debian packages with mmdebstrap (minbase plus the packages, from\n"
    "the host's apt sources), caching the root filesystem in $AIRLOCK_CACHE (/var/cache/airlock);\n"
    "--env sets a variable of the image's environment (as an OCI image's Env).\n"
    "--npm adds an npm package (and Node.js): fetched here by npm with --ignore-scripts, so no\n"
    "package's code runs on this host; its install scripts run in a build VM without network,\n"
    "and /usr/local comes back out of it. Cached in $AIRLOCK_CACHE/npm by the packages as\n"
    "written: pin versions (@anthropic-ai/claude-code@2.1.197) to control updates. E.g.\n"
    "airlock image build --debian bookworm --packages git --npm @anthropic-ai/claude-code\n"
    "  --tag airlock/claude\n"
    "pull REF fetches an image from its registry (Docker Hub by default: python:3.11-slim;\n"
    "or ghcr.io/org/tool:1, localhost:5000/team/app@sha256:...); push uploads an image\n"
    "archive there. import and pull go through airlockd: what root adds is every user's, what\n"
    "another user adds is their own (within their images quota; `airlock quota`). Logins for\n"
    "pulls are airlockd's, used for root's pulls only (AIRLOCK_REGISTRY_USER/\n"
    "AIRLOCK_REGISTRY_PASSWORD in its environment, or root's ~/.config/airlock/auth.json:\n"
    "{\"HOST\": \"USER:PASSWORD\"}); push uses this shell's. AIRLOCK_REGISTRY_MIRROR replaces\n"
    "Docker Hub; AIRLOCK_INSECURE_REGISTRIES (HOST:PORT,...) allows plain http.\n"
    "rm removes tags, and an image's files with its last tag unless a session still uses it;\n"
    "prune frees images no tag and no session uses (both through airlockd, as root).\n";

int Usage(const char* problem) {
  std::fprintf(stderr, "airlock image: %s\n%s", problem, kImageUsage);
  return 2;
}

int Import(const std::vector<std::string>& args) {
  std::string tar, tag, archive;
  for (size_t i = 0; i < args.size(); ++i) {
    if ((args[i] == "--rootfs" || args[i] == "--tag") && i + 1 < args.size()) {
      (args[i] == "--rootfs" ? tar : tag) = args[i + 1];
      ++i;
    } else if (args[i][0] != '-' && archive.empty()) {
      archive = args[i];
    } else {
      return Usage(("unexpected argument " + args[i]).c_str());
    }
  }
  if (tar.empty() == archive.empty()) {
    return Usage("import needs an image ARCHIVE, or --rootfs TAR and --tag NAME");
  }
  if (!tar.empty() && tag.empty()) return Usage("import --rootfs needs --tag NAME");
  const std::string& path = archive.empty() ? tar : archive;
  UniqueFd in(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0) {
    std::fprintf(stderr, "airlock image import: %s: %s\n", path.c_str(), std::strerror(errno));
    return 1;
  }
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  // The archive goes to airlockd as it is read; airlockd converts it (and never unpacks it).
  grpc::ClientContext context;
  v1::Image image;
  std::unique_ptr<grpc::ClientWriter<v1::ImportImageChunk>> stream =
      client->images->Import(&context, &image);
  v1::ImportImageChunk chunk;
  chunk.set_name(tag);
  chunk.set_rootfs(!tar.empty());
  grpc::Status status = UploadFd(in.get(), chunk, *stream, context);
  if (!status.ok()) {
    std::fprintf(stderr, "airlock image import: %s\n", Describe(status).c_str());
    return 1;
  }
  std::printf("%s %s\n", image.name().c_str(), image.digest().c_str());
  return 0;
}

// The output of a command in the build VM: stdout into a file (at most a cap), stderr to ours.
class BuildIo : public ExecIo {
 public:
  BuildIo(int out_fd, uint64_t cap) : out_fd_(out_fd), cap_(cap) {}
  void Stdout(const std::string& data) override {
    if (out_fd_ < 0 || failed_) return;
    written_ += data.size();
    if (written_ > cap_ ||
        write(out_fd_, data.data(), data.size()) != static_cast<ssize_t>(data.size())) {
      failed_ = true;
    }
  }
  void Stderr(const std::string& data) override {
    (void)!write(STDERR_FILENO, data.data(), data.size());
  }
  bool failed() const { return failed_; }

 private:
  int out_fd_;
  uint64_t cap_;
  uint64_t written_ = 0;
  bool failed_ = false;
};

// Runs argv in session id; its stdout into out_fd (if >= 0). Fails with what went wrong.
absl::Status RunInBuildVm(DaemonClient& client, const std::string& id,
                          const std::vector<std::string>& argv, int out_fd, uint64_t cap) {
  v1::ExecStart start;
  start.set_session_id(id);
  for (const std::string& a : argv) start.add_argv(a);
  BuildIo io(out_fd, cap);
  grpc::ClientContext context;
  ExecOutcome outcome = RunExec(client, start, io, context);
  if (!outcome.exit) return absl::UnavailableError(Describe(outcome.status));
  if (io.failed()) {
    return absl::ResourceExhaustedError(
        absl::StrCat("the build VM's output did not fit (at most ", FormatBytes(cap), ")"));
  }
  if (outcome.exit->code() != 0) {
    return absl::UnavailableError(absl::StrCat(
        "`", absl::StrJoin(argv, " "), "` failed in the build VM (exit ", outcome.exit->code(), ")",
        outcome.exit->message().empty() ? "" : ": ", outcome.exit->message()));
  }
  return absl::OkStatus();
}

// The npm layer of an image: packages fetched on the host without their scripts, then
// installed for real in a build VM of the base image (scripts run there, with no network),
// and /usr/local taken back out as a tar (parsed like any image layer). Cached under
// cache/npm keyed by the base and the specs as written.
absl::StatusOr<std::string> NpmLayer(ImageStore& store, const std::string& rootfs_tar,
                                     const std::vector<std::string>& specs, const std::string& tag,
                                     const std::string& cache) {
  absl::StatusOr<std::string> base_digest = Sha256File(rootfs_tar);
  if (!base_digest.ok()) return base_digest.status();
  std::string key =
      Sha256String(absl::StrCat("npm-layer-v1\n", *base_digest, "\n", absl::StrJoin(specs, "\n")));
  std::string layer = absl::StrCat(cache, "/npm/", key.substr(0, 24), ".tar");
  if (access(layer.c_str(), F_OK) == 0) return layer;
  if (absl::Status s = MakeDirectories(cache + "/npm", 0700); !s.ok()) return s;
  std::string fetched = layer + ".fetched";
  std::fprintf(stderr, "airlock image build: fetching %s with npm (no scripts run here)\n",
               absl::StrJoin(specs, " ").c_str());
  if (absl::Status s = FetchNpmLayer(specs, cache, fetched); !s.ok()) return s;
  struct Cleanup {
    std::string path;
    ~Cleanup() { unlink(path.c_str()); }
  } fetched_cleanup{fetched};
  std::string build_tag = tag + "-npm-build";
  absl::StatusOr<ImageInfo> base = store.ImportRootfsLayers({rootfs_tar, fetched}, build_tag);
  if (!base.ok()) return base.status();
  std::optional<DaemonClient> client = Connect();
  if (!client) return absl::UnavailableError("the build VM needs airlockd");
  v1::CreateSessionRequest create;
  create.set_image(build_tag);
  create.mutable_limits()->set_vcpus(2);
  create.mutable_limits()->set_memory_bytes(2ull << 30);
  create.mutable_limits()->set_disk_bytes(16ull << 30);
  create.mutable_limits()->set_idle_timeout_seconds(0);
  v1::Session session;
  grpc::ClientContext create_context;
  grpc::Status created = client->sessions->Create(&create_context, create, &session);
  if (!created.ok()) return absl::UnavailableError("build VM: " + Describe(created));
  struct RemoveSession {
    DaemonClient& client;
    std::string id;
    std::string tag;
    ~RemoveSession() {
      grpc::ClientContext context;
      v1::RemoveSessionRequest request;
      request.set_id(id);
      v1::RemoveSessionResponse response;
      client.sessions->Remove(&context, request, &response);
      grpc::ClientContext images_context;
      v1::RemoveImagesRequest images;
      images.add_names(tag);
      v1::RemoveImagesResponse removed;
      client.images->Remove(&images_context, images, &removed);
    }
  } remove{*client, session.id(), build_tag};
  std::fprintf(stderr, "airlock image build: running the packages' install scripts in VM %s\n",
               session.id().c_str());
  if (absl::Status s = RunInBuildVm(*client, session.id(),
                                    {"npm", "rebuild", "--global", "--prefix", "/usr/local",
                                     "--foreground-scripts", "--no-update-notifier"},
                                    -1, 0);
      !s.ok()) {
    return s;
  }
  std::string tmp = layer + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return absl::UnavailableError(absl::StrCat("create ", tmp));
  absl::Status taken = RunInBuildVm(*client, session.id(),
                                    {"tar", "--create", "--file=-", "--directory=/", "usr/local"},
                                    fd, kMaxImageBytes);
  close(fd);
  if (taken.ok()) taken = CommitFile(tmp, layer);
  if (!taken.ok()) {
    unlink(tmp.c_str());
    return taken;
  }
  return layer;
}

int Build(const std::vector<std::string>& args, ImageStore& store) {
  std::string suite, packages, tag;
  std::vector<std::string> env, npm;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--env" && i + 1 < args.size()) {
      env.push_back(args[++i]);
      continue;
    }
    if (args[i] == "--npm" && i + 1 < args.size()) {
      if (absl::Status s = ValidateNpmSpec(args[++i]); !s.ok()) {
        return Usage(std::string(s.message()).c_str());
      }
      npm.push_back(args[i]);
      continue;
    }
    std::string* value = args[i] == "--debian"     ? &suite
                         : args[i] == "--packages" ? &packages
                         : args[i] == "--tag"      ? &tag
                                                   : nullptr;
    if (value == nullptr || i + 1 >= args.size()) {
      return Usage(("unexpected argument " + args[i]).c_str());
    }
    *value = args[++i];
  }
  if (suite.empty() || tag.empty()) return Usage("build needs --debian SUITE and --tag NAME");
  std::vector<std::string> list;
  for (absl::string_view p : absl::StrSplit(packages, ',', absl::SkipEmpty())) {
    list.emplace_back(p);
  }
  // npm packages need Node.js and npm in the image (their scripts run there), and the
  // registry's certificates for the agents that use them.
  for (const char* needed : {"nodejs", "npm", "ca-certificates"}) {
    if (!npm.empty() && std::find(list.begin(), list.end(), needed) == list.end()) {
      list.push_back(needed);
    }
  }
  const char* cache_env = std::getenv("AIRLOCK_CACHE");
  std::string cache = cache_env ? cache_env : "/var/cache/airlock";
  std::fprintf(stderr, "airlock image build: debian %s + %s%s%s\n", suite.c_str(),
               list.empty() ? "nothing" : absl::StrJoin(list, ",").c_str(),
               npm.empty() ? "" : " + npm ", absl::StrJoin(npm, " ").c_str());
  absl::StatusOr<ImageInfo> info;
  if (npm.empty()) {
    info = store.BuildDebian(suite, list, tag, cache, env);
  } else {
    absl::StatusOr<std::string> rootfs = ImageStore::DebianRootfs(suite, list, cache);
    absl::StatusOr<std::string> layer =
        rootfs.ok() ? NpmLayer(store, *rootfs, npm, tag, cache) : rootfs.status();
    info = layer.ok() ? store.ImportRootfsLayers({*rootfs, *layer}, tag, env) : layer.status();
  }
  if (!info.ok()) {
    std::fprintf(stderr, "airlock image build: %s\n", std::string(info.status().message()).c_str());
    return 1;
  }
  std::printf("%s %s\n", info->name.c_str(), info->digest.c_str());
  return 0;
}

// A progress bar on stderr, redrawn at most ten times a second: bytes of the image's blobs
// downloaded, of how many, and how fast.
class ProgressBar {
 public:
  explicit ProgressBar(std::string what) : what_(std::move(what)), start_(absl::Now()) {}
  void Update(uint64_t done, uint64_t total) {
    absl::Time now = absl::Now();
    if (now - last_ < absl::Milliseconds(100) && done < total) return;
    last_ = now;
    drawn_ = true;
    constexpr int kWidth = 30;
    int filled = total ? static_cast<int>(kWidth * std::min(done, total) / total) : 0;
    double seconds = absl::ToDoubleSeconds(now - start_);
    std::fprintf(stderr, "\r%s [%s%s] %3d%% %.1f/%.1f MiB %.1f MiB/s ", what_.c_str(),
                 std::string(filled, '#').c_str(), std::string(kWidth - filled, '-').c_str(),
                 total ? static_cast<int>(100 * std::min(done, total) / total) : 0,
                 done / 1048576.0, total / 1048576.0,
                 seconds > 0 ? done / 1048576.0 / seconds : 0.0);
  }
  ~ProgressBar() {
    if (drawn_) std::fprintf(stderr, "\n");
  }

 private:
  std::string what_;
  absl::Time start_;
  absl::Time last_ = absl::InfinitePast();
  bool drawn_ = false;
};

// Pulls ref through airlockd into the caller's images, with a progress bar while stderr is
// a terminal. if_missing: an image the caller already has by that name is taken as it is.
absl::StatusOr<v1::Image> PullThroughDaemon(DaemonClient& client, const std::string& ref,
                                            bool if_missing) {
  grpc::ClientContext context;
  v1::PullImageRequest request;
  request.set_reference(ref);
  request.set_if_missing(if_missing);
  std::unique_ptr<grpc::ClientReader<v1::ImageProgress>> stream =
      client.images->Pull(&context, request);
  std::optional<ProgressBar> bar;
  v1::ImageProgress progress;
  v1::Image image;
  while (stream->Read(&progress)) {
    if (progress.has_image()) {
      image = progress.image();
    } else if (isatty(STDERR_FILENO)) {
      if (!bar) bar.emplace("pulling " + ref);
      bar->Update(progress.done_bytes(), progress.total_bytes());
    }
  }
  bar.reset();  // ends its line
  grpc::Status status = stream->Finish();
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), Describe(status));
  }
  return image;
}

int Pull(const std::vector<std::string>& args) {
  if (args.size() != 1 || args[0][0] == '-') return Usage("pull takes one image reference");
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  absl::StatusOr<v1::Image> image = PullThroughDaemon(*client, args[0], /*if_missing=*/false);
  if (!image.ok()) {
    std::fprintf(stderr, "airlock image pull: %s\n", std::string(image.status().message()).c_str());
    return 1;
  }
  std::printf("%s %s\n", image->name().c_str(), image->digest().c_str());
  return 0;
}

int Push(const std::vector<std::string>& args) {
  if (args.size() != 2) return Usage("push takes an image ARCHIVE and a REF to push it to");
  absl::StatusOr<ImageReference> ref = ParseImageReference(args[1]);
  if (!ref.ok()) {
    std::fprintf(stderr, "airlock image push: %s\n", std::string(ref.status().message()).c_str());
    return 2;
  }
  char tmpl[] = "/var/tmp/airlock-push-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::perror("airlock image push: mkdtemp");
    return 1;
  }
  std::string work = tmpl;
  absl::StatusOr<ArchiveImage> image = ReadImageArchive(args[0], work + "/members");
  absl::StatusOr<std::string> digest =
      image.ok() ? RegistryClient().Push(*ref, image->layers, image->config_json)
                 : absl::StatusOr<std::string>(image.status());
  RemoveTree(work).IgnoreError();
  if (!digest.ok()) {
    std::fprintf(stderr, "airlock image push: %s\n",
                 std::string(digest.status().message()).c_str());
    return 1;
  }
  std::printf("%s %s\n", ref->Name().c_str(), digest->c_str());
  return 0;
}

int Prune(const std::vector<std::string>& args) {
  if (!args.empty()) return Usage("prune takes no arguments");
  absl::StatusOr<DaemonClient> client = ConnectToDaemon();
  if (!client.ok()) {
    std::fprintf(stderr, "airlock image prune: %s\n",
                 std::string(client.status().message()).c_str());
    return 1;
  }
  grpc::ClientContext context;
  v1::PruneImagesResponse response;
  grpc::Status status = client->images->Prune(&context, {}, &response);
  if (!status.ok()) {
    std::fprintf(stderr, "airlock image prune: %s\n", Describe(status).c_str());
    return 1;
  }
  for (const std::string& d : response.removed()) std::printf("removed %s\n", d.c_str());
  std::printf("freed %s\n", FormatBytes(response.freed_bytes()).c_str());
  return 0;
}

int Remove(const std::vector<std::string>& args) {
  if (args.empty()) return Usage("rm needs at least one image name");
  absl::StatusOr<DaemonClient> client = ConnectToDaemon();
  if (!client.ok()) {
    std::fprintf(stderr, "airlock image rm: %s\n", std::string(client.status().message()).c_str());
    return 1;
  }
  grpc::ClientContext context;
  v1::RemoveImagesRequest request;
  for (const std::string& name : args) request.add_names(name);
  v1::RemoveImagesResponse response;
  grpc::Status status = client->images->Remove(&context, request, &response);
  if (!status.ok()) {
    std::fprintf(stderr, "airlock image rm: %s\n", Describe(status).c_str());
    return 1;
  }
  for (const v1::RemoveImagesResponse::Removed& r : response.images()) {
    std::printf("untagged %s\n", r.name().c_str());
    if (r.freed()) {
      std::printf("removed %s (%s)\n", r.digest().c_str(), FormatBytes(r.freed_bytes()).c_str());
    } else if (r.sessions() > 0) {
      std::printf("kept %s: %u session(s) use it; `airlock image prune` frees it after them\n",
                  r.digest().c_str(), r.sessions());
    }
  }
  return 0;
}

int List(const std::vector<std::string>& args) {
  bool json = args.size() == 1 && args[0] == "--json";
  if (!args.empty() && !json) return Usage("ls takes only --json");
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::ListImagesResponse response;
  grpc::Status status = client->images->List(&context, {}, &response);
  if (!status.ok()) {
    std::fprintf(stderr, "airlock image ls: %s\n", Describe(status).c_str());
    return 1;
  }
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const v1::Image& i : response.images()) {
      out.push_back({{"name", i.name()},
                     {"digest", i.digest()},
                     {"size_bytes", i.size_bytes()},
                     {"created", i.created_unix()},
                     {"source", i.source()}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%-32s %-20s %10s  %s\n", "NAME", "DIGEST", "SIZE", "CREATED");
  for (const v1::Image& i : response.images()) {
    char when[32];
    time_t t = static_cast<time_t>(i.created_unix());
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M", gmtime(&t));
    std::printf("%-32s %-20s %8.1fMi  %s\n", i.name().c_str(), i.digest().substr(0, 19).c_str(),
                i.size_bytes() / 1048576.0, when);
  }
  return 0;
}

}  // namespace

bool PullIfMissing(const std::string& image, const char* command) {
  if (image.empty()) return true;
  absl::StatusOr<DaemonClient> client = ConnectToDaemon();
  if (!client.ok()) return true;  // the command itself says what is wrong with the daemon
  absl::StatusOr<v1::Image> pulled = PullThroughDaemon(*client, image, /*if_missing=*/true);
  // An image that is no registry's (a local name, the default) is the command's to explain.
  if (pulled.ok() || absl::IsInvalidArgument(pulled.status())) return true;
  std::fprintf(stderr, "airlock %s: %s\n", command, std::string(pulled.status().message()).c_str());
  return false;
}

int ImageCommand(const std::vector<std::string>& args) {
  if (args.empty()) return Usage("missing subcommand");
  if (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
    std::fputs(kImageUsage, stdout);
    return 0;
  }
  ImageStore store(DefaultHostPaths().images);
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "import") return Import(rest);
  if (args[0] == "pull") return Pull(rest);
  if (args[0] == "build") return Build(rest, store);
  if (args[0] == "prune") return Prune(rest);
  if (args[0] == "push") return Push(rest);
  if (args[0] == "ls") return List(rest);
  if (args[0] == "rm") return Remove(rest);
  return Usage(("unknown subcommand " + args[0]).c_str());
}

}  // namespace airlock
