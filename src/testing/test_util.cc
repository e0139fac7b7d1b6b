#include "src/testing/test_util.h"

#include <archive.h>
#include <archive_entry.h>
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "src/common/file_util.h"
#include "src/common/subprocess.h"

namespace airlock::testing {

UniqueFd ConnectLoopback(uint16_t port) {
  UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in to = {};
  to.sin_family = AF_INET;
  to.sin_port = htons(port);
  to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  timeval limit = {60, 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof(to)) != 0) {
    ADD_FAILURE() << "connect to 127.0.0.1:" << port << ": " << strerror(errno);
    return UniqueFd();
  }
  return fd;
}

TempDir::TempDir() {
  char tmpl[] = "/tmp/airlock-test-XXXXXX";
  path_ = mkdtemp(tmpl);
}

TempDir::~TempDir() { RemoveTree(path_).IgnoreError(); }

void WriteTar(const std::string& path, const std::vector<TarEntry>& entries,
              Compression compression) {
  archive* a = archive_write_new();
  archive_write_set_format_pax(a);
  if (compression == Compression::kGzip) {
    ASSERT_EQ(archive_write_add_filter_gzip(a), ARCHIVE_OK);
  }
  if (compression == Compression::kZstd) {
    ASSERT_EQ(archive_write_add_filter_zstd(a), ARCHIVE_OK);
  }
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
  for (const TarEntry& e : entries) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, e.name.c_str());
    archive_entry_set_perm(entry, e.mode);
    archive_entry_set_mtime(entry, 1700000000, 0);
    if (e.hardlink) {
      archive_entry_set_filetype(entry, AE_IFREG);
      archive_entry_set_hardlink(entry, e.data.c_str());
      archive_entry_set_size(entry, 0);
    } else {
      archive_entry_set_filetype(entry, e.type);
      if (e.type == S_IFLNK) archive_entry_set_symlink(entry, e.data.c_str());
      if (e.type == S_IFCHR) archive_entry_set_rdev(entry, makedev(1, 3));
      archive_entry_set_size(entry, e.type == S_IFREG ? (e.size >= 0 ? e.size : e.data.size()) : 0);
    }
    for (const auto& [name, value] : e.xattrs) {
      archive_entry_xattr_add_entry(entry, name.c_str(), value.data(), value.size());
    }
    archive_write_header(a, entry);
    if (e.type == S_IFREG && !e.hardlink) archive_write_data(a, e.data.data(), e.data.size());
    archive_entry_free(entry);
  }
  archive_write_close(a);
  archive_write_free(a);
}

std::string Debugfs(const std::string& image, const std::string& command) {
  absl::StatusOr<ProcessResult> r = RunProcess({"/sbin/debugfs", "-R", command, image});
  if (!r.ok()) return "";
  // debugfs prints its banner first; drop it.
  std::string out = r->output;
  size_t banner = out.find("debugfs 1.");
  if (banner == 0) out.erase(0, out.find('\n') + 1);
  return out;
}

int Fsck(const std::string& image, std::string* output) {
  absl::StatusOr<ProcessResult> r = RunProcess({"/sbin/e2fsck", "-fn", image});
  if (!r.ok()) return -1;
  *output = r->output;
  return r->exit_code;
}

pid_t StartLogged(const std::vector<std::string>& argv, const std::string& log, char* const* env) {
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  for (std::string& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t parent = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    int in = open("/dev/null", O_RDONLY);
    int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
    dup2(in, 0);
    dup2(out, 1);
    dup2(out, 2);
    if (env != nullptr) {
      execve(args[0], args.data(), env);
    } else {
      execv(args[0], args.data());
    }
    _exit(127);
  }
  return pid;
}

}  // namespace airlock::testing
