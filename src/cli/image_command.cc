// `airlock image`: pull, import, build, list and remove images through airlockd; push here (in
// airlock-tools, which has the registry client).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "src/cli/cli_commands.h"
#include "src/cli/cli_flags.h"
#include "src/cli/daemon_client.h"
#include "src/cli/host_tools.h"
#include "src/common/byte_size.h"
#include "src/common/file_util.h"
#include "src/common/host_paths.h"
#include "src/common/unique_fd.h"
#include "src/image/npm_spec.h"
#include "src/secrets/secret_spec.h"

namespace airlock {
namespace {

constexpr char kImageFooter[] =
    "import ARCHIVE takes an OCI image layout or a `docker save` archive (tar, any compression):\n"
    "its layers become one read-only ext4 image, and `airlock run NAME` with no command runs its\n"
    "Entrypoint/Cmd with its Env and WorkingDir. --rootfs takes a root filesystem tar (e.g.\n"
    "from mmdebstrap --format=tar). Neither is ever unpacked on the host.\n"
    "build DIR makes an image from DIR/Dockerfile (-f another), DIR being the context (with its\n"
    ".dockerignore): each RUN runs in a build VM of the step before, with no network unless\n"
    "--allow/--allow-preset say; COPY and ADD take files from the context (never unpacked or\n"
    "run on the host; symbolic links are copied as links); every step is cached in\n"
    "$AIRLOCK_CACHE/dockerfile by what it did and on (--no-cache runs them all again). E.g.\n"
    "airlock image build -t myapp:1 --build-arg V=3 --allow-preset pypi .\n"
    "Not supported: RUN --mount, ONBUILD, ADD of URLs or archives (a RUN can fetch or unpack).\n"
    "build --debian makes an image from Debian packages with mmdebstrap (minbase plus the "
    "packages, from\n"
    "the host's apt sources), caching the root filesystem in $AIRLOCK_CACHE (/var/cache/airlock);\n"
    "--env sets a variable of the image's environment (as an OCI image's Env).\n"
    "--npm adds an npm package (and Node.js): fetched by npm with --ignore-scripts, so no\n"
    "package's code runs on the host; its install scripts run in a build VM without network,\n"
    "and /usr/local comes back out of it. Cached in $AIRLOCK_CACHE/npm by the packages as\n"
    "written: pin versions (@anthropic-ai/claude-code@2.1.197) to control updates. E.g.\n"
    "airlock image build --debian bookworm --packages git --npm @anthropic-ai/claude-code\n"
    "  --tag airlock/claude\n"
    "pull REF fetches an image from its registry (Docker Hub by default: python:3.11-slim;\n"
    "or ghcr.io/org/tool:1, localhost:5000/team/app@sha256:...); push uploads an image\n"
    "archive there. import, pull and build go through airlockd: what root adds is every user's,\n"
    "what another user adds is their own (within their images quota; `airlock quota`). Logins\n"
    "for pulls are airlockd's, used for root's pulls only (AIRLOCK_REGISTRY_USER/\n"
    "AIRLOCK_REGISTRY_PASSWORD in its environment, or root's ~/.config/airlock/auth.json:\n"
    "{\"HOST\": \"USER:PASSWORD\"}); push uses this shell's. AIRLOCK_REGISTRY_MIRROR replaces\n"
    "Docker Hub; AIRLOCK_INSECURE_REGISTRIES (HOST:PORT,...) allows plain http.\n"
    "rm removes tags, and an image's files with its last tag unless a session still uses it;\n"
    "prune frees images no tag and no session uses (both through airlockd, as root).";

struct ImportArgs {
  std::string archive, rootfs, tag;
};

int Import(const ImportArgs& args) {
  const std::string &tar = args.rootfs, &tag = args.tag, &archive = args.archive;
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

// Builds an image through airlockd (Images.Build) into the caller's images: each progress
// line goes to on_line as it comes. Errors keep airlockd's code and message.
absl::StatusOr<v1::Image> BuildThroughDaemon(
    DaemonClient& client, const v1::BuildImageRequest& request,
    const std::function<void(const std::string&)>& on_line) {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReader<v1::BuildProgress>> stream =
      client.images->Build(&context, request);
  v1::BuildProgress progress;
  std::optional<v1::Image> image;
  while (stream->Read(&progress)) {
    if (progress.has_image()) {
      image = progress.image();
    } else if (on_line) {
      on_line(progress.line());
    }
  }
  grpc::Status status = stream->Finish();
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), Describe(status));
  }
  if (!image) return absl::UnavailableError("airlockd ended the build without the image");
  return *image;
}

