// airlock volume: named disks of yours that outlive sessions (airlockd's Volumes service).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "src/cli/cli_app.h"
#include "src/cli/cli_commands.h"
#include "src/cli/daemon_client.h"
#include "src/cli/exec_client.h"
#include "src/cli/host_tools.h"
#include "src/common/byte_size.h"
#include "src/common/file_util.h"
#include "src/common/unique_fd.h"

namespace airlock {
namespace {

// Where `volume export` mounts the volume in its session.
constexpr char kExportMountPoint[] = "/airlock-export";

int Fail(const std::string& what, const grpc::Status& status) {
  std::fprintf(stderr, "airlock volume %s: %s\n", what.c_str(), Describe(status).c_str());
  return 1;
}

std::string Origin(const v1::Volume& v) { return v.origin().empty() ? "-" : v.origin(); }

int Create(const std::string& name, uint64_t size) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::CreateVolumeRequest request;
  request.set_name(name);
  request.set_size_bytes(size);
  v1::Volume volume;
  grpc::Status status = client->volumes->Create(&context, request, &volume);
  if (!status.ok()) return Fail("create", status);
  std::printf("%s\n", volume.name().c_str());
  return 0;
}

int List(bool json) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::ListVolumesResponse response;
  grpc::Status status = client->volumes->List(&context, {}, &response);
  if (!status.ok()) return Fail("ls", status);
  if (json) {
    nlohmann::json out = nlohmann::json::array();
    for (const v1::Volume& v : response.volumes()) {
      out.push_back({{"name", v.name()},
                     {"size_bytes", v.size_bytes()},
                     {"read_only", v.read_only()},
                     {"origin", v.origin()},
                     {"generation", v.generation()},
                     {"created_unix_ms", v.created_unix_ms()},
                     {"holders", std::vector<std::string>(v.holders().begin(), v.holders().end())},
                     {"held_read_write", v.held_read_write()}});
    }
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%-32s %8s  %-9s %-16s %s\n", "NAME", "SIZE", "KIND", "CREATED", "HELD BY");
  for (const v1::Volume& v : response.volumes()) {
    char when[32];
    time_t t = static_cast<time_t>(v.created_unix_ms() / 1000);
    strftime(when, sizeof(when), "%Y-%m-%d %H:%M", gmtime(&t));
    std::string held = v.holders().empty()
                           ? "-"
                           : absl::StrCat(absl::StrJoin(v.holders(), ","),
                                          v.held_read_write() ? " (read-write)" : " (read-only)");
    std::printf("%-32s %8s  %-9s %-16s %s\n", v.name().c_str(), FormatBytes(v.size_bytes()).c_str(),
                v.read_only() ? "snapshot" : "volume", when, held.c_str());
    if (!v.origin().empty()) std::printf("  %s\n", Origin(v).c_str());
  }
  return 0;
}

int Remove(const std::string& name) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::RemoveVolumeRequest request;
  request.set_name(name);
  v1::RemoveVolumeResponse response;
  grpc::Status status = client->volumes->Remove(&context, request, &response);
  return status.ok() ? 0 : Fail("rm", status);
}

int Snapshot(const std::string& name, const std::string& snapshot) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::SnapshotVolumeRequest request;
  request.set_name(name);
  request.set_snapshot(snapshot);
  v1::Volume volume;
  grpc::Status status = client->volumes->Snapshot(&context, request, &volume);
  if (!status.ok()) return Fail("snapshot", status);
  std::printf("%s\n", volume.name().c_str());
  return 0;
}

int Import(const std::string& name, const std::string& path) {
  struct stat st;
  if (path != "-" && stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    // A directory becomes a tar first, in airlock-tools (libarchive), read with your rights.
    return BecomeProgramBeside(kToolsProgram, {"volume-import", name, path});
  }
  UniqueFd fd(path == "-" ? dup(0) : open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    std::fprintf(stderr, "airlock volume import: cannot read %s: %s\n", path.c_str(),
                 std::strerror(errno));
    return 1;
  }
  return ImportVolumeFrom(name, fd.get());
}

// Writes what the command prints into a file.
class ToFile : public ExecIo {
 public:
  explicit ToFile(int fd) : fd_(fd) {}
  void Stdout(const std::string& data) override {
    if (written_.ok()) written_ = WriteAll(fd_, data);
  }
  void Stderr(const std::string& data) override {
    std::fwrite(data.data(), 1, data.size(), stderr);
  }
  const absl::Status& written() const { return written_; }

 private:
  int fd_;
  absl::Status written_;
};

