// Dockerfile builds (ImageBuilder::BuildDockerfile). A stage's state is its base image (an
// image's ext4, or nothing for `scratch`), the layer tars laid over it so far, its run config,
// and a key chained through every step that changed files. Each such step's layer is cached
// under $AIRLOCK_CACHE/dockerfile/<key>.tar, keyed by the step before and everything the step
// depends on (a RUN's command, environment, directory and user; a COPY's files' digests and
// where they go), so an unchanged step is reused and a changed one redoes itself and what
// follows. An image is made (ImageStore::ImportBuild: the base's files, then the layers) only
// where one is needed: for a RUN's build VM, for COPY --from, and at the end.
//
// A RUN boots a build VM (a one-shot session of the caller) on the image of the step before,
// runs the command there, and takes what it changed as `/proc/1/exe layer-tar` writes it (the
// root overlay's upper directory, src/guest/guest_layer.h): the host reads only tars.
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <ctime>
#include <functional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "nlohmann/json.hpp"
#include "src/common/channel_frame.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/log.h"
#include "src/common/sha256.h"
#include "src/common/unique_fd.h"
#include "src/daemon/image_builds.h"
#include "src/image/build_context.h"
#include "src/image/docker_ignore.h"
#include "src/image/dockerfile.h"
#include "src/image/ext4_reader.h"
#include "src/image/tar_path.h"
#include "src/image/tar_to_ext4.h"

