#include "src/vm/vm_launcher.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <optional>

#include "absl/strings/str_cat.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/log.h"
#include "src/image/ext4_writer.h"
#include "src/vm/accelerator.h"
#include "src/vm/snapshot.h"

namespace airlock {

absl::StatusOr<UniqueFd> CreateSessionDisk(const std::string& dir, uint64_t bytes) {
  absl::StatusOr<UniqueFd> fd = UnnamedFile(dir);
  if (!fd.ok()) return fd.status();
  absl::StatusOr<std::unique_ptr<Ext4Writer>> writer =
      Ext4Writer::Create(absl::StrCat("/proc/self/fd/", fd->get()), {.size_bytes = bytes});
  if (!writer.ok()) return writer.status();
  if (absl::Status s = (*writer)->Finish(); !s.ok()) return s;
  return fd;
}

namespace {

// What boot and restore both need: the files exist and the hostname is a plain DNS label (it
// travels on the kernel command line).
absl::StatusOr<VmConfig> BaseConfig(const HostPaths& paths, const ImageInfo& image,
                                    const LaunchOptions& options) {
  for (const auto& [what, path] :
       {std::pair{"guest kernel", paths.kernel}, std::pair{"guest initramfs", paths.initramfs}}) {
    if (access(path.c_str(), R_OK) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("the ", what, " ", path, " is missing; run scripts/setup.sh to build it"));
    }
  }
  bool label_ok =
      !options.hostname.empty() && options.hostname.size() <= 63 && options.hostname.front() != '-';
  for (char c : options.hostname) {
    label_ok = label_ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
  }
  if (!label_ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid hostname \"", options.hostname, "\": use 1-63 of a-z, 0-9 and -"));
  }
  VmConfig config;
  config.kernel_path = paths.kernel;
  config.initramfs_path = paths.initramfs;
  config.image_path = image.rootfs_path;
  config.memory_mib = options.memory_mib;
  config.vcpus = options.vcpus;
  config.hostname = options.hostname;
  config.guest_pids_max = options.pids;
  config.host_cgroup = options.host_cgroup;
  config.background = options.background;
  config.runtime_dir = options.runtime_dir;
  config.accelerator = ChooseAccelerator().name;
  return config;
}

