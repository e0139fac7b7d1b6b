#include "src/vm/qmp_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "src/common/errno_status.h"

namespace airlock {
namespace {

absl::Status WaitFor(int fd, short events, absl::Time deadline) {
  for (;;) {
    absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) return absl::DeadlineExceededError("QEMU did not answer");
    pollfd p = {fd, events, 0};
    int r =
        poll(&p, 1, static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1000)));
    if (r > 0) return absl::OkStatus();
    if (r < 0 && errno != EINTR) return ErrnoStatus("poll QMP");
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<QmpClient>> QmpClient::Connect(UniqueFd fd, absl::Time deadline) {
  fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
  std::unique_ptr<QmpClient> client(new QmpClient(std::move(fd)));
  absl::StatusOr<nlohmann::json> greeting = client->ReadMessage(deadline);
  if (!greeting.ok()) return greeting.status();
  if (!greeting->contains("QMP")) return absl::DataLossError("QEMU sent no QMP greeting");
  const nlohmann::json& v = (*greeting)["QMP"]["version"]["qemu"];
  if (v.is_object()) {
    client->version_ =
        absl::StrCat(v.value("major", 0), ".", v.value("minor", 0), ".", v.value("micro", 0));
  }
  absl::StatusOr<nlohmann::json> caps =
      client->Execute("qmp_capabilities", nlohmann::json::object(), deadline);
  if (!caps.ok()) return caps.status();
  return client;
}

absl::Status QmpClient::WriteAll(const std::string& data, absl::Time deadline) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = send(fd_.get(), data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
    } else if (n < 0 && errno == EAGAIN) {
      if (absl::Status s = WaitFor(fd_.get(), POLLOUT, deadline); !s.ok()) return s;
    } else if (n < 0 && errno != EINTR) {
      return ErrnoStatus("write to QMP");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<nlohmann::json> QmpClient::ReadMessage(absl::Time deadline) {
  for (;;) {
    size_t newline = buffer_.find('\n');
    if (newline != std::string::npos) {
      std::string line = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      nlohmann::json message = nlohmann::json::parse(line, nullptr, false);
      if (!message.is_object()) return absl::DataLossError("QEMU sent a malformed QMP message");
      return message;
    }
    if (buffer_.size() > kMaxLine) return absl::DataLossError("QEMU sent an oversized QMP line");
    if (absl::Status s = WaitFor(fd_.get(), POLLIN, deadline); !s.ok()) return s;
    char buf[65536];
    ssize_t n = read(fd_.get(), buf, sizeof(buf));
    if (n == 0) return absl::UnavailableError("QEMU closed its QMP socket (did it exit?)");
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n < 0) return ErrnoStatus("read QMP");
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

absl::StatusOr<nlohmann::json> QmpClient::Execute(const std::string& command,
                                                  const nlohmann::json& arguments,
                                                  absl::Time deadline) {
  nlohmann::json request = {{"execute", command}};
  if (!arguments.empty()) request["arguments"] = arguments;
  if (absl::Status s = WriteAll(request.dump() + "\n", deadline); !s.ok()) return s;
  for (;;) {
    absl::StatusOr<nlohmann::json> message = ReadMessage(deadline);
    if (!message.ok()) return message.status();
    if (message->contains("event")) continue;
    if (message->contains("return")) return (*message)["return"];
    if (message->contains("error")) {
      const nlohmann::json& error = (*message)["error"];
      std::string desc = error.is_object() ? error.value("desc", std::string("unknown error")) : "";
      return absl::InternalError(absl::StrCat("QMP ", command, ": ", desc));
    }
    return absl::DataLossError("QEMU sent an unexpected QMP message");
  }
}

}  // namespace airlock