namespace airlock {
namespace {

constexpr char kKeyVersion[] = "airlock-dockerfile-v1";
constexpr char kDockerBuildTagPrefix[] = "airlock-build/dockerfile";
// A RUN's layer (what it changed) may be at most this large, besides the caller's quota.
constexpr uint64_t kMaxRunLayerBytes = 16ull << 30;
constexpr size_t kMaxBuildArgs = 256;
// A user's cached layers ($AIRLOCK_CACHE/dockerfile/<user>/) are kept within this.
constexpr uint64_t kMaxLayerCacheBytes = 8ull << 30;

struct StageState {
  std::string name;
  std::string base_rootfs;  // an image's rootfs.ext4; "" for scratch
  std::string base_digest;
  std::vector<std::string> layers;
  std::string chain;  // hex key of the files so far
  OciRunConfig run;
  bool cmd_inherited = true;  // ENTRYPOINT clears a CMD the base set, not one this stage set
  // SHELL: what a shell-form RUN, CMD or ENTRYPOINT runs under, inside the build VM or the
  // session (the guest's own /bin/sh, never the host's).
  std::vector<std::string> shell = {"/bin/sh", "-c"};
  std::map<std::string, std::string> args;             // ARGs in scope with a value
  nlohmann::json recorded = nlohmann::json::object();  // labels, ports, volumes, ...
};

std::string Chain(const std::string& before, const nlohmann::json& step) {
  return Sha256Hex(absl::StrCat(kKeyVersion, "\n", before, "\n", step.dump()));
}

std::string EnvValue(const std::vector<std::string>& env, const std::string& key) {
  for (const std::string& e : env) {
    if (e.size() > key.size() && e.compare(0, key.size(), key) == 0 && e[key.size()] == '=') {
      return e.substr(key.size() + 1);
    }
  }
  return "";
}

void SetEnv(std::vector<std::string>* env, const std::string& key, const std::string& value) {
  std::string entry = absl::StrCat(key, "=", value);
  for (std::string& e : *env) {
    if (absl::StartsWith(e, key + "=")) {
      e = entry;
      return;
    }
  }
  env->push_back(entry);
}

// The variables an instruction's words see: the stage's ARGs, then its ENV over them.
std::map<std::string, std::string> Vars(const StageState& s) {
  std::map<std::string, std::string> vars = s.args;
  for (const std::string& e : s.run.env) {
    size_t eq = e.find('=');
    if (eq != std::string::npos) vars[e.substr(0, eq)] = e.substr(eq + 1);
  }
  return vars;
}

// An absolute, cleaned path in the image: relative ones from the working directory.
std::string ImagePath(const StageState& s, const std::string& path) {
  if (absl::StartsWith(path, "/")) return CleanSlashPath(path);
  std::string dir = s.run.working_dir.empty() ? "/" : s.run.working_dir;
  return CleanSlashPath(absl::StrCat(dir, "/", path));
}

absl::Status AtLine(const DockerInstruction& ins, const absl::Status& s) {
  if (s.ok() || absl::StartsWith(s.message(), "Dockerfile line")) return s;
  return absl::Status(s.code(), absl::StrCat("Dockerfile line ", ins.line, " (",
                                             DockerInstructionName(ins.kind), "): ", s.message()));
}

// The content of `path` in the stage's files as they are now: the newest layer that has it,
// else the base image. nullopt when nowhere (or removed by a layer).
absl::StatusOr<std::optional<std::string>> ReadStageFile(const StageState& s,
                                                         const std::string& path,
                                                         size_t max_bytes) {
  std::string rel = path.substr(path.find_first_not_of('/'));
  std::string dir = rel.substr(0, rel.rfind('/') == std::string::npos ? 0 : rel.rfind('/'));
  std::string base = rel.substr(rel.rfind('/') == std::string::npos ? 0 : rel.rfind('/') + 1);
  std::string whiteout = dir.empty() ? ".wh." + base : absl::StrCat(dir, "/.wh.", base);
  for (auto layer = s.layers.rbegin(); layer != s.layers.rend(); ++layer) {
    absl::StatusOr<ArchivePtr> a = OpenTar(*layer);
    if (!a.ok()) return a.status();
    std::optional<std::string> found;
    bool removed = false;
    archive_entry* entry;
    while (archive_read_next_header(a->get(), &entry) == ARCHIVE_OK) {
      absl::StatusOr<std::string> p =
          CleanTarPath(archive_entry_pathname(entry) ? archive_entry_pathname(entry) : "");
      if (!p.ok()) continue;
      if (*p == whiteout) removed = true;
      if (*p != rel) continue;
      if (archive_entry_size(entry) > static_cast<la_int64_t>(max_bytes)) {
        return absl::FailedPreconditionError(absl::StrCat(path, " is too large to read"));
      }
      std::string data;
      char buf[16384];
      la_ssize_t n;
      while ((n = archive_read_data(a->get(), buf, sizeof(buf))) > 0) data.append(buf, n);
      found = std::move(data);
    }
    if (found) return found;
    if (removed) return std::optional<std::string>();
  }
  if (s.base_rootfs.empty()) return std::optional<std::string>();
  absl::StatusOr<std::string> content = ReadFileFromExt4(s.base_rootfs, path, max_bytes);
  if (absl::IsNotFound(content.status())) return std::optional<std::string>();
  if (!content.ok()) return content.status();
  return std::optional<std::string>(std::move(*content));
}

// A user or group (name or number) as /etc/passwd or /etc/group of the stage names it.
absl::StatusOr<uint32_t> LookupId(const StageState& s, const std::string& who, bool group) {
  uint32_t id;
  if (absl::SimpleAtoi(who, &id)) return id;
  const char* file = group ? "/etc/group" : "/etc/passwd";
  absl::StatusOr<std::optional<std::string>> text = ReadStageFile(s, file, 4 << 20);
  if (!text.ok()) return text.status();
  if (text->has_value()) {
    for (absl::string_view line : absl::StrSplit(**text, '\n')) {
      std::vector<absl::string_view> f = absl::StrSplit(line, ':');
      if (f.size() >= 3 && f[0] == who && absl::SimpleAtoi(f[2], &id)) return id;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--chown: ", group ? "group " : "user ", who, " is not in the image's ", file));
}

// Whether `path` is a directory in the stage's files (base image, or a layer that made it).
bool IsStageDirectory(const StageState& s, const std::string& path) {
  std::string rel = CleanSlashPath(path).substr(1);
  if (rel.empty()) return true;
  for (const std::string& layer : s.layers) {
    absl::StatusOr<ArchivePtr> a = OpenTar(layer);
    if (!a.ok()) continue;
    archive_entry* entry;
    while (archive_read_next_header(a->get(), &entry) == ARCHIVE_OK) {
      absl::StatusOr<std::string> p =
          CleanTarPath(archive_entry_pathname(entry) ? archive_entry_pathname(entry) : "");
      if (p.ok() && (*p == rel || absl::StartsWith(*p, rel + "/"))) {
        if (*p == rel) return archive_entry_filetype(entry) == AE_IFDIR;
        return true;  // something is below it
      }
    }
  }
  if (s.base_rootfs.empty()) return false;
  bool dir = false;
  absl::Status walked =
      WalkExt4(s.base_rootfs, "/" + rel, [&](const Ext4Entry& e, const Ext4Writer::Reader&) {
        dir = e.type == S_IFDIR;
        return absl::CancelledError("seen");  // the root is enough
      });
  (void)walked;
  return dir;
}

// A layer of one empty marker that makes `dir` and its parents where they are missing (tar's
// parents rule) and changes nothing that exists: the whiteout of a name never used.
absl::Status WriteDirectoryLayer(const std::string& dir, const std::string& out) {
  std::string rel = CleanSlashPath(dir).substr(1);
  LayerItem marker{.dest = absl::StrCat(rel, rel.empty() ? "" : "/", ".wh..airlock-workdir"),
                   .inline_content = std::string(),
                   .type = S_IFREG,
                   .mode = 0644};
  return BuildContext().WriteLayer({marker}, out);
}

// Parses --chown=USER[:GROUP] against the stage's accounts, --chmod=OCTAL.
absl::Status Ownership(const StageState& s, const DockerInstruction& ins,
                       const std::map<std::string, std::string>& vars, uint32_t* uid, uint32_t* gid,
                       std::optional<uint32_t>* mode) {
  *uid = 0;
  *gid = 0;
  if (auto it = ins.flags.find("chown"); it != ins.flags.end()) {
    absl::StatusOr<std::string> spec = ExpandWord(it->second, vars);
    if (!spec.ok()) return spec.status();
    std::vector<std::string> parts = absl::StrSplit(*spec, absl::MaxSplits(':', 1));
    absl::StatusOr<uint32_t> u = LookupId(s, parts[0], false);
    if (!u.ok()) return u.status();
    *uid = *u;
    *gid = *u;
    if (parts.size() == 2) {
      absl::StatusOr<uint32_t> g = LookupId(s, parts[1], true);
      if (!g.ok()) return g.status();
      *gid = *g;
    } else if (!absl::SimpleAtoi(parts[0], gid)) {
      absl::StatusOr<uint32_t> g = LookupId(s, parts[0], true);
      *gid = g.ok() ? *g : *u;
    }
  }
  if (auto it = ins.flags.find("chmod"); it != ins.flags.end()) {
    uint32_t m = 0;
    bool ok = !it->second.empty() && it->second.size() <= 4 &&
              std::all_of(it->second.begin(), it->second.end(),
                          [](char c) { return c >= '0' && c <= '7'; });
    for (char c : it->second) m = m * 8 + static_cast<uint32_t>(c - '0');
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("--chmod=", it->second, ": give an octal mode like 0755"));
    }
    *mode = m;
  }
  return absl::OkStatus();
}

}  // namespace

// One build: the Dockerfile, its context, the stages built so far, and the images it made for
// itself (untagged when it ends).
class DockerfileBuild {
 public:
  DockerfileBuild(ImageBuilder* builder, const Principal& who, const DockerfileBuildSpec& spec,
                  const ImageBuilder::Progress& progress, const ImageBuilder::Cancelled& cancelled)
      : builder_(builder),
        who_(who),
        spec_(spec),
        progress_(progress),
        cancelled_(cancelled),
        images_(builder->sessions_->images().For(who)) {}