// The session's workspace disk, read-only, or an empty one of the same size.
absl::StatusOr<UniqueFd> OpenWorkspaceDisk(const HostPaths& paths, const LaunchOptions& options) {
  if (!options.workspace_path.empty()) {
    UniqueFd fd(open(options.workspace_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.valid()) return ErrnoStatus("open the workspace disk", options.workspace_path);
    struct stat st;
    if (fstat(fd.get(), &st) != 0) return ErrnoStatus("stat", options.workspace_path);
    if (static_cast<uint64_t>(st.st_size) != kWorkspaceDiskBytes) {
      return absl::DataLossError(
          absl::StrCat("the workspace disk ", options.workspace_path, " has the wrong size"));
    }
    return fd;
  }
  absl::StatusOr<UniqueFd> empty = UnnamedFile(paths.scratch);
  if (!empty.ok()) return empty.status();
  if (ftruncate(empty->get(), kWorkspaceDiskBytes) != 0) return ErrnoStatus("size an empty disk");
  // QEMU opens a read-only drive only from a descriptor opened read-only.
  UniqueFd read_only(
      open(absl::StrCat("/proc/self/fd/", empty->get()).c_str(), O_RDONLY | O_CLOEXEC));
  if (!read_only.valid()) return ErrnoStatus("reopen an empty disk");
  return read_only;
}

// The session's volumes' disks, each read-write or read-only as attached.
absl::StatusOr<std::vector<UniqueFd>> OpenVolumes(const LaunchOptions& options, VmConfig* config) {
  std::vector<UniqueFd> fds;
  for (const LaunchVolume& v : options.volumes) {
    UniqueFd fd(open(v.path.c_str(), (v.read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC));
    if (!fd.valid()) return ErrnoStatus("open the volume disk", v.path);
    struct stat st;
    if (fstat(fd.get(), &st) != 0) return ErrnoStatus("stat", v.path);
    if (static_cast<uint64_t>(st.st_size) != kVolumeDiskBytes) {
      return absl::DataLossError(absl::StrCat("the volume disk ", v.path, " has the wrong size"));
    }
    config->volumes.push_back(
        {.fd = fd.get(), .read_only = v.read_only, .mount_point = v.mount_point});
    fds.push_back(std::move(fd));
  }
  return fds;
}

absl::StatusOr<LaunchedVm> StartAndWait(VmDriver& driver, const HostPaths& paths, VmConfig config,
                                        UniqueFd disk, const LaunchOptions& options) {
  absl::StatusOr<UniqueFd> workspace = OpenWorkspaceDisk(paths, options);
  if (!workspace.ok()) return workspace.status();
  config.workspace_disk_fd = workspace->get();
  config.mount_workspace = !options.workspace_path.empty();
  absl::StatusOr<std::vector<UniqueFd>> volumes = OpenVolumes(options, &config);
  if (!volumes.ok()) return volumes.status();
  absl::Duration timeout = options.boot_timeout;
  config.session_disk_fd = disk.get();
  absl::StatusOr<std::unique_ptr<Vm>> vm = driver.Start(config);
  if (!vm.ok()) return vm.status();
  if (absl::Status s = (*vm)->WaitReady(absl::Now() + timeout); !s.ok()) return s;
  return LaunchedVm{*std::move(vm), std::move(disk)};
}

// A VM of the shape in `options` whose RAM is memory_fd (sized; the VM writes into it), held
// stopped, that loads the state in state_fd (carrying the RAM) or, for -1, waits for one
// (VmConfig::await_state). It never runs the guest: blank disks of the same sizes stand in for
// the session's, which it never touches.
absl::StatusOr<std::unique_ptr<Vm>> StartHeldHelper(VmDriver& driver, const HostPaths& paths,
                                                    const ImageInfo& image, int state_fd,
                                                    int memory_fd, off_t disk_bytes,
                                                    LaunchOptions options, bool prealloc_memory) {
  absl::StatusOr<VmConfig> config = BaseConfig(paths, image, options);
  if (!config.ok()) return config.status();
  config->runtime_dir.clear();
  config->incoming_state_fd = state_fd;
  config->await_state = state_fd < 0;
  config->memory_fd = memory_fd;
  config->memory_shared = true;
  config->prealloc_memory = prealloc_memory;
  config->hold = true;
  absl::StatusOr<UniqueFd> blank = UnnamedFile(paths.scratch);
  if (!blank.ok()) return blank.status();
  if (ftruncate(blank->get(), disk_bytes) != 0) return ErrnoStatus("size a blank disk");
  config->session_disk_fd = blank->get();
  options.workspace_path.clear();
  options.volumes.clear();  // placeholders in their slots
  absl::StatusOr<UniqueFd> workspace = OpenWorkspaceDisk(paths, options);
  if (!workspace.ok()) return workspace.status();
  config->workspace_disk_fd = workspace->get();
  return driver.Start(*config);
}

}  // namespace

absl::StatusOr<LaunchedVm> LaunchVm(VmDriver& driver, const HostPaths& paths,
                                    const ImageInfo& image, const LaunchOptions& options) {
  absl::StatusOr<VmConfig> config = BaseConfig(paths, image, options);
  if (!config.ok()) return config.status();
  absl::StatusOr<UniqueFd> disk = CreateSessionDisk(paths.scratch, options.disk_bytes);
  if (!disk.ok()) return disk.status();
  UniqueFd memory;
  if (options.memory_as_file) {
    memory.reset(memfd_create("airlock-guest-memory", MFD_CLOEXEC | MFD_ALLOW_SEALING));
    if (!memory.valid()) return ErrnoStatus("memfd_create");
    if (ftruncate(memory.get(), off_t{options.memory_mib} << 20) != 0) {
      return ErrnoStatus("size the guest's memory");
    }
    config->memory_fd = memory.get();
    config->memory_shared = true;
  }
  return StartAndWait(driver, paths, *std::move(config), *std::move(disk), options);
}

absl::StatusOr<LaunchedVm> RestoreVm(VmDriver& driver, const HostPaths& paths,
                                     const ImageInfo& image, const SnapshotFiles& files,
                                     const SnapshotManifest& manifest, UniqueFd disk,
                                     const LaunchOptions& options) {
  absl::StatusOr<VmConfig> config = BaseConfig(paths, image, options);
  if (!config.ok()) return config.status();
  if (manifest.image_digest != image.digest) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the snapshot was taken of image ", manifest.image_digest, ", not ", image.digest));
  }
  if (manifest.vcpus != options.vcpus || manifest.memory_bytes != uint64_t{options.memory_mib}
                                                                      << 20) {
    return absl::FailedPreconditionError(
        absl::StrCat("the snapshot is of a VM with ", manifest.vcpus, " vCPUs and ",
                     manifest.memory_bytes >> 20, " MiB; it cannot be restored with other sizes"));
  }
  if (manifest.accelerator != config->accelerator) {
    return absl::FailedPreconditionError(absl::StrCat("the snapshot was taken under ",
                                                      manifest.accelerator, ", this host runs ",
                                                      config->accelerator));
  }
  absl::StatusOr<UniqueFd> state = ReopenFile(files.state.get(), /*writable=*/false);
  if (!state.ok()) return state.status();
  config->incoming_state_fd = state->get();
  if (files.memory) config->memory_fd = files.memory->get();
  config->memory_shared = config->memory_holds_ram = files.memory_own;
  return StartAndWait(driver, paths, *std::move(config), std::move(disk), options);
}

