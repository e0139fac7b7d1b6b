// A coding agent's own store, read for the host (kReadAgentStore): OpenCode keeps its sessions
// in a SQLite database (~/.local/share/opencode/opencode.db), one row per part of a message (a
// prompt's text, the agent's text, a tool call with its input, state and output), updated in
// place as the part changes.
//
// The database is the guest's to make, so it is read as hostile, and never in PID 1: the agent
// forks a child per reading that opens it read-only (no writes, no checkpoint; as any reader of
// a WAL database it shares the -shm index),
// with SQLite's defensive settings (no triggers, views or untrusted schema functions, checked
// cells, capped lengths), a bound on the work one query may do, on its memory, and on its time
// (a FIFO put where the database was, or a file locked forever, ends in SIGALRM, not in a hung
// agent). What it answers is checked again by the host.
#ifndef AIRLOCK_GUEST_AGENT_STORE_H_
#define AIRLOCK_GUEST_AGENT_STORE_H_

#include <string>

#include "src/common/channel_messages.h"

namespace airlock::guest {

// Seconds a reading may take before the kernel ends it.
inline constexpr unsigned kStoreReadSeconds = 10;

// Reads the rows request asks for from the database at path, and returns the kReadAgentStore
// answer (EncodeStoreAnswer): rows, or an errno and what failed. Meant for a child process:
// it sets process-wide SQLite limits.
std::string ReadAgentStore(const AgentStoreMessage& request, const std::string& path);

// Forks the reader: a child that answers on out_fd and exits. Returns its pid, or -1 (errno).
// The parent closes out_fd; the child's other descriptors are closed-on-exec ones of PID 1,
// which it never writes.
pid_t StartStoreReader(const AgentStoreMessage& request, const std::string& path, int out_fd);

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_AGENT_STORE_H_
