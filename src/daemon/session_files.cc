#include "src/daemon/session_files.h"

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "src/common/log.h"
#include "src/vm/guest_channel.h"

namespace airlock {

namespace {

// INVALID_ARGUMENT unless path is an absolute path a guest can have.
absl::Status ValidateGuestPath(const std::string& path) {
  if (path.empty() || path[0] != '/' || path.size() > 4096 ||
      path.find('\0') != std::string::npos) {
    return absl::InvalidArgumentError("give an absolute path in the guest, like /root/data.txt");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<uint64_t> SessionFiles::Write(const Principal& who, const std::string& session_id,
                                             const std::string& path, uint32_t mode,
                                             const Pieces& next, const FileMetadata& metadata) {
  if (absl::Status s = ValidateGuestPath(path); !s.ok()) return s;
  if (mode > 07777) {
    return absl::InvalidArgumentError("a file's mode is its permission bits, like 0644 or 0755");
  }
  absl::StatusOr<std::shared_ptr<LiveSession>> live = sessions_->Live(who, session_id);
  if (!live.ok()) return live.status();
  absl::StatusOr<uint64_t> result = [&]() -> absl::StatusOr<uint64_t> {
    absl::StatusOr<std::unique_ptr<GuestFileWrite>> file =
        (*live)->vm->channel().StartFileWrite(path, mode == 0 ? 0644 : mode, metadata);
    if (!file.ok()) return file.status();
    uint64_t bytes = 0;
    for (;;) {
      std::string piece;
      bool last = false;
      if (absl::Status s = next(&piece, &last); !s.ok()) return s;  // the file is let go
      if (piece.size() > kMaxFilePiece) {
        return absl::InvalidArgumentError(
            "a piece of a file is at most 1 MiB; send the content in more messages");
      }
      if (!piece.empty()) {
        absl::Status sent = (*file)->Write(piece, absl::Now() + kFilePieceTimeout);
        if (!sent.ok()) return sent;
        bytes += piece.size();
      }
      if (last) {
        absl::Status done = (*file)->Finish(absl::Now() + kFilePieceTimeout);
        if (!done.ok()) return done;
        return bytes;
      }
    }
  }();
  Audit(who, "file.write", session_id, path, result);
  return result;
}

absl::StatusOr<uint64_t> SessionFiles::Read(const Principal& who, const std::string& session_id,
                                            const std::string& path, uint64_t max_bytes,
                                            const Sink& sink) {
  if (absl::Status s = ValidateGuestPath(path); !s.ok()) return s;
  absl::StatusOr<std::shared_ptr<LiveSession>> live = sessions_->Live(who, session_id);
  if (!live.ok()) return live.status();
  absl::StatusOr<uint64_t> result = [&]() -> absl::StatusOr<uint64_t> {
    absl::StatusOr<std::unique_ptr<GuestFileRead>> file =
        (*live)->vm->channel().StartFileRead(path);
    if (!file.ok()) return file.status();
    uint64_t bytes = 0;
    for (;;) {
      absl::StatusOr<std::string> piece = (*file)->Next(absl::Now() + kFilePieceTimeout);
      if (!piece.ok()) return piece.status();
      if (piece->empty()) return bytes;
      bytes += piece->size();
      if (max_bytes != 0 && bytes > max_bytes) {
        return absl::OutOfRangeError(
            absl::StrCat(path, " in the guest is larger than ", max_bytes, " bytes"));
      }
      if (absl::Status s = sink(*std::move(piece)); !s.ok()) return s;  // the read is let go
    }
  }();
  Audit(who, "file.read", session_id, path, result);
  return result;
}

namespace {

const char* ActionOf(FsOp op) {
  switch (op) {
    case FsOp::kStat:
      return "file.stat";
    case FsOp::kList:
      return "file.list";
    case FsOp::kMakeDir:
      return "file.mkdir";
    case FsOp::kMove:
      return "file.move";
    case FsOp::kRemove:
      return "file.remove";
    case FsOp::kSetAttributes:
      return "file.chmod";
  }
  return "file.op";
}

}  // namespace

absl::StatusOr<std::vector<FsEntry>> SessionFiles::Operate(const Principal& who,
                                                           const std::string& session_id,
                                                           const FsRequestMessage& request) {
  if (absl::Status s = ValidateGuestPath(request.path); !s.ok()) return s;
  if (request.op == FsOp::kMove) {
    if (absl::Status s = ValidateGuestPath(request.target); !s.ok()) return s;
  }
  absl::StatusOr<std::shared_ptr<LiveSession>> live = sessions_->Live(who, session_id);
  if (!live.ok()) return live.status();
  absl::StatusOr<std::vector<FsEntry>> entries =
      (*live)->vm->channel().FsRequest(request, absl::Now() + kOperationTimeout);
  std::string what = request.op == FsOp::kMove
                         ? absl::StrCat(request.path.substr(0, 512), " -> ", request.target)
                         : request.path;
  absl::StatusOr<uint64_t> count =
      entries.ok() ? absl::StatusOr<uint64_t>(entries->size()) : entries.status();
  LogIfFailed(
      store_->audit().Audit(who, who.Tenant(), ActionOf(request.op), session_id,
                            absl::StrCat(what.substr(0, 1100), ": ",
                                         count.ok() ? absl::StrCat(*count, " entries")
                                                    : std::string(count.status().message()))),
      absl::StrCat("session ", session_id, ": ", ActionOf(request.op), " not audited"));
  return entries;
}

absl::StatusOr<std::unique_ptr<SessionWatch>> SessionFiles::Watch(const Principal& who,
                                                                  const std::string& session_id,
                                                                  const WatchDirMessage& request) {
  if (absl::Status s = ValidateGuestPath(request.path); !s.ok()) return s;
  absl::StatusOr<std::shared_ptr<LiveSession>> live = sessions_->Live(who, session_id);
  if (!live.ok()) return live.status();
  absl::StatusOr<std::unique_ptr<GuestWatch>> watch = (*live)->vm->channel().StartWatch(request);
  LogIfFailed(
      store_->audit().Audit(who, who.Tenant(), "file.watch", session_id,
                            absl::StrCat(request.path.substr(0, 512), ": ",
                                         watch.ok() ? "watching" : watch.status().message())),
      absl::StrCat("session ", session_id, ": file.watch not audited"));
  if (!watch.ok()) return watch.status();
  return std::make_unique<SessionWatch>(*std::move(live), *std::move(watch));
}

void SessionFiles::Audit(const Principal& who, const std::string& action,
                         const std::string& session_id, const std::string& path,
                         const absl::StatusOr<uint64_t>& result) {
  LogIfFailed(
      store_->audit().Audit(who, who.Tenant(), action, session_id,
                            absl::StrCat(path.substr(0, 512), ": ",
                                         result.ok() ? absl::StrCat(*result, " bytes")
                                                     : std::string(result.status().message()))),
      absl::StrCat("session ", session_id, ": ", action, " not audited"));
}

}  // namespace airlock