absl::StatusOr<SnapshotMemoryApart> PrepareSnapshotMemoryApart(
    VmDriver& driver, const HostPaths& paths, const ImageInfo& image, const std::string& dir,
    const std::string& work_dir, const std::string& key, LaunchOptions options) {
  SnapshotMemoryApart apart{.dir = work_dir};
  absl::StatusOr<std::string> source =
      ReadFileToString(absl::StrCat(dir, "/", kSnapshotManifestFile), kMaxManifestBytes + 1);
  if (!source.ok()) return source.status();
  apart.source_manifest = *std::move(source);
  SnapshotFiles files;
  absl::StatusOr<SnapshotManifest> manifest = OpenSnapshot(dir, key, &files);
  if (!manifest.ok()) return manifest.status();
  if (files.memory) return absl::NotFoundError("the snapshot keeps its RAM apart already");
  const std::string& tmp = apart.dir;
  if (absl::Status s = RemoveTree(tmp); !s.ok()) return s;
  if (absl::Status s = MakeDirectories(DirName(tmp), 0700); !s.ok()) return s;
  if (mkdir(tmp.c_str(), 0700) != 0) return ErrnoStatus("create", tmp);
  absl::Status written = [&]() -> absl::Status {
    // The RAM file is unnamed while the helper VM (another uid) writes it through its
    // descriptor: the mode lets that uid open it again, and no path leads to it.
    absl::StatusOr<UniqueFd> memory = UnnamedFile(tmp);
    if (!memory.ok()) return memory.status();
    if (fchmod(memory->get(), 0666) != 0) return ErrnoStatus("open the guest's memory file up");
    if (ftruncate(memory->get(), static_cast<off_t>(manifest->memory_bytes)) != 0) {
      return ErrnoStatus("size the guest's memory file");
    }
    std::string state_path = absl::StrCat(tmp, "/", kSnapshotStateFile);
    UniqueFd state(open(state_path.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0600));
    if (!state.valid()) return ErrnoStatus("create", state_path);
    struct stat st;
    if (fstat(files.disk.get(), &st) != 0) return ErrnoStatus("stat the snapshot's disk");
    absl::StatusOr<std::unique_ptr<Vm>> helper =
        StartHeldHelper(driver, paths, image, files.state.get(), memory->get(), st.st_size, options,
                        /*prealloc_memory=*/false);
    if (!helper.ok()) return helper.status();
    if (absl::Status s = (*helper)->SaveState(state.get(), absl::Now() + absl::Seconds(120));
        !s.ok()) {
      return s;
    }
    helper->reset();  // the files are written only by us from here on
    if (fsync(state.get()) != 0) return ErrnoStatus("fsync", state_path);
    if (fsync(memory->get()) != 0) return ErrnoStatus("fsync the guest's memory file");
    if (fchmod(memory->get(), 0600) != 0) return ErrnoStatus("close the guest's memory file");
    for (const auto& [fd, name] : {std::pair{memory->get(), kSnapshotMemoryFile},
                                   std::pair{files.disk.get(), kSnapshotDiskFile}}) {
      if (absl::Status s = LinkOpenFile(fd, absl::StrCat(tmp, "/", name), "link"); !s.ok()) {
        return s;
      }
    }
    SnapshotManifest result = *manifest;
    result.files.clear();
    for (const SnapshotFile& f : manifest->files) {
      // The same inode: not hashed again.
      if (f.name == kSnapshotDiskFile) result.files.push_back(f);
    }
    // The helper QEMU has exited and both files are fsynced: their hashes are remembered, so
    // that the resume does not read them again.
    if (absl::Status s = WriteSignedManifest(tmp, {kSnapshotStateFile, kSnapshotMemoryFile}, key,
                                             &result, /*writers_ended=*/true);
        !s.ok()) {
      return s;
    }
    return SyncDirectory(tmp);
  }();
  if (!written.ok()) {
    LogIfFailed(RemoveTree(tmp), "remove a snapshot whose memory was not set apart");
    return written;
  }
  return apart;
}

