// `airlock port-forward ID [LOCAL:]REMOTE...`: a listener here per port pair, and for each
// connection to it a ForwardPort call through airlockd to the guest's port (like kubectl
// port-forward).
#ifndef AIRLOCK_CLI_PORT_FORWARD_H_
#define AIRLOCK_CLI_PORT_FORWARD_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock {

struct PortPair {
  uint16_t local = 0;  // 0: any free port here
  uint16_t remote = 0;
};

// "8000" (the same port here), "8080:8000", or ":8000" (any free port here); InvalidArgument
// saying how to write one for anything else.
[[nodiscard]] absl::StatusOr<PortPair> ParsePortPair(absl::string_view text);

}  // namespace airlock

#endif  // AIRLOCK_CLI_PORT_FORWARD_H_