// `airlock image build` once its arguments are parsed: progress on stderr, the image on stdout.
// Returns the exit code: 2 for a request airlockd refused as invalid, 1 for other failures.
int BuildImage(const v1::BuildImageRequest& request) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  absl::StatusOr<v1::Image> image =
      BuildThroughDaemon(*client, request, [](const std::string& line) {
        std::fprintf(stderr, "airlock image build: %s\n", line.c_str());
      });
  if (!image.ok()) {
    std::fprintf(stderr, "airlock image build: %s\n",
                 std::string(image.status().message()).c_str());
    return absl::IsInvalidArgument(image.status()) ? 2 : 1;
  }
  std::printf("%s %s\n", image->name().c_str(), image->digest().c_str());
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

int Pull(const std::string& ref) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  absl::StatusOr<v1::Image> image = PullThroughDaemon(*client, ref, /*if_missing=*/false);
  if (!image.ok()) {
    std::fprintf(stderr, "airlock image pull: %s\n", std::string(image.status().message()).c_str());
    return 1;
  }
  std::printf("%s %s\n", image->name().c_str(), image->digest().c_str());
  return 0;
}

int Prune() {
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

int List(bool json) {
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

void AddImageCommand(Cli& cli) {
  CLI::App* group = cli.Group("image", "images: pull, import, build, push, ls, rm, prune");
  group->footer(kImageFooter);

  auto pull = std::make_shared<std::string>();
  CLI::App* p = cli.Add(group, "pull", "fetch an image from its registry (python:3.11-slim)",
                        [pull] { return Pull(*pull); });
  p->add_option("REF", *pull, "the image reference")->required();

  auto import = std::make_shared<ImportArgs>();
  CLI::App* i =
      cli.Add(group, "import", "import an image archive (OCI, docker save) or a root filesystem",
              [import] { return Import(*import); });
  CLI::Option* archive =
      i->add_option("ARCHIVE", import->archive, "an OCI image layout or `docker save` archive");
  CLI::Option* rootfs = i->add_option("--rootfs", import->rootfs,
                                      "a root filesystem tar (mmdebstrap --format=tar) instead")
                            ->type_name("TAR")
                            ->excludes(archive);
  CLI::Option* tag = i->add_option("--tag", import->tag, "the image's name")->type_name("NAME");
  rootfs->needs(tag);
  i->callback([archive, rootfs] {
    if (archive->count() == 0 && rootfs->count() == 0) {
      throw CLI::ValidationError("import needs an image ARCHIVE, or --rootfs TAR and --tag NAME");
    }
  });

  struct BuildArgs {
    v1::BuildImageRequest request;
    std::string dir, file, target;
    std::vector<std::string> build_args, allow, presets, secrets;
    bool no_cache = false;
  };
  auto build = std::make_shared<BuildArgs>();
  CLI::App* b =
      cli.Add(group, "build",
              "build one from a Dockerfile (DIR), or from Debian packages (--debian)", [build] {
                if (build->dir.empty()) return BuildImage(build->request);
                // The Dockerfile build runs in airlock-tools, which reads the context with
                // libarchive.
                std::vector<std::string> args = {"image-build", "--dir", build->dir, "--tag",
                                                 build->request.tag()};
                if (!build->file.empty()) args.insert(args.end(), {"--file", build->file});
                if (!build->target.empty()) args.insert(args.end(), {"--target", build->target});
                if (build->no_cache) args.push_back("--no-cache");
                for (const std::string& a : build->build_args)
                  args.insert(args.end(), {"--build-arg", a});
                for (const std::string& a : build->allow) args.insert(args.end(), {"--allow", a});
                for (const std::string& a : build->presets)
                  args.insert(args.end(), {"--allow-preset", a});
                for (const std::string& a : build->secrets)
                  args.insert(args.end(), {"--secret", a});
                return BecomeProgramBeside(kToolsProgram, args);
              });
  b->footer(kImageFooter);
  CLI::Option* dir = b->add_option("DIR", build->dir,
                                   "the build context: a directory with a Dockerfile (and "
                                   ".dockerignore)");
  CLI::Option* debian =
      b->add_option_function<std::string>(
           "--debian", [build](const std::string& v) { build->request.set_suite(v); },
           "build from Debian packages instead: the suite (bookworm)")
          ->type_name("SUITE")
          ->excludes(dir);
  b->add_option_function<std::string>(
       "--packages",
       [build](const std::string& v) {
         for (absl::string_view p : absl::StrSplit(v, ',', absl::SkipEmpty())) {
           build->request.add_packages(std::string(p));
         }
       },
       "with --debian: Debian packages, comma-separated (python3,git)")
      ->type_name("P1,P2")
      ->needs(debian);
  AddCheckedList(
      b, "--npm", nullptr,
      [build](const std::string& v) {
        absl::Status s = ValidateNpmSpec(v);
        if (s.ok()) build->request.add_npm(v);
        return s;
      },
      "with --debian: an npm package (and Node.js), repeatable: its scripts run in a build VM")
      ->type_name("PKG");
  AddCheckedList(
      b, "--env", nullptr,
      [build](const std::string& v) {
        if (v.find('=') == std::string::npos || v[0] == '=') {
          return absl::InvalidArgumentError("--env needs KEY=VALUE");
        }
        build->request.add_env(v);
        return absl::OkStatus();
      },
      "with --debian: a variable of the image's environment, repeatable")
      ->type_name("KEY=VALUE");
  b->add_option_function<std::string>(
       "-t,--tag", [build](const std::string& v) { build->request.set_tag(v); }, "the image's name")
      ->type_name("NAME")
      ->required();
  b->add_option("-f,--file", build->file, "the Dockerfile (default: DIR/Dockerfile)")
      ->type_name("FILE")
      ->needs(dir);
  b->add_option("--build-arg", build->build_args,
                "a value for an ARG, repeatable (NAME alone: its value in this shell)")
      ->type_name("NAME=VALUE")
      ->allow_extra_args(false)
      ->needs(dir);
  b->add_option("--target", build->target, "build up to this stage (FROM ... AS NAME)")
      ->type_name("STAGE")
      ->needs(dir);
  b->add_option("--allow", build->allow,
                "egress for RUN, as a session's --allow (default: no network), repeatable")
      ->type_name("RULE")
      ->allow_extra_args(false)
      ->needs(dir);
  b->add_option("--allow-preset", build->presets, "egress presets for RUN (pypi, npm, ...)")
      ->type_name("NAME")
      ->allow_extra_args(false)
      ->needs(dir);
  AddCheckedList(
      b, "--secret", &build->secrets,
      [](const std::string& v) { return secrets::ParseSecretSpec(v).status(); },
      "for RUN steps with the network, as a session's --secret: they see NAME=<placeholder>, "
      "HTTPS requests to HOST carry the value, and no layer can hold it; repeatable")
      ->type_name("NAME=SOURCE@HOST[,HOST...]")
      ->needs(dir);
  b->add_flag("--no-cache", build->no_cache, "run every step again")->needs(dir);
  b->callback([dir, debian] {
    if (dir->count() == 0 && debian->count() == 0) {
      throw CLI::ValidationError(
          "image build needs a DIR with a Dockerfile, or --debian SUITE for Debian packages");
    }
  });

  struct PushArgs {
    std::string archive, ref;
  };
  auto push = std::make_shared<PushArgs>();
  CLI::App* pu =
      cli.Add(group, "push", "upload an image, or an image archive, to a registry", [push] {
        return BecomeProgramBeside(kToolsProgram, {"push", push->archive, push->ref});
      });
  pu->add_option("IMAGE", push->archive,
                 "one of your images (airlock image ls), or an OCI image layout or `docker "
                 "save` archive file")
      ->required();
  pu->add_option("REF", push->ref, "where to, like localhost:5000/team/app:1")->required();
  pu->footer(
      "An image of yours is sent as one uncompressed layer of its whole filesystem with its "
      "config (how it runs, its labels and ports), with your registry credentials "
      "(~/.docker/config.json).");

  struct SaveArgs {
    std::string name, out;
  };
  auto save = std::make_shared<SaveArgs>();
  CLI::App* sa = cli.Add(group, "save", "write one of your images as an OCI archive", [save] {
    return BecomeProgramBeside(kToolsProgram, {"save", save->name, save->out});
  });
  sa->add_option("NAME", save->name, "the image (airlock image ls)")->required();
  sa->add_option("-o,--output", save->out, "the archive to write, or - for standard output")
      ->type_name("FILE")
      ->required();
  sa->footer(
      "The archive is an OCI image layout in a tar: `airlock image import`, `airlock image "
      "push`, docker load and skopeo read it.");

  auto ls_json = std::make_shared<bool>(false);
  CLI::App* l = cli.Add(group, "ls", "list images", [ls_json] { return List(*ls_json); });
  AddJsonFlag(l, ls_json.get());

  auto rm = std::make_shared<std::vector<std::string>>();
  CLI::App* r = cli.Add(group, "rm", "remove images (their files once no session uses them)",
                        [rm] { return Remove(*rm); });
  r->add_option("NAME", *rm, "the images")->required();

  cli.Add(group, "prune", "free the images no tag and no session uses", Prune);
}

}  // namespace airlock
