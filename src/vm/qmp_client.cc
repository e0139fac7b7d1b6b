#include "src/vm/qmp_client.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
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

// The member `key` of an object, or null: never throws, whatever shape QEMU sent.
const nlohmann::json* Member(const nlohmann::json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

int64_t IntMember(const nlohmann::json* j, const char* key) {
  const nlohmann::json* v = j ? Member(*j, key) : nullptr;
  return v && v->is_number_integer() ? v->get<int64_t>() : 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<QmpClient>> QmpClient::Connect(UniqueFd fd, absl::Time deadline) {
  fcntl(fd.get(), F_SETFL, fcntl(fd.get(), F_GETFL) | O_NONBLOCK);
  std::unique_ptr<QmpClient> client(new QmpClient(std::move(fd)));
  absl::StatusOr<nlohmann::json> greeting = client->ReadMessage(deadline);
  if (!greeting.ok()) return greeting.status();
  const nlohmann::json* qmp = Member(*greeting, "QMP");
  if (qmp == nullptr) return absl::DataLossError("QEMU sent no QMP greeting");
  const nlohmann::json* version = Member(*qmp, "version");
  const nlohmann::json* qemu = version ? Member(*version, "qemu") : nullptr;
  client->version_ = absl::StrCat(IntMember(qemu, "major"), ".", IntMember(qemu, "minor"), ".",
                                  IntMember(qemu, "micro"));
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
  return ReadReply(command, deadline);
}

absl::Status QmpClient::PassFd(const std::string& name, int fd, absl::Time deadline) {
  nlohmann::json request = {{"execute", "getfd"}, {"arguments", {{"fdname", name}}}};
  std::string text = request.dump() + "\n";
  // The descriptor rides on the first byte; the rest of the line follows as usual.
  iovec iov = {text.data(), 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg = {};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
  cmsg->cmsg_level = SOL_SOCKET;
  cmsg->cmsg_type = SCM_RIGHTS;
  cmsg->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
  for (;;) {
    ssize_t n = sendmsg(fd_.get(), &msg, MSG_NOSIGNAL);
    if (n == 1) break;
    if (n < 0 && errno == EAGAIN) {
      if (absl::Status s = WaitFor(fd_.get(), POLLOUT, deadline); !s.ok()) return s;
    } else if (n < 0 && errno != EINTR) {
      return ErrnoStatus("pass a descriptor to QEMU");
    }
  }
  if (absl::Status s = WriteAll(text.substr(1), deadline); !s.ok()) return s;
  return ReadReply("getfd", deadline).status();
}

absl::StatusOr<nlohmann::json> QmpClient::ReadReply(const std::string& command,
                                                    absl::Time deadline) {
  for (;;) {
    absl::StatusOr<nlohmann::json> message = ReadMessage(deadline);
    if (!message.ok()) return message.status();
    if (Member(*message, "event") != nullptr) continue;
    if (const nlohmann::json* ret = Member(*message, "return")) return *ret;
    if (const nlohmann::json* error = Member(*message, "error")) {
      const nlohmann::json* desc = Member(*error, "desc");
      return absl::InternalError(absl::StrCat(
          "QMP ", command, ": ", desc && desc->is_string() ? desc->get<std::string>() : "error"));
    }
    return absl::DataLossError("QEMU sent an unexpected QMP message");
  }
}

}  // namespace airlock
