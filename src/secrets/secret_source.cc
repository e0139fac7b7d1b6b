#include "src/secrets/secret_source.h"

#include <fcntl.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "src/common/errno_status.h"
#include "src/common/subprocess.h"
#include "src/common/unique_fd.h"

namespace airlock::secrets {
namespace {

constexpr char kPlaceholderPrefix[] = "AIRLOCK_PLACEHOLDER_";
constexpr size_t kPlaceholderRandomChars = 25;  // 25 * log2(62) > 148 bits

// The first line of a program's complaint, for an error message.
std::string FirstLine(const std::string& text) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > 200) line = line.substr(0, 200) + "...";
  for (char& c : line) {
    if (c < 0x20 || c == 0x7f) c = '?';
  }
  return line;
}

}  // namespace

OnePasswordSource::OnePasswordSource(std::string path, std::vector<std::string> env,
                                     absl::Duration timeout)
    : path_(std::move(path)), env_(std::move(env)), timeout_(timeout) {}

absl::StatusOr<std::string> OnePasswordSource::Resolve(const SecretSpec& spec) {
  std::string op = FindInPath("op", path_);
  if (op.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("secret ", spec.name,
                     ": 1Password's `op` is not on the PATH; install the 1Password CLI, or pass "
                     "the value with env:VAR or file:PATH"));
  }
  ProcessOptions options;
  options.env = env_;
  options.env.push_back("PATH=" + path_);
  options.separate_stderr = true;
  options.timeout = timeout_;
  options.max_output = kMaxSecretValueBytes + 2;
  absl::StatusOr<ProcessResult> r = RunProcess({op, "read", spec.reference()}, options);
  if (!r.ok()) return r.status();
  if (r->timed_out) {
    Wipe(r->output);
    return absl::DeadlineExceededError(
        absl::StrCat("secret ", spec.name, ": `op read` gave no answer within ",
                     absl::FormatDuration(timeout_), "; is 1Password signed in?"));
  }
  if (r->exit_code != 0) {
    Wipe(r->output);
    return absl::FailedPreconditionError(
        absl::StrCat("secret ", spec.name, ": `op read ", spec.reference(), "` failed (exit ",
                     r->exit_code, "): ", FirstLine(r->error_output)));
  }
  std::string value = std::move(r->output);
  if (!value.empty() && value.back() == '\n') value.pop_back();
  if (absl::Status s = CheckSecretValue(spec, value); !s.ok()) {
    Wipe(value);
    return s;
  }
  return value;
}

std::unique_ptr<OnePasswordSource> OnePasswordFromEnvironment() {
  const char* path = getenv("PATH");
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    absl::string_view var(*e);
    if (absl::StartsWith(var, "OP_") || absl::StartsWith(var, "HOME=") ||
        absl::StartsWith(var, "XDG_CONFIG_HOME=")) {
      env.emplace_back(var);
    }
  }
  return std::make_unique<OnePasswordSource>(
      path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin", std::move(env));
}

absl::StatusOr<std::string> ReadLocalSecret(const SecretSpec& spec, std::string* warning) {
  warning->clear();
  std::string value;
  if (spec.kind() == SourceKind::kEnv) {
    const char* v = getenv(spec.reference().c_str());
    if (v == nullptr) {
      return absl::NotFoundError(absl::StrCat("secret ", spec.name, ": the environment variable ",
                                              spec.reference(), " is not set"));
    }
    value = v;
  } else if (spec.kind() == SourceKind::kFile) {
    std::string path = spec.reference();
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
    if (!fd.valid()) {
      return absl::NotFoundError(
          absl::StrCat("secret ", spec.name, ": cannot read ", path, ": ", strerror(errno)));
    }
    struct stat st;
    if (fstat(fd.get(), &st) != 0) return ErrnoStatus("fstat", path);
    if (!S_ISREG(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat("secret ", spec.name, ": ", path, " is not a regular file"));
    }
    if (st.st_size > static_cast<off_t>(kMaxSecretValueBytes) + 1) {
      return absl::InvalidArgumentError(absl::StrCat(
          "secret ", spec.name, ": ", path, " is larger than ", kMaxSecretValueBytes, " bytes"));
    }
    if ((st.st_mode & (S_IRGRP | S_IROTH)) != 0) {
      *warning = absl::StrCat("secret ", spec.name, ": ", path,
                              " can be read by other users; chmod 600 it");
    }
    char buf[4096];
    for (;;) {
      ssize_t n = read(fd.get(), buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus("read", path);
      if (n == 0) break;
      value.append(buf, static_cast<size_t>(n));
      if (value.size() > kMaxSecretValueBytes + 1) break;
    }
    explicit_bzero(buf, sizeof(buf));
    if (!value.empty() && value.back() == '\n') value.pop_back();
  } else if (spec.kind() == SourceKind::kOnePassword) {
    return OnePasswordFromEnvironment()->Resolve(spec);  // checked there
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("secret ", spec.name, ": ", spec.source, " is read by airlockd"));
  }
  if (absl::Status s = CheckSecretValue(spec, value); !s.ok()) {
    Wipe(value);
    return s;
  }
  return value;
}

absl::Status CheckSecretValue(const SecretSpec& spec, const std::string& value) {
  if (value.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("secret ", spec.name, ": ", spec.source, " is empty"));
  }
  if (value.size() > kMaxSecretValueBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "secret ", spec.name, ": the value is longer than ", kMaxSecretValueBytes, " bytes"));
  }
  if (value.find_first_of(std::string("\r\n\0", 3)) != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("secret ", spec.name,
                     ": the value holds a line break or NUL, which an HTTP header cannot carry"));
  }
  return absl::OkStatus();
}

std::string MakePlaceholder(size_t value_length) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  std::string out = kPlaceholderPrefix;
  size_t random_chars =
      std::max(kPlaceholderRandomChars, value_length > out.size() ? value_length - out.size() : 0);
  while (random_chars > 0) {
    unsigned char bytes[64];
    ssize_t n = getrandom(bytes, sizeof(bytes), 0);
    if (n <= 0) continue;
    for (ssize_t i = 0; i < n && random_chars > 0; ++i) {
      if (bytes[i] >= 248) continue;  // 248 = 4 * 62: keeps the choice uniform
      out.push_back(kAlphabet[bytes[i] % 62]);
      --random_chars;
    }
  }
  return out;
}

}  // namespace airlock::secrets
