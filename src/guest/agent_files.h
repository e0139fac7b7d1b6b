// The guest's files as the host asks about them beyond reading and writing one file: stat,
// list, make a directory, move, remove (kFsRequest), and watching a directory (kWatchDir,
// inotify). Runs in the agent as root; standard library and Linux calls only, so the host's
// unit tests run it too, on a directory of their own.
//
// Symbolic links are never followed below the path asked for: a listing does not descend
// through them, a removal removes the link, and an entry describes the link itself.
#ifndef AIRLOCK_GUEST_AGENT_FILES_H_
#define AIRLOCK_GUEST_AGENT_FILES_H_

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>

#include "src/common/channel_messages.h"

namespace airlock::guest {

// The text of the guest's /etc/passwd and /etc/group: owners' names, and who `user` is.
struct GuestAccounts {
  std::string passwd;
  std::string group;
};

// What an operation ended with: 0, or an errno and what to tell the host.
struct FsResult {
  int error = 0;
  std::string message;
};

// The name a file write starts under, beside the file it becomes ("." NAME ".airlock-" and six
// characters mkstemp fills in): watches leave these out and report the rename that completes a
// write as the file's creation and a write.
std::string WriteTempName(const std::string& name);
bool IsWriteTempName(const std::string& name);

// Does one kFsRequest and appends its answer (encoded FsEntry records) to *answer.
FsResult DoFsRequest(const FsRequestMessage& request, const GuestAccounts& accounts,
                     std::string* answer);

// One kWatchDir: an inotify instance on a directory (and, recursive, on every directory below
// it, new ones as they come, at most kMaxWatchedDirs).
class DirWatch {
 public:
  static constexpr size_t kMaxWatchedDirs = 4096;

  // Watches request.path; nullptr with *result saying why (ENOENT, ENOTDIR, ENOSPC: too many
  // directories below it).
  static std::unique_ptr<DirWatch> Start(const WatchDirMessage& request,
                                         const GuestAccounts& accounts, FsResult* result);
  ~DirWatch();
  DirWatch(const DirWatch&) = delete;
  DirWatch& operator=(const DirWatch&) = delete;

  // Readable when the kernel has news (non-blocking).
  int fd() const { return fd_; }

  // Turns what the kernel reported into encoded WatchRecords appended to *records. Returns
  // false when the watch is over: *result is 0 once the directory itself was removed or moved,
  // EOVERFLOW if the kernel dropped events.
  bool Read(std::deque<std::string>* records, FsResult* result);

 private:
  DirWatch() = default;
  // Watches dir (relative to the root; "" is the root) and, when recursive, what is below it.
  // False with *result when the cap is reached or the kernel refuses.
  bool Add(const std::string& relative, FsResult* result);

  int fd_ = -1;
  std::string root_;  // the directory watched, absolute and clean
  bool recursive_ = false;
  bool include_entry_ = false;
  int root_wd_ = -1;
  uint32_t write_cookie_ = 0;        // of the last rename away from a write's temporary name
  std::map<int, std::string> dirs_;  // watch descriptor -> directory relative to the root
  std::map<uint32_t, std::string> users_, groups_;
};

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_AGENT_FILES_H_