int Export(const std::string& name, const std::string& out, const std::string& image) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  bool to_stdout = out == "-";
  if (to_stdout && isatty(1)) {
    std::fprintf(stderr, "airlock volume export: stdout is a terminal; name a file, or pipe it\n");
    return 2;
  }
  std::string tmp = to_stdout ? "" : absl::StrCat(out, ".airlock-tmp-", getpid());
  UniqueFd fd(to_stdout ? dup(1)
                        : open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
  if (!fd.valid()) {
    std::fprintf(stderr, "airlock volume export: cannot write %s: %s\n",
                 to_stdout ? "stdout" : tmp.c_str(), std::strerror(errno));
    return 1;
  }
  // The volume is read in a session of its own, by tar in the guest: what sessions wrote on it
  // is never parsed on this host.
  v1::ExecStart start;
  start.set_image(image);
  for (const char* a : {"tar", "--numeric-owner", "-C", kExportMountPoint, "-cf", "-", "."}) {
    start.add_argv(a);
  }
  v1::VolumeMount* mount = start.add_volumes();
  mount->set_name(name);
  mount->set_path(kExportMountPoint);
  mount->set_read_only(true);
  ToFile io(fd.get());
  grpc::ClientContext context;
  ExecOutcome outcome = RunExec(*client, start, io, context);
  absl::Status done = io.written();
  if (done.ok() && !outcome.exit) {
    done = absl::UnavailableError(Describe(outcome.status));
  } else if (done.ok() && outcome.exit->code() != 0) {
    done = absl::InternalError(absl::StrCat("tar in the guest exited with ", outcome.exit->code(),
                                            " (the image must have tar; --image names another)"));
  }
  if (done.ok() && !to_stdout) {
    if (fsync(fd.get()) != 0 || rename(tmp.c_str(), out.c_str()) != 0) {
      done = absl::InternalError(absl::StrCat("write ", out, ": ", std::strerror(errno)));
    }
  }
  if (!done.ok()) {
    if (!to_stdout) unlink(tmp.c_str());
    std::fprintf(stderr, "airlock volume export: %s\n", std::string(done.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int ImportVolumeFrom(const std::string& name, int fd) {
  std::optional<DaemonClient> client = Connect();
  if (!client) return 1;
  grpc::ClientContext context;
  v1::Volume volume;
  std::unique_ptr<grpc::ClientWriter<v1::ImportVolumeChunk>> stream =
      client->volumes->Import(&context, &volume);
  v1::ImportVolumeChunk first;
  first.set_name(name);
  grpc::Status status = UploadFd(fd, std::move(first), *stream, context);
  if (!status.ok()) return Fail("import", status);
  std::printf("%s: generation %lld\n", volume.name().c_str(),
              static_cast<long long>(volume.generation()));
  return 0;
}

void AddVolumeCommand(Cli& cli) {
  CLI::App* group = cli.Group("volume", "named disks of yours that outlive sessions");
  group->footer(
      "A volume is an ext4 disk of yours that sessions attach:\n"
      "  airlock volume create data --size 10g\n"
      "  airlock volume import data ./dataset/      (a directory or a tar; replaces its content)\n"
      "  airlock session create --volume data:/data       (read-write: one session at a time)\n"
      "  airlock run --volume data:/data:ro -- ls /data   (read-only: any number at once)\n"
      "  airlock volume snapshot data data@v1       (a read-only copy, as it is now)\n"
      "  airlock volume export data out.tar ; airlock volume ls ; airlock volume rm data\n"
      "A paused session keeps its volumes. A fork gets its own copy of each read-write volume\n"
      "(named NAME-<fork's id>, in volume ls); read-only ones are shared. Volumes count against\n"
      "your disk quota (airlock quota). Their root directory belongs to root in the guest.");
  auto name = std::make_shared<std::string>();
  auto size = std::make_shared<uint64_t>(0);
  CLI::App* create = cli.Add(group, "create", "make an empty volume",
                             [name, size] { return Create(*name, *size); });
  create->add_option("NAME", *name, "1 to 63 of a-z, 0-9, '.', '_', '-'")->required();
  AddSizeOption(create, "--size", size.get(), "its size (16m to 1t, like 10g)")->required();

  auto json = std::make_shared<bool>(false);
  CLI::App* ls = cli.Add(group, "ls", "your volumes, their sizes and who holds them",
                         [json] { return List(*json); });
  AddJsonFlag(ls, json.get());

  auto removed = std::make_shared<std::string>();
  CLI::App* rm = cli.Add(group, "rm", "remove a volume no session attaches",
                         [removed] { return Remove(*removed); });
  rm->add_option("NAME", *removed, "the volume")->required();

  auto source = std::make_shared<std::string>();
  auto snapshot = std::make_shared<std::string>();
  CLI::App* snap = cli.Add(group, "snapshot", "a read-only copy of a volume as it is now",
                           [source, snapshot] { return Snapshot(*source, *snapshot); });
  snap->add_option("NAME", *source, "the volume (no running session may be writing it)")
      ->required();
  snap->add_option("SNAPSHOT", *snapshot, "the copy's name: NAME@TAG (data@v1)")->required();

  auto target = std::make_shared<std::string>();
  auto from = std::make_shared<std::string>();
  CLI::App* import =
      cli.Add(group, "import", "replace a volume's content with a directory's or a tar's",
              [target, from] { return Import(*target, *from); });
  import->add_option("NAME", *target, "the volume (no session may attach it)")->required();
  import
      ->add_option("PATH", *from,
                   "a directory (read with your rights), a tar (any compression), or - for a "
                   "tar on stdin")
      ->required();

  auto exported = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto image = std::make_shared<std::string>();
  CLI::App* exp = cli.Add(group, "export", "write a volume's files as a tar",
                          [exported, out, image] { return Export(*exported, *out, *image); });
  exp->add_option("NAME", *exported, "the volume (no session may be writing it)")->required();
  exp->add_option("OUT", *out, "the tar to write, or - for stdout")->required();
  exp->add_option("--image", *image,
                  "the image whose tar reads the volume, in a session of its own (default: the "
                  "default image)");
}

}  // namespace airlock