absl::StatusOr<ForkHelper> StartForkHelper(VmDriver& driver, const HostPaths& paths,
                                           const ImageInfo& image, uint64_t memory_bytes,
                                           off_t disk_bytes, const LaunchOptions& options) {
  ForkHelper helper;
  helper.memory = std::make_shared<UniqueFd>(
      memfd_create("airlock-fork-memory", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  if (!helper.memory->valid()) return ErrnoStatus("memfd_create");
  if (ftruncate(helper.memory->get(), static_cast<off_t>(memory_bytes)) != 0) {
    return ErrnoStatus("size the guest's memory");
  }
  // Allocated whole as QEMU starts: the load reads each page the state says is zero, and a read
  // of a hole in a shared memfd allocates it a fault at a time; and no hole is left for a fork
  // to be charged for (see FillGuestMemory).
  absl::StatusOr<std::unique_ptr<Vm>> vm =
      StartHeldHelper(driver, paths, image, /*state_fd=*/-1, helper.memory->get(), disk_bytes,
                      options, /*prealloc_memory=*/true);
  if (!vm.ok()) return vm.status();
  helper.vm = *std::move(vm);
  return helper;
}

absl::Status SetForkMemoryApart(ForkHelper helper, SnapshotFiles* files) {
  if (files->memory) return absl::OkStatus();  // apart already
  UniqueFd devices(memfd_create("airlock-fork-state", MFD_CLOEXEC));
  if (!devices.valid()) return ErrnoStatus("memfd_create");
  absl::StatusOr<UniqueFd> state = ReopenFile(files->state.get(), /*writable=*/false);
  if (!state.ok()) return state.status();
  if (absl::Status s = helper.vm->LoadState(state->get(), absl::Now() + absl::Seconds(60));
      !s.ok()) {
    return s;
  }
  if (absl::Status s = helper.vm->SaveState(devices.get(), absl::Now() + absl::Seconds(120));
      !s.ok()) {
    return s;
  }
  helper.vm.reset();
  // The helper has exited: no writable mapping of the memory is left, so it can be sealed.
  if (absl::Status s = SealGuestMemory(helper.memory->get()); !s.ok()) return s;
  if (lseek(devices.get(), 0, SEEK_SET) != 0) return ErrnoStatus("rewind the VM's state");
  files->state = std::move(devices);
  files->memory = std::move(helper.memory);
  return absl::OkStatus();
}

absl::Status CommitSnapshotMemoryApart(const std::string& dir, const SnapshotMemoryApart& apart) {
  absl::Status committed = [&]() -> absl::Status {
    absl::StatusOr<std::string> current =
        ReadFileToString(absl::StrCat(dir, "/", kSnapshotManifestFile), kMaxManifestBytes + 1);
    if (!current.ok() || *current != apart.source_manifest) {
      return absl::FailedPreconditionError("the snapshot changed while its memory was set apart");
    }
    // One step: a crash leaves either snapshot whole under dir.
    if (renameat2(AT_FDCWD, apart.dir.c_str(), AT_FDCWD, dir.c_str(), RENAME_EXCHANGE) != 0) {
      return ErrnoStatus("put in place the snapshot with its memory apart", dir);
    }
    MoveVerifiedFiles(apart.dir, dir);
    return SyncDirectory(DirName(dir));
  }();
  // The old snapshot, or the new one not wanted.
  LogIfFailed(RemoveTree(apart.dir), "remove a snapshot set aside");
  return committed;
}

}  // namespace airlock
