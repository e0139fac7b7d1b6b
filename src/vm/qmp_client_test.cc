#include "src/vm/qmp_client.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

namespace airlock {
namespace {

std::string ReadLine(int fd) {
  std::string line;
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
  return line;
}

void WriteLine(int fd, const std::string& s) {
  std::string line = s + "\n";
  ASSERT_EQ(write(fd, line.data(), line.size()), static_cast<ssize_t>(line.size()));
}

TEST(QmpClientTest, NegotiatesSkipsEventsAndReportsErrors) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  UniqueFd server(fds[1]);
  std::thread qemu([&] {
    WriteLine(
        server.get(),
        R"({"QMP": {"version": {"qemu": {"micro": 22, "minor": 2, "major": 7}}, "capabilities": []}})");
    EXPECT_NE(ReadLine(server.get()).find("qmp_capabilities"), std::string::npos);
    WriteLine(server.get(), R"({"return": {}})");
    EXPECT_NE(ReadLine(server.get()).find("query-status"), std::string::npos);
    WriteLine(server.get(), R"({"event": "RESUME", "timestamp": {}})");
    WriteLine(server.get(), R"({"return": {"status": "running", "running": true}})");
    ReadLine(server.get());
    WriteLine(server.get(), R"({"error": {"class": "GenericError", "desc": "no such thing"}})");
    ReadLine(server.get());
    WriteLine(server.get(), "not json");
  });
  absl::Time deadline = absl::Now() + absl::Seconds(5);
  auto client = QmpClient::Connect(UniqueFd(fds[0]), deadline);
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->version(), "7.2.22");
  auto status = (*client)->Execute("query-status", {}, deadline);
  ASSERT_TRUE(status.ok());
  EXPECT_EQ((*status)["status"], "running");
  auto error = (*client)->Execute("bogus", {}, deadline);
  ASSERT_FALSE(error.ok());
  EXPECT_NE(error.status().message().find("no such thing"), absl::string_view::npos);
  EXPECT_FALSE((*client)->Execute("x", {}, deadline).ok());
  qemu.join();
}

TEST(QmpClientTest, SilentOrClosedPeerFailsInsteadOfHanging) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  UniqueFd server(fds[1]);
  auto silent = QmpClient::Connect(UniqueFd(fds[0]), absl::Now() + absl::Milliseconds(200));
  EXPECT_TRUE(absl::IsDeadlineExceeded(silent.status()));
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  close(fds[1]);
  auto closed = QmpClient::Connect(UniqueFd(fds[0]), absl::Now() + absl::Seconds(5));
  EXPECT_TRUE(absl::IsUnavailable(closed.status())) << closed.status();
}

}  // namespace
}  // namespace airlock
