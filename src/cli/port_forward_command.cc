// airlock port-forward: local listeners whose connections reach ports in a session's guest.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "src/cli/cli_app.h"
#include "src/cli/cli_commands.h"
#include "src/cli/daemon_client.h"
#include "src/cli/port_forward.h"
#include "src/common/unique_fd.h"

namespace airlock {

absl::StatusOr<PortPair> ParsePortPair(absl::string_view text) {
  auto port = [](absl::string_view word, bool zero_ok, uint16_t* out) {
    uint32_t n = 0;
    if (word.empty() && zero_ok) {
      *out = 0;
      return true;
    }
    bool digits =
        !word.empty() && word.size() <= 5 &&
        std::all_of(word.begin(), word.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits || !absl::SimpleAtoi(word, &n) || n == 0 || n > 65535) return false;
    *out = static_cast<uint16_t>(n);
    return true;
  };
  std::vector<absl::string_view> parts = absl::StrSplit(text, ':');
  PortPair pair;
  bool ok =
      parts.size() == 1 ? port(parts[0], false, &pair.remote) && port(parts[0], false, &pair.local)
      : parts.size() == 2 ? port(parts[0], true, &pair.local) && port(parts[1], false, &pair.remote)
                          : false;
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "\"", text.substr(0, 40),
        "\" is not a port pair: write REMOTE (8000), LOCAL:REMOTE (8080:8000) or :REMOTE (any free "
        "port here), each 1 to 65535"));
  }
  return pair;
}

