// Fuzz target: replies from QEMU's QMP socket (QEMU runs guest-influenced code, so its bytes are
// not trusted): greeting, capability negotiation and one command, over a real socket.
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>

#include "src/vm/qmp_client.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 60000) return 0;  // stay within the socket buffer: the writer must not block
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return 0;
  if (write(fds[1], data, size) != static_cast<ssize_t>(size)) {
    close(fds[0]);
    close(fds[1]);
    return 0;
  }
  close(fds[1]);  // end of input: reads past it fail fast instead of waiting
  absl::Time deadline = absl::Now() + absl::Seconds(1);
  auto client = airlock::QmpClient::Connect(airlock::UniqueFd(fds[0]), deadline);
  if (client.ok()) (*client)->Execute("query-status", {}, deadline).IgnoreError();
  return 0;
}
