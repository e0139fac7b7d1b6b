// Files of a session's guest through the API (Sessions.WriteFile/ReadFile and their streams):
// any size, piece by piece; and the rest of what E2B's envd does with files (stat, list, make
// a directory, move, remove, watch). Each operation is audited. The handlers only move
// messages.
#ifndef AIRLOCK_DAEMON_SESSION_FILES_H_
#define AIRLOCK_DAEMON_SESSION_FILES_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/state_store.h"
#include "src/vm/guest_channel.h"

namespace airlock {

// One piece of a file, at most this much, in either direction.
inline constexpr size_t kMaxFilePiece = 1 << 20;
// How long the guest may take to accept or produce one piece.
inline constexpr absl::Duration kFilePieceTimeout = absl::Seconds(60);

// A watch of a directory of a session's guest. The session is in use while it lasts (it is
// not paused, and not idle); destroying it ends the watch, then the use.
class SessionWatch {
 public:
  SessionWatch(std::shared_ptr<LiveSession> session, std::unique_ptr<GuestWatch> guest)
      : session_(std::move(session)), guest_(std::move(guest)) {}
  // See GuestWatch::Next.
  [[nodiscard]] absl::StatusOr<std::vector<WatchRecord>> Next(absl::Time deadline) {
    return guest_->Next(deadline);
  }

 private:
  std::shared_ptr<LiveSession> session_;  // declared first: released after the watch ends
  std::unique_ptr<GuestWatch> guest_;
};

class SessionFiles {
 public:
  SessionFiles(SessionManager* sessions, StateStore* store) : sessions_(sessions), store_(store) {}

  // The content of a write, piece by piece: fills the next piece (empty is fine) and says
  // whether it is the last; an error ends the write, and the file stays as it was.
  using Pieces = std::function<absl::Status(std::string* piece, bool* last)>;
  // Creates or replaces an absolute path in the session's guest with mode (permission bits;
  // 0: 0644) and metadata (E2B's, as user.e2b.* attributes) once the last piece is in; returns
  // the bytes written.
  [[nodiscard]] absl::StatusOr<uint64_t> Write(const Principal& who, const std::string& session_id,
                                               const std::string& path, uint32_t mode,
                                               const Pieces& next,
                                               const FileMetadata& metadata = {});

  // Receives the pieces of a read in order; an error stops the read.
  using Sink = std::function<absl::Status(std::string piece)>;
  // Reads an absolute path of the session's guest into sink; OUT_OF_RANGE once it is larger
  // than max_bytes (0: no limit). Returns the bytes read.
  [[nodiscard]] absl::StatusOr<uint64_t> Read(const Principal& who, const std::string& session_id,
                                              const std::string& path, uint64_t max_bytes,
                                              const Sink& sink);

  // How long one operation on files (a listing, a removal) may take in the guest.
  static constexpr absl::Duration kOperationTimeout = absl::Seconds(60);

  // One operation on the session's files (FsRequestMessage: stat, list, mkdir, move, remove,
  // with absolute paths): the entries the guest answers. The guest's errno is the status's
  // code (NOT_FOUND, ALREADY_EXISTS, FAILED_PRECONDITION for a directory expected, ...).
  [[nodiscard]] absl::StatusOr<std::vector<FsEntry>> Operate(const Principal& who,
                                                             const std::string& session_id,
                                                             const FsRequestMessage& request);

  // Starts watching a directory of the session's guest (an absolute path).
  [[nodiscard]] absl::StatusOr<std::unique_ptr<SessionWatch>> Watch(const Principal& who,
                                                                    const std::string& session_id,
                                                                    const WatchDirMessage& request);

 private:
  void Audit(const Principal& who, const std::string& action, const std::string& session_id,
             const std::string& path, const absl::StatusOr<uint64_t>& result);
  SessionManager* sessions_;
  StateStore* store_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_SESSION_FILES_H_
