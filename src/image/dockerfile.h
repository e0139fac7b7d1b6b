// A Dockerfile read into build stages (`airlock image build`). The text is a client's, so it is
// untrusted: the reader is linear in its size, caps what it keeps (kMaxDockerfileBytes, at most
// kMaxInstructions), and refuses, naming the line, what it cannot build rather than guessing
// (fuzz/dockerfile_fuzz.cc). It follows Docker's reference for the instructions people use:
// parser directives (`# escape=`), line continuations (comment lines inside one are dropped),
// case-insensitive keywords, exec (JSON array) and shell forms, heredocs on RUN and COPY.
//
// Variables ($NAME, ${NAME}, ${NAME:-word}, ...) are not replaced here: a build replaces them
// with ExpandWord as it reaches each instruction, since ARG and ENV change them on the way.
#ifndef AIRLOCK_IMAGE_DOCKERFILE_H_
#define AIRLOCK_IMAGE_DOCKERFILE_H_

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock {

inline constexpr size_t kMaxDockerfileBytes = 4 << 20;
inline constexpr size_t kMaxInstructions = 4096;

enum class DockerInstructionKind {
  kFrom,
  kRun,
  kCopy,
  kAdd,
  kEnv,
  kArg,
  kWorkdir,
  kUser,
  kLabel,
  kExpose,
  kEntrypoint,
  kCmd,
  kShell,
  kVolume,
  kStopSignal,
  kHealthcheck,
};

// The keyword as Docker writes it (RUN, COPY, ...).
const char* DockerInstructionName(DockerInstructionKind kind);

// RUN, CMD, ENTRYPOINT and SHELL's argument: a JSON array of strings (exec form), or text the
// image's shell runs (shell form).
struct DockerCommand {
  bool exec_form = false;
  std::vector<std::string> argv;  // exec form
  std::string text;               // shell form, continuations joined, heredocs appended
};

// A heredoc (`<<EOF`, `<<-EOF` strips leading tabs, `<<'EOF'` or `<<"EOF"` takes the body as
// written, without expansion).
struct DockerHeredoc {
  std::string name;  // the delimiter word
  std::string body;  // the lines between, each ending in a newline
  bool expand = true;
};

struct DockerInstruction {
  DockerInstructionKind kind;
  size_t line = 0;       // where it starts, from 1
  std::string original;  // as written, continuations joined: what progress lines show
  // `--name=value` flags before the arguments (COPY --from, --chown, --chmod; FROM --platform;
  // RUN --network), by name without the dashes.
  std::map<std::string, std::string> flags;
  // The arguments after the keyword and flags, continuations joined, unexpanded.
  std::string rest;
  // RUN/CMD/ENTRYPOINT/SHELL: the command. For RUN <<EOF with nothing else on the line, the
  // heredoc's body is the shell text.
  DockerCommand command;
  // COPY/ADD: sources then the destination (last), unexpanded words; ENV/LABEL/ARG: (name,
  // value) pairs, value unexpanded (ARG without a default: value absent); EXPOSE, VOLUME,
  // USER, WORKDIR, STOPSIGNAL: the words.
  std::vector<std::string> words;
  std::vector<std::pair<std::string, std::optional<std::string>>> pairs;
  std::vector<DockerHeredoc> heredocs;
};

struct DockerStage {
  std::string base;  // FROM's image, unexpanded (`scratch`, a stage's name, a reference)
  std::string name;  // `AS name`, lowercased; empty when none
  size_t line = 0;
  std::map<std::string, std::string> from_flags;
  std::vector<DockerInstruction> instructions;  // after FROM
};

struct Dockerfile {
  char escape = '\\';
  // ARGs before the first FROM: usable in FROM lines, and in a stage that names them again.
  std::vector<std::pair<std::string, std::optional<std::string>>> global_args;
  std::vector<DockerStage> stages;
};

// Reads a Dockerfile. INVALID_ARGUMENT names the line and what to write instead: an unknown
// or refused instruction (ONBUILD, MAINTAINER is taken as a label), a malformed flag or JSON
// form, a heredoc that never ends, no FROM.
[[nodiscard]] absl::StatusOr<Dockerfile> ParseDockerfile(absl::string_view text);

// Replaces variables in one word as Docker does for FROM, COPY, ADD, ENV, LABEL, WORKDIR,
// USER, EXPOSE, VOLUME and STOPSIGNAL: `$NAME`, `${NAME}`, `${NAME:-word}`, `${NAME-word}`,
// `${NAME:+word}`, `${NAME+word}`, `${NAME:?message}`; quotes ("..." expands, '...' does not)
// are removed and the escape character takes the next one literally. Unset names expand to
// nothing. INVALID_ARGUMENT for an unterminated quote or brace, a bad name, `:?` of an unset
// name (with its message), or a result over 1 MiB.
[[nodiscard]] absl::StatusOr<std::string> ExpandWord(absl::string_view word,
                                                     const std::map<std::string, std::string>& vars,
                                                     char escape = '\\');

// Splits an argument list into words at unquoted, unescaped whitespace, each then expanded
// (ExpandWord): what ENV/LABEL values and COPY's paths are.
[[nodiscard]] absl::StatusOr<std::vector<std::string>> ExpandWords(
    absl::string_view text, const std::map<std::string, std::string>& vars, char escape = '\\');

}  // namespace airlock

#endif  // AIRLOCK_IMAGE_DOCKERFILE_H_