  ~DockerfileBuild() {
    for (const std::string& t : build_tags_) builder_->RemoveBuildTag(images_, t);
    if (!layer_dir_.empty()) PruneLayerCache();
  }

  absl::StatusOr<ImageInfo> Run() {
    if (absl::Status s = ImageStore::ValidateName(spec_.tag); !s.ok()) return s;
    if (spec_.build_args.size() > kMaxBuildArgs) {
      return absl::InvalidArgumentError(absl::StrCat("at most ", kMaxBuildArgs, " --build-arg"));
    }
    absl::StatusOr<Dockerfile> file = ParseDockerfile(spec_.dockerfile);
    if (!file.ok()) return file.status();
    escape_ = file->escape;
    size_t target = file->stages.size() - 1;
    if (!spec_.target.empty()) {
      auto it = std::find_if(file->stages.begin(), file->stages.end(), [&](const DockerStage& st) {
        return st.name == absl::AsciiStrToLower(spec_.target);
      });
      if (it == file->stages.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "--target ", spec_.target,
            ": no stage of the Dockerfile is named so (FROM IMAGE AS NAME names one)"));
      }
      target = static_cast<size_t>(it - file->stages.begin());
    }
    absl::StatusOr<BuildContext> context = BuildContext::Open(spec_.context_tar);
    if (!context.ok()) return context.status();
    context_ = std::move(*context);
    absl::StatusOr<std::shared_ptr<void>> slot = builder_->slots_.Take(who_.Tenant());
    if (!slot.ok()) return slot.status();
    // Each user's layers apart (their keys start from the user too: one's layers never serve
    // another's build), bounded in size (PruneLayerCache).
    layer_dir_ =
        absl::StrCat(builder_->cache_, "/dockerfile/", Sha256Hex(who_.ImageScope()).substr(0, 16));
    if (absl::Status s = MakeDirectories(layer_dir_, 0700); !s.ok()) return s;
    started_ = time(nullptr);
    cap_ = std::min(builder_->sessions_->images().AccessFor(who_).max_bytes, kMaxRunLayerBytes);

