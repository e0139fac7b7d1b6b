#include "src/cli/host_tools.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"
#include "src/common/host_paths.h"
#include "src/common/subprocess.h"

extern char** environ;

namespace airlock {

namespace {

using Json = nlohmann::json;

// What airlock-tools may print: a million entries of long paths fit.
constexpr size_t kMaxResultBytes = size_t{1} << 30;

bool Read(const Json& object, const char* key, std::string* out) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_string()) return false;
  *out = it->get<std::string>();
  return true;
}

bool Read(const Json& object, const char* key, uint64_t* out) {
  auto it = object.find(key);
  if (it == object.end() || !it->is_number_unsigned()) return false;
  *out = it->get<uint64_t>();
  return true;
}

absl::StatusOr<CapturedWorkspace> RunTools(const std::string& verb, const std::string& dir,
                                           int image_fd, uint64_t max_bytes) {
  ProcessOptions options;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) options.env.emplace_back(*e);
  options.max_output = kMaxResultBytes;
  options.separate_stderr = true;
  options.pass_fd = image_fd;
  std::string program = absl::StrCat(ExecutableDir(), "/", kToolsProgram);
  absl::StatusOr<ProcessResult> run =
      RunProcess({program, verb, "--max-bytes", std::to_string(max_bytes), "--", dir}, options);
  if (!run.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("cannot run ", program, ": ",
                                                      run.status().message(),
                                                      "; run scripts/setup.sh to build it"));
  }
  if (run->exit_code != 0 || run->output.size() >= kMaxResultBytes) {
    std::string why =
        run->error_output.empty() ? absl::StrCat("exit code ", run->exit_code) : run->error_output;
    return absl::InternalError(absl::StrCat(program, " ", verb, " failed: ", why));
  }
  return DecodeCaptureResult(run->output);
}

}  // namespace

int BecomeProgramBeside(const std::string& name, const std::vector<std::string>& args) {
  std::string program = absl::StrCat(ExecutableDir(), "/", name);
  std::vector<std::string> argv = {program};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> pointers;
  for (std::string& s : argv) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  execv(program.c_str(), pointers.data());
  std::fprintf(stderr, "airlock: cannot start %s: %s; run scripts/setup.sh\n", program.c_str(),
               std::strerror(errno));
  return 1;
}

absl::StatusOr<CapturedWorkspace> CaptureWorkspaceWithTools(const std::string& dir, int image_fd,
                                                            uint64_t max_bytes) {
  return RunTools("capture", dir, image_fd, max_bytes);
}

absl::StatusOr<WorkspaceTree> DescribeWorkspaceWithTools(const std::string& dir,
                                                         uint64_t max_bytes) {
  absl::StatusOr<CapturedWorkspace> described = RunTools("describe", dir, -1, max_bytes);
  if (!described.ok()) return described.status();
  return std::move(described->tree);
}

std::string EncodeCaptureResult(const absl::StatusOr<CapturedWorkspace>& result) {
  Json out = Json::object();
  if (!result.ok()) {
    out["error"] = {{"code", static_cast<uint64_t>(result.status().code())},
                    {"message", std::string(result.status().message())}};
  } else {
    const CapturedWorkspace& c = *result;
    Json entries = Json::array();
    for (const BaseEntry& e : c.tree.entries) {
      entries.push_back({{"path", e.path},
                         {"mode", uint64_t{e.mode}},
                         {"size", e.size},
                         {"sha256", e.sha256},
                         {"target", e.target}});
    }
    out = {{"root", c.root},
           {"head", c.head},
           {"branch", c.branch},
           {"image_bytes", c.image_bytes},
           {"data_bytes", c.tree.data_bytes},
           {"directories", c.tree.directories},
           {"digest", c.tree.digest},
           {"entries", std::move(entries)}};
  }
  std::vector<uint8_t> bytes = Json::to_msgpack(out);
  return std::string(bytes.begin(), bytes.end());
}

absl::StatusOr<CapturedWorkspace> DecodeCaptureResult(std::string_view bytes) {
  Json in = Json::from_msgpack(bytes, /*strict=*/true, /*allow_exceptions=*/false);
  auto garbled = [] {
    return absl::InternalError(
        absl::StrCat(kToolsProgram, " printed a result airlock cannot read: are airlock and ",
                     kToolsProgram, " from the same build? Run scripts/setup.sh"));
  };
  if (in.is_discarded() || !in.is_object()) return garbled();
  if (auto error = in.find("error"); error != in.end()) {
    uint64_t code = 0;
    std::string message;
    if (!error->is_object() || !Read(*error, "code", &code) || !Read(*error, "message", &message)) {
      return garbled();
    }
    if (code == 0 || code > static_cast<uint64_t>(absl::StatusCode::kUnauthenticated)) {
      code = static_cast<uint64_t>(absl::StatusCode::kUnknown);
    }
    return absl::Status(static_cast<absl::StatusCode>(code), message);
  }
  CapturedWorkspace c;
  auto entries = in.find("entries");
  if (!Read(in, "root", &c.root) || !Read(in, "head", &c.head) || !Read(in, "branch", &c.branch) ||
      !Read(in, "image_bytes", &c.image_bytes) || !Read(in, "data_bytes", &c.tree.data_bytes) ||
      !Read(in, "directories", &c.tree.directories) || !Read(in, "digest", &c.tree.digest) ||
      entries == in.end() || !entries->is_array()) {
    return garbled();
  }
  c.tree.entries.reserve(entries->size());
  for (const Json& e : *entries) {
    BaseEntry entry;
    uint64_t mode = 0;
    if (!e.is_object() || !Read(e, "path", &entry.path) || !Read(e, "mode", &mode) ||
        !Read(e, "size", &entry.size) || !Read(e, "sha256", &entry.sha256) ||
        !Read(e, "target", &entry.target) || mode > UINT32_MAX) {
      return garbled();
    }
    entry.mode = static_cast<uint32_t>(mode);
    c.tree.entries.push_back(std::move(entry));
  }
  return c;
}

}  // namespace airlock
