// airlock-tools: the CLI's work that needs libarchive, libext2fs or libcurl, kept out of
// `airlock` so that its other commands start without loading them (see src/cli/host_tools.h).
// airlock runs it; it is not a command for people:
//   airlock-tools capture --max-bytes N -- DIR    the workspace's ext4 into fd 3; the result on
//                                                 stdout (EncodeCaptureResult)
//   airlock-tools describe --max-bytes N -- DIR   DIR described as sync sees it, on stdout
//   airlock-tools push ARCHIVE REF                `airlock image push`
//   airlock-tools doctor                          `airlock doctor`
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "src/cli/cli_commands.h"
#include "src/cli/daemon_client.h"
#include "src/cli/host_tools.h"
#include "src/common/byte_size.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/host_paths.h"
#include "src/common/subprocess.h"
#include "src/common/unique_fd.h"
#include "src/common/utf8.h"
#include "src/image/docker_ignore.h"
#include "src/image/dockerfile.h"
#include "src/image/dpkg_status.h"
#include "src/image/ext4_reader.h"
#include "src/image/image_store.h"
#include "src/image/oci_archive.h"
#include "src/image/registry_client.h"
#include "src/image/tar_to_ext4.h"
#include "src/secrets/secret_source.h"
#include "src/vm/accelerator.h"
#include "src/workspace/workspace_capture.h"

namespace airlock {
namespace {

// capture and describe: the result goes to stdout whatever happens; the exit code is 0 when it
// was written.
int Capture(bool into_image, const std::vector<std::string>& args) {
  uint64_t max_bytes = 0;
  if (args.size() != 4 || args[0] != "--max-bytes" || !absl::SimpleAtoi(args[1], &max_bytes) ||
      args[2] != "--") {
    std::fprintf(stderr, "airlock-tools: usage: %s --max-bytes N -- DIR\n",
                 into_image ? "capture" : "describe");
    return 2;
  }
  const std::string& dir = args[3];
  absl::StatusOr<CapturedWorkspace> result;
  if (into_image) {
    result = CaptureWorkspace(dir, "/proc/self/fd/3", {.max_bytes = max_bytes});
  } else {
    absl::StatusOr<WorkspaceTree> tree = DescribeWorkspace(dir, {.max_bytes = max_bytes});
    if (tree.ok()) {
      result = CapturedWorkspace{.tree = *std::move(tree)};
    } else {
      result = tree.status();
    }
  }
  std::string out = EncodeCaptureResult(result);
  return WriteAll(1, out).ok() ? 0 : 1;
}

// Writes the tree at dir (its own entries, "." first; symbolic links as links, never followed;
// one filesystem) as a pax tar into fd, but what leave_out(relative path, is a directory) says
// to leave out (a directory left out is not entered unless enter_left_out says so).
absl::Status TarDirectory(const std::string& dir, int fd,
                          const std::function<bool(const std::string&, bool)>& leave_out = nullptr,
                          bool enter_left_out = false) {
  struct archive* in = archive_read_disk_new();
  struct archive* out = archive_write_new();
  std::unique_ptr<struct archive, int (*)(struct archive*)> in_closer(in, archive_free),
      out_closer(out, archive_free);
  archive_read_disk_set_symlink_physical(in);
  archive_read_disk_set_behavior(in,
                                 ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS | ARCHIVE_READDISK_NO_XATTR);
  archive_read_disk_set_standard_lookup(in);
  if (archive_write_set_format_pax_restricted(out) != ARCHIVE_OK ||
      archive_write_open_fd(out, fd) != ARCHIVE_OK) {
    return absl::InternalError(absl::StrCat("start a tar: ", archive_error_string(out)));
  }
  if (chdir(dir.c_str()) != 0) return ErrnoStatus("enter", dir);
  if (archive_read_disk_open(in, ".") != ARCHIVE_OK) {
    return absl::InvalidArgumentError(absl::StrCat(dir, ": ", archive_error_string(in)));
  }
  std::string buffer(1 << 20, '\0');
  for (;;) {
    struct archive_entry* entry = archive_entry_new();
    int r = archive_read_next_header2(in, entry);
    if (r == ARCHIVE_EOF) {
      archive_entry_free(entry);
      break;
    }
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      std::string why = archive_error_string(in) ? archive_error_string(in) : "unreadable";
      archive_entry_free(entry);
      return absl::InvalidArgumentError(absl::StrCat(dir, ": ", why));
    }
    std::string rel = archive_entry_pathname(entry) ? archive_entry_pathname(entry) : "";
    if (rel.rfind("./", 0) == 0) rel = rel.substr(2);
    bool is_dir = archive_entry_filetype(entry) == AE_IFDIR;
    if (leave_out && rel != "." && leave_out(rel, is_dir)) {
      if (is_dir && enter_left_out) archive_read_disk_descend(in);
      archive_entry_free(entry);
      continue;
    }
    archive_read_disk_descend(in);
    absl::Status wrote = [&]() -> absl::Status {
      if (archive_write_header(out, entry) != ARCHIVE_OK) {
        return absl::InternalError(
            absl::StrCat("tar ", archive_entry_pathname(entry), ": ", archive_error_string(out)));
      }
      if (archive_entry_filetype(entry) != AE_IFREG || archive_entry_size(entry) == 0) {
        return absl::OkStatus();
      }
      for (;;) {
        la_ssize_t n = archive_read_data(in, buffer.data(), buffer.size());
        if (n < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("read ", archive_entry_pathname(entry), ": ", archive_error_string(in)));
        }
        if (n == 0) return absl::OkStatus();
        if (archive_write_data(out, buffer.data(), static_cast<size_t>(n)) != n) {
          return absl::InternalError(
              absl::StrCat("tar ", archive_entry_pathname(entry), ": ", archive_error_string(out)));
        }
      }
    }();
    archive_entry_free(entry);
    if (!wrote.ok()) return wrote;
  }
  if (archive_write_close(out) != ARCHIVE_OK) {
    return absl::InternalError(absl::StrCat("finish the tar: ", archive_error_string(out)));
  }
  return absl::OkStatus();
}