    // Global ARGs: their defaults, or what --build-arg says.
    for (const auto& [name, value] : file->global_args) {
      if (auto it = spec_.build_args.find(name); it != spec_.build_args.end()) {
        global_[name] = it->second;
      } else if (value) {
        absl::StatusOr<std::string> v = ExpandWord(*value, global_, escape_);
        if (!v.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("ARG ", name, ": ", v.status().message()));
        }
        global_[name] = *v;
      }
    }
    for (size_t i = 0; i <= target; ++i) total_ += 1 + file->stages[i].instructions.size();
    for (size_t i = 0; i <= target; ++i) {
      const DockerStage& stage = file->stages[i];
      if (absl::Status st = From(stage); !st.ok()) return st;
      for (const DockerInstruction& ins : stage.instructions) {
        if (cancelled_()) return absl::CancelledError("the client cancelled; no image was made");
        progress_(absl::StrCat(
            "Step ", ++step_, "/", total_, " : ",
            ins.original.size() > 200 ? ins.original.substr(0, 200) + "..." : ins.original));
        if (absl::Status st = AtLine(ins, Instruction(ins)); !st.ok()) return st;
      }
      done_[std::to_string(i)] = s_;
      if (!stage.name.empty()) done_[stage.name] = s_;
    }
    if (cancelled_()) return absl::CancelledError("the client cancelled; no image was made");
    progress_(absl::StrCat("writing image ", spec_.tag, " (", s_.layers.size(), " layer",
                           s_.layers.size() == 1 ? "" : "s", " over ", s_.base_digest.substr(0, 19),
                           ")"));
    ImageService::QuotaCheck within_quota = builder_->sessions_->images().CheckQuotaAfter(who_);
    std::string key =
        Chain(s_.chain, {{"image", ImageStore::RunConfigJson(s_.run)}, {"recorded", s_.recorded}});
    absl::StatusOr<ImageInfo> info =
        images_.ImportBuild(s_.base_rootfs, s_.layers, key, s_.run, s_.recorded,
                            absl::StrCat("Dockerfile build over ", s_.base_digest), spec_.tag);
    if (!info.ok()) return info;
    if (absl::Status q = within_quota(*info); !q.ok()) return q;
    return info;
  }

 private:
  // Keeps the user's layer cache within kMaxLayerCacheBytes: the layers used longest ago go
  // first, never one this build used.
  void PruneLayerCache() {
    struct Layer {
      std::string path;
      time_t used;
      uint64_t bytes;
    };
    std::vector<Layer> layers;
    uint64_t total = 0;
    for (const std::string& name : ListDirectory(layer_dir_)) {
      struct stat st;
      std::string path = absl::StrCat(layer_dir_, "/", name);
      if (!absl::EndsWith(name, ".tar") || stat(path.c_str(), &st) != 0) continue;
      layers.push_back({path, st.st_mtime, static_cast<uint64_t>(st.st_blocks) * 512});
      total += layers.back().bytes;
    }
    std::sort(layers.begin(), layers.end(),
              [](const Layer& a, const Layer& b) { return a.used < b.used; });
    for (const Layer& l : layers) {
      if (total <= kMaxLayerCacheBytes || l.used >= started_) break;
      if (unlink(l.path.c_str()) == 0) {
        total -= l.bytes;
      } else if (errno != ENOENT) {
        LogWarning(absl::StrCat("image build: ", l.path, " not pruned: ", strerror(errno)));
      }
    }
  }

  absl::Status From(const DockerStage& stage) {
    progress_(absl::StrCat("Step ", ++step_, "/", total_, " : FROM ", stage.base,
                           stage.name.empty() ? "" : " AS " + stage.name));
    auto at_line = [&](const absl::Status& s) {
      return absl::Status(s.code(),
                          absl::StrCat("Dockerfile line ", stage.line, " (FROM): ", s.message()));
    };
    if (auto p = stage.from_flags.find("platform");
        p != stage.from_flags.end() && p->second != "linux/amd64" &&
        p->second != "$BUILDPLATFORM" && p->second != "$TARGETPLATFORM") {
      return at_line(absl::InvalidArgumentError(
          absl::StrCat("--platform=", p->second, ": Airlock builds for linux/amd64 only")));
    }
    absl::StatusOr<std::string> base = ExpandWord(stage.base, global_, escape_);
    if (!base.ok()) return at_line(base.status());
    std::string lower = absl::AsciiStrToLower(*base);
    if (auto it = done_.find(lower); it != done_.end()) {
      s_ = it->second;
      s_.args.clear();
    } else if (lower == "scratch") {
      s_ = StageState();
      s_.base_digest = "scratch";
      s_.chain = Chain("", {{"from", "scratch"}, {"scope", who_.ImageScope()}});
    } else {
      absl::StatusOr<ImageInfo> info = builder_->sessions_->images().Pull(
          who_, *base, {.if_missing = true, .progress = nullptr, .audit = true});
      if (!info.ok()) return at_line(info.status());
      s_ = StageState();
      s_.base_rootfs = info->rootfs_path;
      s_.base_digest = info->digest;
      s_.run = info->run;
      s_.chain = Chain("", {{"from", info->digest}, {"scope", who_.ImageScope()}});
      progress_(absl::StrCat(" ---> ", info->name, " ", info->digest.substr(0, 19)));
    }
    s_.name = stage.name;
    return absl::OkStatus();
  }

  absl::Status Instruction(const DockerInstruction& ins) {
    std::map<std::string, std::string> vars = Vars(s_);
    auto expand = [&](const std::string& w) { return ExpandWord(w, vars, escape_); };
    switch (ins.kind) {
      case DockerInstructionKind::kFrom:
        return absl::OkStatus();  // stages start in From
      case DockerInstructionKind::kArg:
        for (const auto& [name, value] : ins.pairs) {
          if (auto it = spec_.build_args.find(name); it != spec_.build_args.end()) {
            s_.args[name] = it->second;
          } else if (value) {
            absl::StatusOr<std::string> v = expand(*value);
            if (!v.ok()) return v.status();
            s_.args[name] = *v;
          } else if (auto g = global_.find(name); g != global_.end()) {
            s_.args[name] = g->second;
          }
        }
        return absl::OkStatus();
      case DockerInstructionKind::kEnv:
        for (const auto& [name, value] : ins.pairs) {
          absl::StatusOr<std::string> v = expand(*value);
          if (!v.ok()) return v.status();
          SetEnv(&s_.run.env, name, *v);
        }
        return absl::OkStatus();
      case DockerInstructionKind::kLabel:
        for (const auto& [name, value] : ins.pairs) {
          absl::StatusOr<std::string> k = expand(name);
          if (!k.ok()) return k.status();
          absl::StatusOr<std::string> v = expand(*value);
          if (!v.ok()) return v.status();
          s_.recorded["labels"][*k] = *v;
        }
        return absl::OkStatus();
      case DockerInstructionKind::kExpose:
      case DockerInstructionKind::kVolume: {
        bool expose = ins.kind == DockerInstructionKind::kExpose;
        for (const std::string& w : ins.words) {
          absl::StatusOr<std::string> v = expand(w);
          if (!v.ok()) return v.status();
          s_.recorded[expose ? "exposed_ports" : "volumes"].push_back(*v);
        }
        progress_(expose ? " ---> recorded (a session's ports are reached with `airlock expose`)"
                         : " ---> recorded (a session keeps data with `--volume NAME:/PATH`)");
        return absl::OkStatus();
      }
      case DockerInstructionKind::kStopSignal:
      case DockerInstructionKind::kHealthcheck:
        s_.recorded[ins.kind == DockerInstructionKind::kStopSignal ? "stop_signal"
                                                                   : "healthcheck"] = ins.rest;
        progress_(" ---> recorded (Airlock does not use it)");
        return absl::OkStatus();
      case DockerInstructionKind::kUser: {
        absl::StatusOr<std::string> v = expand(ins.words[0]);
        if (!v.ok()) return v.status();
        s_.run.user = *v;
        return absl::OkStatus();
      }
      case DockerInstructionKind::kWorkdir: {
        absl::StatusOr<std::string> v = expand(ins.words[0]);
        if (!v.ok()) return v.status();
        s_.run.working_dir = ImagePath(s_, *v);
        std::string dir = s_.run.working_dir;
        return LayerStep({{"workdir", dir}},
                         [&](const std::string& out) { return WriteDirectoryLayer(dir, out); });
      }
      case DockerInstructionKind::kShell:
        s_.shell = ins.command.argv;
        return absl::OkStatus();
      case DockerInstructionKind::kCmd:
      case DockerInstructionKind::kEntrypoint: {
        std::vector<std::string> argv = ins.command.argv;
        if (!ins.command.exec_form) {
          argv = s_.shell;
          argv.push_back(ins.command.text);
        }
        if (ins.kind == DockerInstructionKind::kCmd) {
          s_.run.cmd = argv;
          s_.cmd_inherited = false;
        } else {
          s_.run.entrypoint = argv;
          if (s_.cmd_inherited) s_.run.cmd.clear();
        }
        return absl::OkStatus();
      }
      case DockerInstructionKind::kRun:
        return RunStep(ins, vars);
      case DockerInstructionKind::kCopy:
      case DockerInstructionKind::kAdd:
        return CopyStep(ins, vars);
    }
    return absl::OkStatus();
  }

  // A step that changes files: its layer under its key, made by `make` unless cached.
  absl::Status LayerStep(const nlohmann::json& what,
                         const std::function<absl::Status(const std::string&)>& make) {
    std::string key = Chain(s_.chain, what);
    std::string layer = absl::StrCat(layer_dir_, "/", key, ".tar");
    if (!spec_.no_cache && access(layer.c_str(), F_OK) == 0) {
      progress_(" ---> CACHED");
      utimensat(AT_FDCWD, layer.c_str(), nullptr, 0);  // used now: the last to be pruned
    } else {
      std::string tmp = absl::StrCat(layer, ".tmp", UniqueSuffix());
      absl::Status made = make(tmp);
      if (made.ok()) made = CommitFile(tmp, layer);  // fsynced, then renamed into place
      unlink(tmp.c_str());
      if (!made.ok()) return made;
    }
    s_.layers.push_back(layer);
    s_.chain = key;
    return absl::OkStatus();
  }

  // The stage as an image (for a build VM, or COPY --from), tagged for this build.
  absl::StatusOr<ImageInfo> Materialize(const StageState& s) {
    std::string tag =
        absl::StrCat(kDockerBuildTagPrefix, UniqueSuffix(), "-", absl::ToUnixMillis(absl::Now()));
    absl::StatusOr<ImageInfo> made = images_.ImportBuild(s.base_rootfs, s.layers, s.chain, s.run,
                                                         {}, "an image build's step", tag);
    if (made.ok()) build_tags_.push_back(tag);
    return made;
  }

  absl::Status RunStep(const DockerInstruction& ins,
                       const std::map<std::string, std::string>& vars) {
    ExecRequest request;
    request.argv = ins.command.argv;
    if (!ins.command.exec_form) {
      request.argv = s_.shell;
      request.argv.push_back(ins.command.text);
    }
    // The image's environment, and the stage's ARGs where it has no variable of that name
    // (they are the command's, not the image's).
    request.env = s_.run.env;
    if (EnvValue(request.env, "PATH").empty()) {
      request.env.push_back("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    }
    for (const auto& [name, value] : s_.args) {
      if (EnvValue(s_.run.env, name).empty()) request.env.push_back(absl::StrCat(name, "=", value));
    }
    request.cwd = s_.run.working_dir;
    request.user = s_.run.user;
    std::string network = "default";
    if (auto it = ins.flags.find("network"); it != ins.flags.end()) network = it->second;
    if (network != "default" && network != "none") {
      return absl::InvalidArgumentError(
          absl::StrCat("--network=", network, ": a RUN has the build's network (--allow) or none"));
    }
    std::vector<EgressGrant> egress = network == "none" ? std::vector<EgressGrant>{} : spec_.egress;
    std::vector<SecretRequest> secrets;
    if (network != "none") secrets = spec_.secrets;
    nlohmann::json rules = nlohmann::json::array();
    for (const EgressGrant& g : egress) rules.push_back(g.rule);
    nlohmann::json key = {{"run", request.argv},
                          {"env", request.env},
                          {"cwd", request.cwd},
                          {"user", request.user},
                          {"egress", rules}};
    // What the secrets are bound to is part of the step; their values are not (a new token
    // does not make a new layer).
    for (const SecretRequest& secret : secrets) key["secrets"].push_back(secret.spec);
    return LayerStep(key, [&](const std::string& out) {
      return InBuildVm(egress, secrets, {request}, "what the RUN changed", out);
    });
  }

  // Boots a build VM on the stage's image (egress and secrets as given), runs `commands` in
  // it one after the other, and writes what they changed as a layer to `out`. The commands see
  // the secrets' placeholders (and the CA the proxy's substitution needs), as a session's
  // commands do; those are never part of the image's own environment.
  absl::Status InBuildVm(const std::vector<EgressGrant>& egress,
                         const std::vector<SecretRequest>& secrets,
                         std::vector<ExecRequest> commands, const std::string& what,
                         const std::string& out) {
    absl::StatusOr<ImageInfo> image = Materialize(s_);
    if (!image.ok()) return image.status();
    ImageBuilder::BuildVm vm{builder_, who_, images_, image->name, false, ""};
    if (absl::Status st = vm.Start(egress, secrets); !st.ok()) return st;
    if (cancelled_()) return absl::CancelledError("the client cancelled; no image was made");
    absl::StatusOr<std::shared_ptr<LiveSession>> live = builder_->sessions_->Live(who_, vm.id);
    if (!live.ok()) return live.status();
    std::vector<std::string> guest =
        builder_->sessions_->secrets().GuestEnv((*live)->record.tenant, (*live)->record.secrets);
    progress_(
        absl::StrCat(" ---> running in build VM ", vm.id, egress.empty() ? " (no network)" : ""));
    for (ExecRequest& request : commands) {
      request.env.insert(request.env.end(), guest.begin(), guest.end());
      if (absl::Status st = RunInBuildVm(**live, request, -1, 0, progress_, cancelled_); !st.ok()) {
        return st;
      }
    }
    UniqueFd fd(open(out.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
    if (fd.get() < 0) return ErrnoStatus("create", out);
    absl::Status taken = RunInBuildVm(**live, RootCommand({"/proc/1/exe", kLayerTarCommand}),
                                      fd.get(), cap_, progress_, cancelled_, what);
    live->reset();
    return taken;
  }

  // ADD URL: fetched in a build VM with the build's network (the image's curl, as root), to
  // the destination (a directory: the URL's last path segment in it), mode 0600 unless
  // --chmod, owned as --chown says. Cached by the URL like a RUN: --no-cache fetches again.
  absl::Status AddUrl(const std::string& url, const std::string& dest_text, bool dest_dir_named,
                      const std::string& dest, uint32_t uid, uint32_t gid,
                      std::optional<uint32_t> chmod) {
    if (!absl::StartsWith(url, "http://") && !absl::StartsWith(url, "https://")) {
      return absl::InvalidArgumentError(
          absl::StrCat("ADD ", url,
                       ": only http:// and https:// URLs are fetched; clone or fetch other "
                       "sources in a RUN"));
    }
    std::string rest = url.substr(url.find("://") + 3);
    std::string host = rest.substr(0, rest.find_first_of("/?#"));
    if (spec_.egress.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("ADD ", url, ": the build has no network; build with --allow ",
                       host.empty() ? "HOST" : host, " to let ADD fetch it"));
    }
    std::string path = rest.substr(std::min(rest.size(), rest.find_first_of("/?#")));
    path = path.substr(0, path.find_first_of("?#"));
    std::string name = path.substr(path.rfind('/') == std::string::npos ? 0 : path.rfind('/') + 1);
    std::string to = dest;
    if (dest_dir_named || IsStageDirectory(s_, dest)) {
      if (name.empty() || name == "." || name == "..") {
        return absl::InvalidArgumentError(
            absl::StrCat("ADD ", url, ": the URL names no file; give the destination's file name (",
                         dest_text, "/NAME)"));
      }
      to = CleanSlashPath(absl::StrCat(dest, "/", name));
    }
    if (to == "/") return absl::InvalidArgumentError("an ADD cannot replace the image's root");
    nlohmann::json rules = nlohmann::json::array();
    for (const EgressGrant& g : spec_.egress) rules.push_back(g.rule);
    std::string mode = absl::StrFormat("%o", chmod ? *chmod : 0600);
    nlohmann::json key = {{"add_url", url}, {"dest", to},   {"uid", uid},
                          {"gid", gid},     {"mode", mode}, {"egress", rules}};
    std::vector<ExecRequest> commands = {
        RootCommand({"curl", "-fsSL", "--proto", "=http,https", "--create-dirs", "-o", to, url}),
        RootCommand({"chmod", mode, to}), RootCommand({"chown", absl::StrCat(uid, ":", gid), to})};
    return LayerStep(key, [&](const std::string& out) {
      absl::Status made = InBuildVm(spec_.egress, {}, commands, "what ADD fetched", out);
      if (!made.ok() && absl::StrContains(made.message(), "curl")) {
        return absl::Status(
            made.code(),
            absl::StrCat("ADD ", url, " (fetched with the image's curl): ", made.message()));
      }
      return made;
    });
  }

  absl::Status CopyStep(const DockerInstruction& ins,
                        const std::map<std::string, std::string>& vars) {
    const bool add = ins.kind == DockerInstructionKind::kAdd;
    std::vector<std::string> sources;
    for (const std::string& w : ins.words) {
      absl::StatusOr<std::string> v = ExpandWord(w, vars, escape_);
      if (!v.ok()) return v.status();
      sources.push_back(*v);
    }
    std::string dest_text = sources.back();
    sources.pop_back();
    bool dest_dir_named = absl::EndsWith(dest_text, "/") || dest_text == "." || dest_text == "..";
    std::string dest = ImagePath(s_, dest_text);
    uint32_t uid = 0, gid = 0;
    std::optional<uint32_t> chmod;
    if (absl::Status st = Ownership(s_, ins, vars, &uid, &gid, &chmod); !st.ok()) return st;
    auto item_mode = [&](uint32_t mode) { return chmod ? *chmod : mode; };

    // Where each source's entries go.
    std::vector<LayerItem> items;
    std::vector<ContextEntry> from_entries;  // COPY --from: entries read out of an image
    std::string from_image;
    bool many = sources.size() > 1;
    for (const std::string& src : sources) {
      if (add && (absl::StrContains(src, "://") || absl::StartsWith(src, "git@"))) {
        if (sources.size() > 1 || ins.flags.count("from")) {
          return absl::InvalidArgumentError(
              absl::StrCat("ADD ", src, ": a URL is added alone, one per ADD"));
        }
        return AddUrl(src, dest_text, dest_dir_named, dest, uid, gid, chmod);
      }
      if (absl::StartsWith(src, "<<")) {
        auto h =
            std::find_if(ins.heredocs.begin(), ins.heredocs.end(), [&](const DockerHeredoc& d) {
              return src == "<<" + d.name || src == "<<-" + d.name || src == "<<'" + d.name + "'" ||
                     src == "<<\"" + d.name + "\"";
            });
        if (h == ins.heredocs.end()) continue;
        std::string body = h->body;
        if (h->expand) {
          absl::StatusOr<std::string> v = ExpandWord(body, vars, escape_);
          if (v.ok()) body = *v;
        }
        std::string to = dest_dir_named || many ? absl::StrCat(dest, "/", h->name) : dest;
        items.push_back({.dest = CleanSlashPath(to).substr(1),
                         .inline_content = body,
                         .type = S_IFREG,
                         .mode = item_mode(0644),
                         .uid = uid,
                         .gid = gid});
      }
    }
    if (auto from = ins.flags.find("from"); from != ins.flags.end()) {
      return CopyFrom(ins, from->second, sources, dest, dest_dir_named, uid, gid, chmod, vars);
    }
    for (const std::string& src : sources) {
      if (absl::StartsWith(src, "<<")) continue;
      absl::StatusOr<std::vector<const ContextEntry*>> matched = context_.Match(src);
      if (!matched.ok()) return matched.status();
      if (matched->size() > 1) many = true;
    }
    if (many && !dest_dir_named) {
      return absl::InvalidArgumentError(absl::StrCat(
          "with more than one source, the destination must be a directory and end with /: write ",
          dest_text, "/"));
    }
    bool into_dir = many || dest_dir_named || IsStageDirectory(s_, dest);
    bool made_dir = false;
    for (const std::string& src : sources) {
      if (absl::StartsWith(src, "<<")) continue;
      absl::StatusOr<std::vector<const ContextEntry*>> matched = context_.Match(src);
      for (const ContextEntry* e : *matched) {
        if (e->type == S_IFDIR) {
          // A directory stands for what is in it, copied into the destination.
          if (!IsStageDirectory(s_, dest)) {
            items.push_back({.dest = dest.substr(1),
                             .type = S_IFDIR,
                             .mode = item_mode(0755),
                             .uid = uid,
                             .gid = gid});
          }
          std::string prefix = e->path.empty() ? "" : e->path + "/";
          for (const ContextEntry* below : context_.Below(*e)) {
            std::string rel = below->path.substr(prefix.size());
            items.push_back({.dest = CleanSlashPath(absl::StrCat(dest, "/", rel)).substr(1),
                             .source = below,
                             .type = below->type,
                             .mode = item_mode(below->mode),
                             .uid = uid,
                             .gid = gid});
          }
        } else if (absl::StatusOr<bool> archive = add ? context_.IsTarArchive(*e) : false;
                   !archive.ok()) {
          return archive.status();
        } else if (*archive) {
          // ADD of a local tar: unpacked into the destination, a directory whatever it ends with.
          if (!IsStageDirectory(s_, dest) && !made_dir) {
            items.push_back({.dest = dest.substr(1),
                             .type = S_IFDIR,
                             .mode = item_mode(0755),
                             .uid = uid,
                             .gid = gid});
            made_dir = true;
          }
          items.push_back({.dest = dest.substr(1),
                           .source = e,
                           .type = S_IFREG,
                           .mode = chmod ? *chmod : 0,
                           .uid = uid,
                           .gid = gid,
                           .unpack = true,
                           .own = ins.flags.count("chown") > 0,
                           .set_mode = chmod.has_value()});
        } else {
          std::string name =
              e->path.substr(e->path.rfind('/') == std::string::npos ? 0 : e->path.rfind('/') + 1);
          std::string to = into_dir ? absl::StrCat(dest, "/", name) : dest;
          items.push_back({.dest = CleanSlashPath(to).substr(1),
                           .source = e,
                           .type = e->type,
                           .mode = item_mode(e->mode),
                           .uid = uid,
                           .gid = gid});
        }
      }
    }
    for (const LayerItem& item : items) {
      if (item.dest.empty()) {
        return absl::InvalidArgumentError("a COPY cannot replace the image's root directory");
      }
    }
    nlohmann::json what = nlohmann::json::array();
    for (const LayerItem& item : items) {
      what.push_back({item.dest, item.type, item.mode, item.uid, item.gid,
                      item.source ? item.source->digest + item.source->link
                                  : Sha256Hex(item.inline_content.value_or(""))});
      if (item.unpack) what.back().push_back({"unpack", item.own, item.set_mode});
    }
    return LayerStep({{"copy", what}},
                     [&](const std::string& out) { return context_.WriteLayer(items, out, cap_); });
  }

  // COPY --from=STAGE|IMAGE: the entries come out of that stage's (or image's) files.
  absl::Status CopyFrom(const DockerInstruction& ins, const std::string& from_text,
                        const std::vector<std::string>& sources, const std::string& dest,
                        bool dest_dir_named, uint32_t uid, uint32_t gid,
                        std::optional<uint32_t> chmod,
                        const std::map<std::string, std::string>& vars) {
    absl::StatusOr<std::string> from = ExpandWord(from_text, vars, escape_);
    if (!from.ok()) return from.status();
    std::string rootfs, digest;
    if (auto it = done_.find(absl::AsciiStrToLower(*from)); it != done_.end()) {
      absl::StatusOr<ImageInfo> image = Materialize(it->second);
      if (!image.ok()) return image.status();
      rootfs = image->rootfs_path;
      digest = image->digest;
    } else {
      absl::StatusOr<ImageInfo> image = builder_->sessions_->images().Pull(
          who_, *from, {.if_missing = true, .progress = nullptr, .audit = true});
      if (!image.ok()) return image.status();
      rootfs = image->rootfs_path;
      digest = image->digest;
    }
    if (sources.size() > 1 && !dest_dir_named) {
      return absl::InvalidArgumentError(
          "with more than one source, the destination must be a directory and end with /");
    }
    bool into_dir = sources.size() > 1 || dest_dir_named || IsStageDirectory(s_, dest);
    nlohmann::json what = {{"from", digest},
                           {"sources", sources},
                           {"dest", dest},
                           {"into_dir", into_dir},
                           {"uid", uid},
                           {"gid", gid},
                           {"chmod", chmod ? static_cast<int64_t>(*chmod) : -1}};
    return LayerStep({{"copy_from", what}}, [&](const std::string& out) -> absl::Status {
      LayerTarWriter layer;
      if (absl::Status st = layer.Open(out); !st.ok()) return st;
      for (const std::string& src : sources) {
        std::string path = CleanSlashPath("/" + src);
        std::string name = path.substr(path.rfind('/') + 1);
        absl::Status walked = WalkExt4(
            rootfs, path, [&](const Ext4Entry& e, const Ext4Writer::Reader& read) -> absl::Status {
              std::string to;
              if (e.path.empty() && e.type != S_IFDIR) {
                to = into_dir ? absl::StrCat(dest, "/", name) : dest;
              } else {
                to = e.path.empty() ? dest : absl::StrCat(dest, "/", e.path);
              }
              to = CleanSlashPath(to).substr(1);
              if (to.empty()) return absl::OkStatus();  // the root's metadata stays
              Ext4Entry copy = e;
              copy.meta.uid = uid;
              copy.meta.gid = gid;
              if (chmod) copy.meta.mode = *chmod;
              return layer.Add(to, copy, read);
            });
        if (absl::IsNotFound(walked)) {
          return absl::NotFoundError(absl::StrCat(src, " is not in ", *from));
        }
        if (!walked.ok()) return walked;
      }
      return layer.Close();
    });
  }

  ImageBuilder* builder_;
  const Principal& who_;
  const DockerfileBuildSpec& spec_;
  const ImageBuilder::Progress& progress_;
  const ImageBuilder::Cancelled& cancelled_;
  ImageStore images_;
  std::vector<std::string> build_tags_;
  BuildContext context_;
  char escape_ = '\\';
  std::string layer_dir_;
  time_t started_ = 0;
  uint64_t cap_ = 0;
  std::map<std::string, std::string> global_;
  std::map<std::string, StageState> done_;  // by stage name, and index as text
  StageState s_;
  size_t step_ = 0, total_ = 0;
};

absl::StatusOr<ImageInfo> ImageBuilder::BuildDockerfile(const Principal& who,
                                                        const DockerfileBuildSpec& spec,
                                                        const Progress& progress,
                                                        const Cancelled& cancelled) {
  return DockerfileBuild(this, who, spec, progress, cancelled).Run();
}

}  // namespace airlock
