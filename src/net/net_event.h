// What the egress proxy decided about one DNS question or connection of a session: the rows
// of `airlock network log`, stored by airlockd (src/daemon/state_store.h).
#ifndef AIRLOCK_NET_NET_EVENT_H_
#define AIRLOCK_NET_NET_EVENT_H_

#include <cstdint>
#include <string>

namespace airlock::net {

// One decision of the proxy, for `airlock network log`.
struct NetEvent {
  int64_t seq = 0;  // order in the session's log, once stored
  int64_t unix_ms = 0;
  std::string kind;  // "dns" or "connect"
  std::string name;  // empty for an address rule
  std::string address;
  uint32_t port = 0;
  bool allowed = false;
  std::string rule;        // the session rule that allowed it
  std::string reason;      // why it was denied or ended badly, with what would allow it
  uint64_t bytes_out = 0;  // guest -> destination
  uint64_t bytes_in = 0;   // destination -> guest
  // A denial seen again (the same name, port, address and reason) is counted on its first
  // record: how many more times, and when the last was (once stored).
  uint64_t repeats = 0;
  int64_t last_ms = 0;
};

// One line for the session's log: "egress: connect pypi.org:443 (151.101.0.223) allowed by
// pypi.org, 812 bytes out, 10466 in" or "egress: dns evil.com denied: no rule allows ...".
std::string DescribeNetEvent(const NetEvent& e);

}  // namespace airlock::net

#endif  // AIRLOCK_NET_NET_EVENT_H_
