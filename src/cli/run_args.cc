#include "src/cli/run_args.h"

#include <cmath>
#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "src/cli/cli_flags.h"
#include "src/net/egress_rule.h"
#include "src/secrets/secret_spec.h"

namespace airlock {
namespace {

// Accepts "--name VALUE" and "--name=VALUE" (and a short alias); advances *i past the value.
bool TakeValue(const std::vector<std::string>& args, size_t* i, const std::string& name,
               const std::string& alias, std::string* value, absl::Status* error) {
  const std::string& arg = args[*i];
  if (arg == name || (!alias.empty() && arg == alias)) {
    if (*i + 1 >= args.size()) {
      *error = absl::InvalidArgumentError(absl::StrCat(arg, " needs a value"));
      return true;
    }
    *value = args[++*i];
    return true;
  }
  if (arg.rfind(name + "=", 0) == 0) {
    *value = arg.substr(name.size() + 1);
    return true;
  }
  return false;
}

}  // namespace

absl::StatusOr<RunArgs> ParseRunArgs(const std::vector<std::string>& args) {
  RunArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      out.command.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
    std::string value;
    absl::Status error;
    if (TakeValue(args, &i, "--env", "-e", &value, &error)) {
      if (!error.ok()) return error;
      if (value.empty() || value[0] == '=') {
        return absl::InvalidArgumentError("--env needs KEY=VALUE (or KEY to copy it from here)");
      }
      if (value.find('=') == std::string::npos) {
        const char* here = std::getenv(value.c_str());
        if (here == nullptr) continue;  // like docker: an unset variable is left out
        value = absl::StrCat(value, "=", here);
      }
      out.env.push_back(value);
    } else if (TakeValue(args, &i, "--workdir", "-w", &value, &error)) {
      if (!error.ok()) return error;
      if (value.empty() || value[0] != '/') {
        return absl::InvalidArgumentError("--workdir needs an absolute path in the guest");
      }
      out.workdir = value;
    } else if (TakeValue(args, &i, "--user", "-u", &value, &error)) {
      if (!error.ok()) return error;
      if (value.empty() || value[0] == ':' || value.back() == ':') {
        return absl::InvalidArgumentError(
            "--user needs NAME or UID, optionally :GROUP or :GID (e.g. --user 1000:1000)");
      }
      out.user = value;
    } else if (TakeValue(args, &i, "--timeout", "", &value, &error)) {
      if (!error.ok()) return error;
      if (!absl::SimpleAtod(value, &out.timeout_seconds) || !std::isfinite(out.timeout_seconds) ||
          out.timeout_seconds <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("--timeout needs a positive number of seconds, not \"", value, "\""));
      }
    } else if (TakeValue(args, &i, "--memory", "", &value, &error)) {
      if (!error.ok()) return error;
      if (!absl::SimpleAtoi(value, &out.memory_mib) || out.memory_mib < 128 ||
          out.memory_mib > 65536) {
        return absl::InvalidArgumentError("--memory needs a size in MiB between 128 and 65536");
      }
    } else if (TakeValue(args, &i, "--cpus", "", &value, &error)) {
      if (!error.ok()) return error;
      if (!absl::SimpleAtoi(value, &out.cpus) || out.cpus < 1 || out.cpus > 64) {
        return absl::InvalidArgumentError("--cpus needs a number between 1 and 64");
      }
    } else if (TakeValue(args, &i, "--allow", "", &value, &error)) {
      if (!error.ok()) return error;
      absl::StatusOr<net::EgressRule> rule = net::ParseSessionRule(value);
      if (!rule.ok()) return rule.status();
      out.allow.push_back(value);
    } else if (TakeValue(args, &i, "--allow-preset", "", &value, &error)) {
      if (!error.ok()) return error;
      if (absl::Status s = net::PresetRules(value).status(); !s.ok()) return s;
      out.allow_presets.push_back(value);
    } else if (TakeValue(args, &i, "--secret", "", &value, &error)) {
      if (!error.ok()) return error;
      if (absl::Status s = secrets::ParseSecretSpec(value).status(); !s.ok()) return s;
      out.secrets.push_back(value);
    } else if (TakeValue(args, &i, "--workspace", "", &value, &error)) {
      if (!error.ok()) return error;
      if (value.empty()) return absl::InvalidArgumentError("--workspace needs a directory");
      out.workspace = value;
    } else if (TakeValue(args, &i, "--workspace-max", "", &value, &error)) {
      if (!error.ok()) return error;
      absl::StatusOr<uint64_t> size = ParseSize(value);
      if (!size.ok()) return size.status();
      out.workspace_max = *size;
    } else if (arg == "-t" || arg == "--tty" || arg == "-it" || arg == "-ti") {
      out.tty = true;  // run always passes stdin; -i is accepted for docker's habit
    } else if (arg == "-i" || arg == "--interactive") {
      continue;
    } else if (arg.size() > 1 && arg[0] == '-') {
      return absl::InvalidArgumentError(absl::StrCat("unknown option ", arg));
    } else {
      // The image; the command follows, after an optional "--".
      out.image = arg;
      if (i + 1 < args.size() && args[i + 1] == "--") continue;
      out.command.assign(args.begin() + static_cast<long>(i) + 1, args.end());
      break;
    }
  }
  // Without a command an image's own Entrypoint/Cmd runs (airlockd says if it has none).
  if (out.command.empty() && out.image.empty()) {
    return absl::InvalidArgumentError(
        "no command given; put it after --, e.g. airlock run -- python3 -V");
  }
  return out;
}

}  // namespace airlock
