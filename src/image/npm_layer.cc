#include "src/image/npm_layer.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>

#include "absl/strings/str_cat.h"
#include "src/common/file_util.h"
#include "src/common/subprocess.h"
#include "src/image/npm_spec.h"

namespace airlock {
namespace {

struct ReadDiskCloser {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct WriteCloser {
  void operator()(archive* a) const { archive_write_free(a); }
};

}  // namespace

absl::Status TarDirectory(const std::string& dir, const std::string& prefix,
                          const std::string& out_tar) {
  std::unique_ptr<archive, ReadDiskCloser> disk(archive_read_disk_new());
  std::unique_ptr<archive, WriteCloser> out(archive_write_new());
  if (disk == nullptr || out == nullptr) return absl::ResourceExhaustedError("libarchive");
  archive_read_disk_set_symlink_physical(disk.get());
  archive_read_disk_set_behavior(disk.get(),
                                 ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS | ARCHIVE_READDISK_NO_XATTR |
                                     ARCHIVE_READDISK_NO_ACL | ARCHIVE_READDISK_NO_FFLAGS);
  archive_write_set_format_pax_restricted(out.get());
  if (archive_write_open_filename(out.get(), out_tar.c_str()) != ARCHIVE_OK) {
    return absl::UnavailableError(
        absl::StrCat("write ", out_tar, ": ", archive_error_string(out.get())));
  }
  if (archive_read_disk_open(disk.get(), dir.c_str()) != ARCHIVE_OK) {
    return absl::UnavailableError(
        absl::StrCat("read ", dir, ": ", archive_error_string(disk.get())));
  }
  archive_entry* entry = archive_entry_new();
  absl::Status failure;
  std::string buf(1 << 16, '\0');
  for (;;) {
    int r = archive_read_next_header2(disk.get(), entry);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      failure = absl::UnavailableError(
          absl::StrCat("read ", dir, ": ", archive_error_string(disk.get())));
      break;
    }
    std::string full = archive_entry_pathname(entry);
    if (archive_entry_filetype(entry) == AE_IFDIR && archive_read_disk_can_descend(disk.get())) {
      archive_read_disk_descend(disk.get());
    }
    std::string rel = full == dir ? "" : full.substr(dir.size() + 1);
    archive_entry_set_pathname(
        entry, rel.empty() ? prefix.c_str() : absl::StrCat(prefix, "/", rel).c_str());
    archive_entry_set_uid(entry, 0);
    archive_entry_set_gid(entry, 0);
    archive_entry_set_uname(entry, "root");
    archive_entry_set_gname(entry, "root");
    if (archive_write_header(out.get(), entry) != ARCHIVE_OK) {
      failure = absl::UnavailableError(
          absl::StrCat("write ", out_tar, ": ", archive_error_string(out.get())));
      break;
    }
    if (archive_entry_filetype(entry) != AE_IFREG || archive_entry_size(entry) == 0) continue;
    int fd = open(full.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
      failure = absl::UnavailableError(absl::StrCat("open ", full));
      break;
    }
    ssize_t n;
    while ((n = read(fd, buf.data(), buf.size())) > 0) {
      if (archive_write_data(out.get(), buf.data(), static_cast<size_t>(n)) != n) {
        n = -1;
        break;
      }
    }
    close(fd);
    if (n < 0) {
      failure = absl::UnavailableError(absl::StrCat("copy ", full, " into ", out_tar));
      break;
    }
  }
  archive_entry_free(entry);
  if (archive_write_close(out.get()) != ARCHIVE_OK && failure.ok()) {
    failure = absl::UnavailableError(absl::StrCat("write ", out_tar));
  }
  return failure;
}

absl::Status FetchNpmLayer(const std::vector<std::string>& specs, const std::string& cache_dir,
                           const std::string& out_tar, const NpmFetchOptions& fetch) {
  for (const std::string& spec : specs) {
    if (absl::Status s = ValidateNpmSpec(spec); !s.ok()) return s;
  }
  const char* path_env = std::getenv("PATH");
  std::string npm = FindInPath("npm", path_env ? path_env : "/usr/local/bin:/usr/bin:/bin");
  if (npm.empty()) {
    return absl::FailedPreconditionError(
        "--npm needs npm on this host to fetch the packages (apt-get install npm)");
  }
  if (absl::Status s = MakeDirectories(cache_dir + "/npm-cache", 0700); !s.ok()) return s;
  std::string scratch = absl::StrCat(cache_dir, "/npm-build-XXXXXX");
  if (mkdtemp(scratch.data()) == nullptr) {
    return absl::UnavailableError(absl::StrCat("mkdtemp in ", cache_dir));
  }
  struct Cleanup {
    std::string path;
    ~Cleanup() { RemoveTree(path).IgnoreError(); }
  } cleanup{scratch};
  std::string prefix = scratch + "/usr/local";
  if (absl::Status s = MakeDirectories(prefix, 0755); !s.ok()) return s;
  // npm itself is the host's; no package's scripts run (they run in a build VM later).
  std::vector<std::string> argv = {npm,
                                   "install",
                                   "--global",
                                   "--prefix",
                                   prefix,
                                   "--ignore-scripts",
                                   "--no-audit",
                                   "--no-fund",
                                   "--no-update-notifier",
                                   "--cache",
                                   cache_dir + "/npm-cache",
                                   "--os=linux",
                                   "--cpu=x64",
                                   "--"};
  argv.insert(argv.end(), specs.begin(), specs.end());
  ProcessOptions options;
  if (fetch.own_settings) {
    // npm runs as the user would run it: their settings (a registry mirror, credentials in
    // ~/.npmrc, proxies, NODE_EXTRA_CA_CERTS) all apply.
    for (char** e = environ; *e != nullptr; ++e) options.env.push_back(*e);
  } else {
    // The site's network settings only; an empty home, so no ~/.npmrc and no one's login.
    std::string home = scratch + "/home";
    if (absl::Status s = MakeDirectories(home, 0700); !s.ok()) return s;
    options.env = {"HOME=" + home, "LC_ALL=C",
                   absl::StrCat("PATH=", path_env ? path_env : "/usr/local/bin:/usr/bin:/bin")};
    for (const char* name : {"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy",
                             "no_proxy", "NODE_EXTRA_CA_CERTS"}) {
      if (const char* value = std::getenv(name); value != nullptr) {
        options.env.push_back(absl::StrCat(name, "=", value));
      }
    }
  }
  options.timeout = absl::Minutes(30);
  options.max_output = 64 << 10;
  options.cancelled = fetch.cancelled;
  absl::StatusOr<ProcessResult> r = RunProcess(argv, options);
  if (!r.ok()) return r.status();
  if (r->cancelled) return absl::CancelledError("npm was stopped: the build was cancelled");
  if (r->exit_code != 0) {
    std::string out = r->output;
    return absl::UnavailableError(
        absl::StrCat("npm install failed (exit ", r->exit_code, "):\n",
                     out.substr(out.size() > 4000 ? out.size() - 4000 : 0)));
  }
  std::string tmp = out_tar + ".tmp";
  if (absl::Status s = TarDirectory(prefix, "usr/local", tmp); !s.ok()) {
    unlink(tmp.c_str());
    return s;
  }
  return CommitFile(tmp, out_tar);
}

}  // namespace airlock