// `airlock volume import NAME DIR`: the directory as a tar in an unnamed file (whole before a
// byte is sent, so a directory that cannot be read changes nothing), then streamed to airlockd.
int VolumeImport(const std::string& name, const std::string& dir) {
  const char* tmpdir = std::getenv("TMPDIR");
  UniqueFd fd(open(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp",
                   O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    std::fprintf(stderr, "airlock volume import: no temporary file for the tar: %s\n",
                 std::strerror(errno));
    return 1;
  }
  if (absl::Status s = TarDirectory(dir, fd.get()); !s.ok()) {
    std::fprintf(stderr, "airlock volume import: %s; the volume is unchanged\n",
                 std::string(s.message()).c_str());
    return 1;
  }
  if (lseek(fd.get(), 0, SEEK_SET) != 0) return 1;
  return ImportVolumeFrom(name, fd.get());
}

// `airlock image build DIR`: the arguments airlock passed (--dir, --file, --tag, --target,
// --no-cache, and repeatable --build-arg, --allow, --allow-preset, --secret, each with its
// value).
int ImageBuild(const std::vector<std::string>& args) {
  v1::DockerfileBuildChunk first;
  std::string dir, file;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& flag = args[i];
    if (flag == "--no-cache") {
      first.set_no_cache(true);
      continue;
    }
    if (i + 1 >= args.size()) {
      std::fprintf(stderr, "airlock image build: %s needs a value\n", flag.c_str());
      return 2;
    }
    const std::string& value = args[++i];
    if (flag == "--dir") {
      dir = value;
    } else if (flag == "--file") {
      file = value;
    } else if (flag == "--tag") {
      first.set_tag(value);
    } else if (flag == "--target") {
      first.set_target(value);
    } else if (flag == "--build-arg") {
      size_t eq = value.find('=');
      if (eq == std::string::npos || eq == 0) {
        const char* env = std::getenv(value.c_str());  // --build-arg NAME: its value here
        if (env == nullptr) continue;
        (*first.mutable_build_args())[value] = env;
      } else {
        (*first.mutable_build_args())[value.substr(0, eq)] = value.substr(eq + 1);
      }
    } else if (flag == "--allow") {
      first.add_allow(value);
    } else if (flag == "--allow-preset") {
      first.add_allow_preset(value);
    } else if (flag == "--secret") {
      // Read here, with the user's rights, as session create reads it.
      if (absl::Status s = AddSecretBinding(value, first.mutable_secrets()); !s.ok()) {
        std::fprintf(stderr, "airlock image build: %s\n", std::string(s.message()).c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr, "airlock image build: unknown argument %s\n", flag.c_str());
      return 2;
    }
  }
  if (file.empty()) file = dir + "/Dockerfile";
  absl::StatusOr<std::string> dockerfile = ReadFileToString(file, kMaxDockerfileBytes);
  if (!dockerfile.ok()) {
    std::fprintf(stderr, "airlock image build: %s (name another with -f FILE)\n",
                 std::string(dockerfile.status().message()).c_str());
    return 2;
  }
  if (absl::StatusOr<Dockerfile> parsed = ParseDockerfile(*dockerfile); !parsed.ok()) {
    std::fprintf(stderr, "airlock image build: %s: %s\n", file.c_str(),
                 std::string(parsed.status().message()).c_str());
    return 2;
  }
  first.set_dockerfile(*dockerfile);
  DockerIgnore ignore;
  absl::StatusOr<std::string> ignore_text = ReadFileToString(dir + "/.dockerignore", 1 << 20);
  if (ignore_text.ok()) {
    absl::StatusOr<DockerIgnore> parsed = DockerIgnore::Parse(*ignore_text);
    if (!parsed.ok()) {
      std::fprintf(stderr, "airlock image build: %s/%s\n", dir.c_str(),
                   std::string(parsed.status().message()).c_str());
      return 2;
    }
    ignore = *std::move(parsed);
  } else if (!absl::IsNotFound(ignore_text.status())) {
    std::fprintf(stderr, "airlock image build: %s\n",
                 std::string(ignore_text.status().message()).c_str());
    return 1;
  }
  // The context, whole in an unnamed file before a byte is sent: a directory that cannot be
  // read builds nothing.
  const char* tmpdir = std::getenv("TMPDIR");
  UniqueFd fd(open(tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp",
                   O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    std::fprintf(stderr, "airlock image build: no temporary file for the context: %s\n",
                 std::strerror(errno));
    return 1;
  }
  absl::Status tarred = TarDirectory(
      dir, fd.get(), [&](const std::string& rel, bool) { return ignore.Excluded(rel); },
      ignore.HasExceptions());
  if (!tarred.ok()) {
    std::fprintf(stderr, "airlock image build: the context: %s\n",
                 std::string(tarred.message()).c_str());
    return 1;
  }
  struct stat st;
  if (fstat(fd.get(), &st) == 0) {
    std::fprintf(stderr, "airlock image build: sending the context (%s) to airlockd\n",
                 FormatBytes(static_cast<uint64_t>(st.st_size)).c_str());
  }
  if (lseek(fd.get(), 0, SEEK_SET) != 0) return 1;
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::DockerfileBuildChunk, v1::BuildProgress>> stream =
      client->images->BuildDockerfile(&context);
  v1::DockerfileBuildChunk chunk = std::move(first);
  std::string piece(1 << 20, '\0');
  for (;;) {
    ssize_t n = read(fd.get(), piece.data(), piece.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return 1;
    chunk.set_context(piece.data(), static_cast<size_t>(n));
    chunk.set_last(n == 0);
    bool sent = stream->Write(chunk);
    for (v1::SecretBinding& b : *chunk.mutable_secrets()) secrets::Wipe(*b.mutable_value());
    if (!sent || n == 0) break;  // a refusal comes with Finish
    chunk = v1::DockerfileBuildChunk();
  }
  stream->WritesDone();
  v1::BuildProgress progress;
  std::optional<v1::Image> image;
  while (stream->Read(&progress)) {
    if (progress.has_image()) {
      image = progress.image();
    } else {
      std::fprintf(stderr, "%s\n", EscapeForTerminal(progress.line()).c_str());
    }
  }
  grpc::Status status = stream->Finish();
  if (!status.ok()) {
    std::fprintf(stderr, "airlock image build: %s\n",
                 EscapeForTerminal(Describe(status), /*keep_newlines=*/true).c_str());
    return status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? 2 : 1;
  }
  if (!image) {
    std::fprintf(stderr, "airlock image build: airlockd ended the build without the image\n");
    return 1;
  }
  std::printf("%s %s\n", image->name().c_str(), image->digest().c_str());
  return 0;
}

// One of the caller's images as airlockd exports it (an OCI image layout tar), into fd.
absl::Status ExportImage(const std::string& name, int fd) {
  absl::StatusOr<DaemonClient> client = ConnectToDaemon();
  if (!client.ok()) return client.status();
  grpc::ClientContext context;
  v1::ExportImageRequest request;
  request.set_name(name);
  std::unique_ptr<grpc::ClientReader<v1::ExportImageChunk>> reader =
      client->images->Export(&context, request);
  v1::ExportImageChunk chunk;
  while (reader->Read(&chunk)) {
    if (absl::Status s = WriteAll(fd, chunk.data()); !s.ok()) {
      context.TryCancel();
      reader->Finish();
      return s;
    }
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(status.error_code()), Describe(status));
  }
  return absl::OkStatus();
}

// An unnamed file for a pushed image's archive, in $TMPDIR (else /var/tmp).
absl::StatusOr<UniqueFd> TemporaryFile() {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string dir = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/var/tmp";
  UniqueFd fd(open(dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus("create a temporary file in", dir);
  return fd;
}

// `airlock image save NAME OUT`: OUT "-" is standard output (not a terminal).
int Save(const std::string& name, const std::string& out) {
  auto fail = [&](const absl::Status& s) {
    std::fprintf(stderr, "airlock image save: %s\n",
                 EscapeForTerminal(std::string(s.message()), true).c_str());
    return absl::IsNotFound(s) || absl::IsInvalidArgument(s) ? 2 : 1;
  };
  if (out == "-") {
    if (isatty(STDOUT_FILENO)) {
      return fail(absl::InvalidArgumentError(
          "standard output is a terminal; write to a file with -o FILE, or redirect it"));
    }
    absl::Status s = ExportImage(name, STDOUT_FILENO);
    return s.ok() ? 0 : fail(s);
  }
  // Under a temporary name, synced, then renamed: a failed save leaves no half archive.
  std::string tmp = absl::StrCat(out, ".airlock-save-", getpid());
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd.valid()) return fail(ErrnoStatus("create", tmp));
  absl::Status s = ExportImage(name, fd.get());
  if (s.ok() && fsync(fd.get()) != 0) s = ErrnoStatus("fsync", tmp);
  if (s.ok() && rename(tmp.c_str(), out.c_str()) != 0) s = ErrnoStatus("rename to", out);
  if (!s.ok()) {
    unlink(tmp.c_str());
    return fail(s);
  }
  return 0;
}

// `airlock image push ARCHIVE|NAME REF`: a file that exists is an archive; anything else is
// one of the caller's images, exported by airlockd and sent with the user's credentials.
int Push(const std::string& archive_or_image, const std::string& to) {
  absl::StatusOr<ImageReference> ref = ParseImageReference(to);
  if (!ref.ok()) {
    std::fprintf(stderr, "airlock image push: %s\n", std::string(ref.status().message()).c_str());
    return 2;
  }
  std::string archive = archive_or_image;
  UniqueFd exported;
  struct stat st;
  if (stat(archive_or_image.c_str(), &st) != 0 && errno == ENOENT) {
    absl::StatusOr<UniqueFd> fd = TemporaryFile();
    absl::Status s = fd.ok() ? ExportImage(archive_or_image, fd->get()) : fd.status();
    if (!s.ok()) {
      std::fprintf(stderr, "airlock image push: %s is no file, and as an image: %s\n",
                   archive_or_image.c_str(),
                   EscapeForTerminal(std::string(s.message()), true).c_str());
      return absl::IsNotFound(s) ? 2 : 1;
    }
    exported = std::move(*fd);
    archive = absl::StrCat("/proc/self/fd/", exported.get());
  }
  char tmpl[] = "/var/tmp/airlock-push-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    std::perror("airlock image push: mkdtemp");
    return 1;
  }
  std::string work = tmpl;
  absl::StatusOr<ArchiveImage> image = ReadImageArchive(archive, work + "/members");
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

// What this host runs VMs with, and what is missing with the command that fixes it. Exits 0
// only when `airlock run` can work.
// What the default image gives agents: the tools they reach for, with the versions its dpkg
// database records (the image's bytes: escaped), and how many packages it holds in all.
void PrintDefaultImageTools(ImageStore& store) {
  absl::StatusOr<ImageInfo> image = store.Resolve(kDefaultImage);
  if (!image.ok()) return;
  absl::StatusOr<std::string> status =
      ReadFileFromExt4(image->rootfs_path, kDpkgStatusPath, 32 << 20);
  if (!status.ok()) {
    std::printf("  %s: its packages could not be read (%s)\n", kDefaultImage,
                std::string(status.status().message()).c_str());
    return;
  }
  std::map<std::string, std::string> packages = InstalledDebianPackages(*status);
  std::printf("  %s holds %zu Debian packages, among them:\n", kDefaultImage, packages.size());
  static constexpr std::pair<const char*, const char*> kTools[] = {
      {"python3", "python3"},
      {"python3-pip", "pip"},
      {"git", "git"},
      {"curl", "curl"},
      {"ca-certificates", ""},
      {"jq", "jq"},
      {"procps", "ps, free, top"},
      {"less", "less"},
      {"unzip", "unzip"},
      {"build-essential", "gcc, make"}};
  for (const auto& [package, commands] : kTools) {
    auto found = packages.find(package);
    std::string what = *commands == '\0' || std::string(commands) == package
                           ? package
                           : absl::StrCat(package, " (", commands, ")");
    std::printf(
        "    %-32s %s\n", what.c_str(),
        found == packages.end() ? "not installed" : EscapeForTerminal(found->second).c_str());
  }
}

int Doctor() {
  HostPaths paths = DefaultHostPaths();
  std::vector<std::string> missing;
  AcceleratorChoice accel = ChooseAccelerator();
  std::printf("accelerator: %s (%s)\n", accel.name.c_str(), accel.reason.c_str());

  absl::StatusOr<ProcessResult> qemu = RunProcess({paths.qemu, "--version"});
  if (qemu.ok() && qemu->exit_code == 0) {
    std::string first = qemu->output.substr(0, qemu->output.find('\n'));
    std::printf("qemu: %s (%s)\n", paths.qemu.c_str(), first.c_str());
  } else {
    std::printf("qemu: MISSING at %s\n", paths.qemu.c_str());
    missing.push_back("QEMU: run scripts/setup.sh (installs Debian's qemu-system-x86)");
  }

  char real[PATH_MAX];
  if (access(paths.kernel.c_str(), R_OK) == 0 && realpath(paths.kernel.c_str(), real) != nullptr) {
    absl::StatusOr<std::string> release = ReadFileToString(DirName(real) + "/release", 256);
    std::printf("kernel: %s (%s)\n", paths.kernel.c_str(),
                release.ok() ? std::string(absl::StripTrailingAsciiWhitespace(*release)).c_str()
                             : "release unknown");
  } else {
    std::printf("kernel: MISSING at %s\n", paths.kernel.c_str());
    missing.push_back("guest kernel: run scripts/setup.sh (builds it from linux-source-6.1)");
  }

  if (access(paths.initramfs.c_str(), R_OK) == 0) {
    std::printf("initramfs: %s\n", paths.initramfs.c_str());
  } else {
    std::printf("initramfs: MISSING at %s\n", paths.initramfs.c_str());
    missing.push_back("guest agent initramfs: run scripts/setup.sh (builds Airlock)");
  }

  struct statfs fs;
  if (statfs("/sys/fs/cgroup", &fs) == 0 && fs.f_type == CGROUP2_SUPER_MAGIC) {
    std::printf("host cgroups: v2 (VM processes get cpu.max, memory.max, pids.max)\n");
  } else if (access("/sys/fs/cgroup/memory", F_OK) == 0 &&
             access("/sys/fs/cgroup/cpu", F_OK) == 0) {
    std::printf("host cgroups: v1 (VM processes get cpu, memory and pids limits)\n");
  } else {
    std::printf("host cgroups: none usable (VM processes run without host limits)\n");
  }

  ImageStore store(paths.images);
  absl::StatusOr<std::vector<ImageInfo>> images = store.List();
  bool have_default = false;
  std::printf("images (%s):\n", paths.images.c_str());
  if (images.ok()) {
    for (const ImageInfo& image : *images) {
      std::printf("  %s  %s  %.1f MiB\n", image.name.c_str(), image.digest.substr(0, 19).c_str(),
                  image.size_bytes / 1048576.0);
      have_default = have_default || image.name == kDefaultImage;
    }
  }
  if (have_default) {
    PrintDefaultImageTools(store);
  } else {
    std::printf("  (the default image %s is missing)\n", kDefaultImage);
    missing.push_back(absl::StrCat("default image ", kDefaultImage, ": run scripts/setup.sh"));
  }
  if (missing.empty()) {
    std::printf("ready: airlock run -- python3 -c \"print('hi!')\"\n");
    return 0;
  }
  std::printf("missing:\n");
  for (const std::string& m : missing) std::printf("  %s\n", m.c_str());
  return 1;
}

}  // namespace
}  // namespace airlock

int main(int argc, char** argv) {
  airlock::ReadTarNamesAsUtf8();
  std::vector<std::string> args(argv + 1, argv + argc);
  std::string verb = args.empty() ? "" : args[0];
  std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
  if (verb == "capture" || verb == "describe") return airlock::Capture(verb == "capture", rest);
  if (verb == "push" && rest.size() == 2) return airlock::Push(rest[0], rest[1]);
  if (verb == "save" && rest.size() == 2) return airlock::Save(rest[0], rest[1]);
  if (verb == "doctor" && rest.empty()) return airlock::Doctor();
  if (verb == "volume-import" && rest.size() == 2) return airlock::VolumeImport(rest[0], rest[1]);
  if (verb == "image-build") return airlock::ImageBuild(rest);
  std::fprintf(stderr,
               "airlock-tools runs the parts of airlock that need libarchive, libext2fs or "
               "libcurl; use airlock (airlock --help)\n");
  return 2;
}
