// The messages of a client-streaming upload call (WriteFileStream, Images.Import,
// Volumes.Import) after its first: each as it comes, or why none will (the client went silent,
// cancelled, or half-closed before the message that ends the upload).
#ifndef AIRLOCK_DAEMON_UPLOAD_MESSAGES_H_
#define AIRLOCK_DAEMON_UPLOAD_MESSAGES_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace airlock {

// A file stream whose client sends nothing for this long is cancelled: it holds the session in
// use (no idle pause) and a file open in the guest.
constexpr absl::Duration kFileStreamIdle = absl::Seconds(60);

// Cancels a call whose client stays silent for longer than `limit` between Touch()es.
class CancelWhenSilent {
 public:
  CancelWhenSilent(grpc::ServerContext* context, absl::Duration limit)
      : thread_([this, context, limit] {
          absl::MutexLock lock(&mu_);
          while (!done_) {
            uint64_t seen = touches_;
            absl::Time until = absl::Now() + limit;
            while (!done_ && touches_ == seen && !cv_.WaitWithDeadline(&mu_, until)) {
            }
            if (!done_ && touches_ == seen) {
              fired_ = true;
              context->TryCancel();
              return;
            }
          }
        }) {}
  ~CancelWhenSilent() {
    {
      absl::MutexLock lock(&mu_);
      done_ = true;
    }
    cv_.SignalAll();
    thread_.join();
  }
  void Touch() {
    {
      absl::MutexLock lock(&mu_);
      ++touches_;
    }
    cv_.SignalAll();
  }
  bool fired() {
    absl::MutexLock lock(&mu_);
    return fired_;
  }

 private:
  absl::Mutex mu_;
  absl::CondVar cv_;
  uint64_t touches_ ABSL_GUARDED_BY(mu_) = 0;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  bool fired_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the members above exist
};

// The messages after the first of an upload call (WriteFileStream, Images.Import, Volumes.Import):
// the next one, or why there is none: the client went silent for kFileStreamIdle (the call is
// cancelled then), cancelled, or half-closed before a message with `last`. `left` says what
// airlockd did with what came.
template <typename Chunk>
class UploadMessages {
 public:
  UploadMessages(grpc::ServerContext* context, grpc::ServerReader<Chunk>* reader, std::string left)
      : context_(context),
        reader_(reader),
        left_(std::move(left)),
        silence_(context, kFileStreamIdle) {}
  absl::Status Next(Chunk* chunk) {
    if (reader_->Read(chunk)) {
      silence_.Touch();
      return absl::OkStatus();
    }
    if (silence_.fired()) {
      return absl::DeadlineExceededError(
          absl::StrCat("nothing came for ", absl::FormatDuration(kFileStreamIdle), "; ", left_));
    }
    if (context_->IsCancelled()) return absl::CancelledError("the client cancelled; " + left_);
    return absl::InvalidArgumentError("the stream ended before a message with last set; " + left_);
  }

 private:
  grpc::ServerContext* context_;
  grpc::ServerReader<Chunk>* reader_;
  std::string left_;
  CancelWhenSilent silence_;
};

}  // namespace airlock

#endif  // AIRLOCK_DAEMON_UPLOAD_MESSAGES_H_