namespace {

// Writes all of data to a socket; false if it is gone.
bool SendAll(int fd, const std::string& data) {
  for (size_t done = 0; done < data.size();) {
    ssize_t n = send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// One local connection, relayed through airlockd to the guest's port until both sides end.
void Relay(std::shared_ptr<DaemonClient> client, std::string id, uint16_t remote, UniqueFd fd) {
  grpc::ClientContext context;
  std::unique_ptr<grpc::ClientReaderWriter<v1::PortForwardRequest, v1::PortForwardResponse>>
      stream = client->sessions->ForwardPort(&context);
  v1::PortForwardRequest start;
  start.mutable_start()->set_session_id(id);
  start.mutable_start()->set_port(remote);
  stream->Write(start);
  // Here to the guest: this connection's bytes, then its end.
  std::thread up([&] {
    std::string buf(64 << 10, '\0');
    for (;;) {
      ssize_t n = recv(fd.get(), buf.data(), buf.size(), 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      v1::PortForwardRequest data;
      data.set_data(buf.data(), static_cast<size_t>(n));
      if (!stream->Write(data)) break;
    }
    v1::PortForwardRequest eof;
    eof.set_eof(true);
    stream->Write(eof);
    stream->WritesDone();
  });
  // The guest to here.
  v1::PortForwardResponse response;
  std::string reset;
  while (stream->Read(&response)) {
    if (response.has_eof()) {
      shutdown(fd.get(), SHUT_WR);
    } else if (response.has_reset()) {
      reset = response.reset();
      break;
    } else if (!SendAll(fd.get(), response.data())) {
      context.TryCancel();  // the local client went away: the guest's server sees a reset
      break;
    }
  }
  shutdown(fd.get(), SHUT_RDWR);  // ends `up` if it still waits on this connection
  up.join();
  grpc::Status status = stream->Finish();
  if (!reset.empty()) {
    std::fprintf(stderr, "airlock port-forward: a connection to port %u: %s\n", remote,
                 reset.c_str());
  } else if (!status.ok() && status.error_code() != grpc::StatusCode::CANCELLED) {
    std::fprintf(stderr, "airlock port-forward: a connection to port %u: %s\n", remote,
                 Describe(status).c_str());
  }
}

struct PortForwardArgs {
  std::string id;
  std::vector<std::string> pairs;
  std::string address = "127.0.0.1";
};

int PortForward(const PortForwardArgs& args) {
  std::vector<PortPair> pairs;
  for (const std::string& text : args.pairs) {
    absl::StatusOr<PortPair> pair = ParsePortPair(text);
    if (!pair.ok()) {
      std::fprintf(stderr, "airlock port-forward: %s\n",
                   std::string(pair.status().message()).c_str());
      return 2;
    }
    pairs.push_back(*pair);
  }
  in_addr address;
  if (inet_pton(AF_INET, args.address.c_str(), &address) != 1) {
    std::fprintf(stderr,
                 "airlock port-forward: --address %s is not an IPv4 address (e.g. 127.0.0.1)\n",
                 args.address.c_str());
    return 2;
  }
  std::optional<DaemonClient> connected = Connect();
  if (!connected) return 1;
  auto client = std::make_shared<DaemonClient>(std::move(*connected));
  {
    // A session that is not the caller's, or gone, is said now rather than per connection.
    grpc::ClientContext context;
    v1::GetSessionRequest request;
    request.set_id(args.id);
    v1::Session session;
    grpc::Status status = client->sessions->Get(&context, request, &session);
    if (!status.ok()) return DaemonError(status);
  }
  std::vector<UniqueFd> listeners;
  for (const PortPair& pair : pairs) {
    UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int one = 1;
    setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in local = {};
    local.sin_family = AF_INET;
    local.sin_addr = address;
    local.sin_port = htons(pair.local);
    if (!fd.valid() || bind(fd.get(), reinterpret_cast<sockaddr*>(&local), sizeof(local)) != 0 ||
        listen(fd.get(), 64) != 0) {
      std::fprintf(stderr, "airlock port-forward: cannot listen on %s:%u: %s\n",
                   args.address.c_str(), pair.local, std::strerror(errno));
      return 1;
    }
    socklen_t length = sizeof(local);
    getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &length);
    std::printf("forwarding %s:%u -> %s:%u\n", args.address.c_str(), ntohs(local.sin_port),
                args.id.c_str(), pair.remote);
    listeners.push_back(std::move(fd));
  }
  std::fflush(stdout);
  // Until interrupted: each connection relayed on a thread of its own.
  for (;;) {
    std::vector<pollfd> fds;
    for (const UniqueFd& fd : listeners) fds.push_back({fd.get(), POLLIN, 0});
    if (poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      std::perror("airlock port-forward: poll");
      return 1;
    }
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & POLLIN)) continue;
      UniqueFd accepted(accept4(fds[i].fd, nullptr, nullptr, SOCK_CLOEXEC));
      if (!accepted.valid()) continue;
      std::thread(Relay, client, args.id, pairs[i].remote, std::move(accepted)).detach();
    }
  }
}

}  // namespace

void AddPortForwardCommand(Cli& cli) {
  auto args = std::make_shared<PortForwardArgs>();
  CLI::App* p = cli.Add(&cli.app(), "port-forward",
                        "reach ports in a session from here: port-forward ID [LOCAL:]REMOTE...",
                        [args] { return PortForward(*args); });
  p->footer(
      "Listens here (127.0.0.1 by default) and relays each connection through airlockd to a\n"
      "TCP port in session ID's guest, where a server listens on its loopback or on every\n"
      "address: `airlock port-forward ID 8080:8000` then http://127.0.0.1:8080/ reaches the\n"
      "guest's port 8000. Runs until interrupted (^C). A paused session is resumed by the\n"
      "first connection and stays awake while connections are open; each is audited.");
  AddSessionId(p, &args->id);
  p->add_option("PORTS", args->pairs,
                "REMOTE, LOCAL:REMOTE or :REMOTE (any free port here), one or more")
      ->required();
  p->add_option("--address", args->address,
                "the IPv4 address to listen on here (default 127.0.0.1; 0.0.0.0 lets other "
                "machines in)")
      ->type_name("ADDRESS");
}

}  // namespace airlock
