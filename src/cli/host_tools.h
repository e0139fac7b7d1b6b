// The CLI's work that needs libarchive, libext2fs or libcurl runs in airlock-tools, the program
// beside airlock (src/cli/tools_main.cc): capturing a workspace into an ext4, describing a
// project for sync, pushing an image archive, and `airlock doctor`. So `airlock` itself never
// loads those libraries and their ~35 dependencies, and every other command (exec above all)
// starts in about half the time. airlock-tools runs as the same user with the same rights.
//
// Capture and describe are calls: airlock-tools gets the image file as its fd 3 and prints the
// result (or the error) on stdout, as MessagePack. Push and doctor are whole commands, which
// the airlock process becomes.
#ifndef AIRLOCK_CLI_HOST_TOOLS_H_
#define AIRLOCK_CLI_HOST_TOOLS_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "src/workspace/workspace_capture.h"

namespace airlock {

inline constexpr char kToolsProgram[] = "airlock-tools";

// Becomes the program `name` beside this one (ExecutableDir()), with `args` after its name.
// Returns only when that fails: 1, after saying why on stderr.
int BecomeProgramBeside(const std::string& name, const std::vector<std::string>& args);

// CaptureWorkspace (see workspace_capture.h) run by airlock-tools, writing into image_fd.
[[nodiscard]] absl::StatusOr<CapturedWorkspace> CaptureWorkspaceWithTools(const std::string& dir,
                                                                          int image_fd,
                                                                          uint64_t max_bytes);
// DescribeWorkspace run by airlock-tools.
[[nodiscard]] absl::StatusOr<WorkspaceTree> DescribeWorkspaceWithTools(const std::string& dir,
                                                                       uint64_t max_bytes);

// What airlock-tools prints: a CapturedWorkspace, or {"error": {"code", "message"}} carrying
// the status that CaptureWorkspace returned, code and message intact. MessagePack, whose strings
// are bytes, so that paths that are not UTF-8 arrive exactly as they are on disk.
std::string EncodeCaptureResult(const absl::StatusOr<CapturedWorkspace>& result);
[[nodiscard]] absl::StatusOr<CapturedWorkspace> DecodeCaptureResult(std::string_view bytes);

}  // namespace airlock

#endif  // AIRLOCK_CLI_HOST_TOOLS_H_
