// A client for QEMU's machine protocol (QMP) over a connected Unix socket.
//
// QEMU runs guest-influenced code, so its replies are bounded: a line longer than kMaxLine or a
// reply that is not JSON fails the call. Asynchronous events are skipped. Not thread-safe: one
// owner issues commands.
#ifndef AIRLOCK_VM_QMP_CLIENT_H_
#define AIRLOCK_VM_QMP_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "src/common/unique_fd.h"

namespace airlock {

class QmpClient {
 public:
  static constexpr size_t kMaxLine = 1 << 20;

  // Reads the greeting and negotiates capabilities.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<QmpClient>> Connect(UniqueFd fd,
                                                                          absl::Time deadline);

  // Runs a command; returns its "return" value, or the QMP error as a status.
  [[nodiscard]] absl::StatusOr<nlohmann::json> Execute(const std::string& command,
                                                       const nlohmann::json& arguments,
                                                       absl::Time deadline);

  // Hands a descriptor to QEMU under a name (QMP getfd, the descriptor travels with the command
  // as SCM_RIGHTS), for a later "fd:NAME" migration URI.
  [[nodiscard]] absl::Status PassFd(const std::string& name, int fd, absl::Time deadline);

  // The QEMU version from the greeting, e.g. "7.2.22".
  const std::string& version() const { return version_; }

 private:
  explicit QmpClient(UniqueFd fd) : fd_(std::move(fd)) {}
  absl::StatusOr<nlohmann::json> ReadMessage(absl::Time deadline);
  absl::Status WriteAll(const std::string& data, absl::Time deadline);
  absl::StatusOr<nlohmann::json> ReadReply(const std::string& command, absl::Time deadline);

  UniqueFd fd_;
  std::string buffer_;
  std::string version_;
};

}  // namespace airlock

#endif  // AIRLOCK_VM_QMP_CLIENT_H_
