// Files of a session's guest through the API (Sessions.WriteFile/ReadFile and their streams):
// any size, piece by piece, each operation audited. The gRPC handlers only move messages.
#ifndef AIRLOCK_DAEMON_SESSION_FILES_H_
#define AIRLOCK_DAEMON_SESSION_FILES_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "src/daemon/session_manager.h"
#include "src/daemon/state_store.h"

namespace airlock {

// One piece of a file, at most this much, in either direction.
inline constexpr size_t kMaxFilePiece = 1 << 20;
// How long the guest may take to accept or produce one piece.
inline constexpr absl::Duration kFilePieceTimeout = absl::Seconds(60);

class SessionFiles {
 public:
  SessionFiles(SessionManager* sessions, StateStore* store) : sessions_(sessions), store_(store) {}

  // The content of a write, piece by piece: fills the next piece (empty is fine) and says
  // whether it is the last; an error ends the write, and the file stays as it was.
  using Pieces = std::function<absl::Status(std::string* piece, bool* last)>;
  // Creates or replaces an absolute path in the session's guest with mode (permission bits;
  // 0: 0644) once the last piece is in; returns the bytes written.
  [[nodiscard]] absl::StatusOr<uint64_t> Write(const Principal& who, const std::string& session_id,
                                               const std::string& path, uint32_t mode,
                                               const Pieces& next);

  // Receives the pieces of a read in order; an error stops the read.
  using Sink = std::function<absl::Status(std::string piece)>;
  // Reads an absolute path of the session's guest into sink; OUT_OF_RANGE once it is larger
  // than max_bytes (0: no limit). Returns the bytes read.
  [[nodiscard]] absl::StatusOr<uint64_t> Read(const Principal& who, const std::string& session_id,
                                              const std::string& path, uint64_t max_bytes,
                                              const Sink& sink);

 private:
  void Audit(const Principal& who, const std::string& action, const std::string& session_id,
             const std::string& path, const absl::StatusOr<uint64_t>& result);
  SessionManager* sessions_;
  StateStore* store_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_SESSION_FILES_H_
