// Streams one command through airlockd's Exec call: our stdin to the guest (when asked), the
// guest's stdout and stderr to ours as they arrive, and its exit code back as ours.
#ifndef AIRLOCK_CLI_EXEC_CLIENT_H_
#define AIRLOCK_CLI_EXEC_CLIENT_H_

#include "proto/airlock/v1/airlock.pb.h"
#include "src/cli/daemon_client.h"
#include "src/common/exit_codes.h"

namespace airlock {

// Returns the exit code to exit with: the command's, or 125 (message on stderr) if Airlock
// failed, or 128+N if signal N interrupted us (the command is then killed).
int StreamExec(DaemonClient& client, const v1::ExecStart& start);

}  // namespace airlock

#endif  // AIRLOCK_CLI_EXEC_CLIENT_H_
