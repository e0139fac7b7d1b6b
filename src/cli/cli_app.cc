#include "src/cli/cli_app.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "src/cli/cli_flags.h"

namespace airlock {
namespace {

constexpr char kDescription[] =
    "Runs untrusted code in microVMs, each with its own kernel and no network device; egress "
    "goes only to the destinations a session is allowed (--allow). `airlock COMMAND --help` "
    "tells more about each command.";

constexpr char kFooter[] =
    "Everything but doctor, completion and image push ARCHIVE goes through airlockd, started on "
    "first use when run as root (or run it yourself as a service).\n"
    "environment: AIRLOCK_HOME (default /var/lib/airlock), AIRLOCK_SOCKET (default "
    "/run/airlock/airlockd.sock), AIRLOCK_KERNEL, AIRLOCK_INITRAMFS, AIRLOCK_QEMU, "
    "AIRLOCK_ACCEL=kvm|tcg";

// The command the line named: the deepest subcommand that was parsed.
const CLI::App* Named(const CLI::App& app) {
  const CLI::App* at = &app;
  for (;;) {
    std::vector<const CLI::App*> used = at->get_subcommands([](const CLI::App*) { return true; });
    std::vector<const CLI::App*> parsed;
    for (const CLI::App* sub : used) {
      if (sub->parsed()) parsed.push_back(sub);
    }
    if (parsed.empty()) return at;
    at = parsed.front();
  }
}

std::string PathOf(const CLI::App* app) {
  std::vector<std::string> names;
  for (; app != nullptr && app->get_parent() != nullptr; app = app->get_parent()) {
    names.push_back(app->get_name());
  }
  std::reverse(names.begin(), names.end());
  return absl::StrJoin(names, " ");
}

// The word in `words` (the line as typed) that names no command of `named`, a command with
// commands of its own, or "" where there is none: "nosuch" in `airlock image nosuch --help`.
std::string UnknownCommand(const CLI::App& named, const std::vector<std::string>& words) {
  if (named.get_subcommands([](const CLI::App*) { return true; }).empty()) return "";
  std::vector<std::string> path = absl::StrSplit(PathOf(&named), ' ', absl::SkipEmpty());
  size_t matched = 0;
  for (const std::string& word : words) {
    if (word.empty() || word[0] == '-') continue;
    if (matched < path.size() && word == path[matched]) {
      ++matched;
      continue;
    }
    return word;
  }
  return "";
}

// The type name of a session id positional: what completion looks for.
constexpr char kSessionIdType[] = "ID";

// Help is laid out for 80 columns: names in the first kNameColumns, descriptions wrapped at
// word boundaries in the rest (a word longer than a line stays whole).
constexpr size_t kHelpColumns = 80;
constexpr size_t kNameColumns = 34;

std::string Wrap(const std::string& text, size_t width) {
  std::string out;
  for (absl::string_view paragraph : absl::StrSplit(text, '\n')) {
    if (!out.empty()) out += '\n';
    size_t line = 0;
    for (absl::string_view word : absl::StrSplit(paragraph, ' ', absl::SkipEmpty())) {
      if (line > 0 && line + 1 + word.size() > width) {
        out += '\n';
        line = 0;
      } else if (line > 0) {
        out += ' ';
        ++line;
      }
      absl::StrAppend(&out, word);
      line += word.size();
    }
  }
  return out;
}

class WrappingFormatter : public CLI::Formatter {
 public:
  WrappingFormatter() { column_width(kNameColumns); }
  std::string make_option_desc(const CLI::Option* option) const override {
    return Wrap(option->get_description(), kHelpColumns - kNameColumns);
  }
  std::string make_subcommand(const CLI::App* sub) const override {
    std::stringstream out;
    CLI::detail::format_help(out, sub->get_display_name(true),
                             Wrap(sub->get_description(), kHelpColumns - kNameColumns),
                             kNameColumns);
    return out.str();
  }
  std::string make_footer(const CLI::App* app) const override {
    std::string footer = app->get_footer();
    return footer.empty() ? "" : Wrap(footer, kHelpColumns) + "\n";
  }
  std::string make_description(const CLI::App* app) const override {
    std::string description = app->get_description();
    return description.empty() ? "" : Wrap(description, kHelpColumns) + "\n\n";
  }
};

void ThrowIfBad(const absl::Status& s) {
  if (!s.ok()) throw CLI::ValidationError(std::string(s.message()));
}

}  // namespace

Cli::Cli() : app_(kDescription, "airlock") {
  app_.require_subcommand(1);
  app_.set_version_flag("--version", std::string("airlock ") + AIRLOCK_VERSION);
  app_.footer(kFooter);
  // Subcommands share it (they take their parent's formatter).
  app_.formatter(std::make_shared<WrappingFormatter>());
}

void Cli::AddCompletion() {
  CLI::App* completion =
      Add(&app_, "completion", "print a shell completion script: source <(airlock completion bash)",
          [this] {
            PrintBashCompletion();
            return 0;
          });
  completion->add_option("SHELL", completion_shell_, "the shell (bash)")
      ->required()
      ->check(CLI::IsMember({"bash"}));
}

CLI::App* Cli::Add(CLI::App* parent, const std::string& name, const std::string& description,
                   std::function<int()> run, int usage_exit) {
  CLI::App* command = parent->add_subcommand(name, description);
  if (run != nullptr) runs_[command] = std::move(run);
  usage_exit_[command] = usage_exit;
  return command;
}

CLI::App* Cli::Group(const std::string& name, const std::string& description) {
  CLI::App* group = Add(&app_, name, description, nullptr);
  group->require_subcommand(1);
  return group;
}

void Cli::TakesCommand(CLI::App* command, std::vector<std::string>* argv) {
  // After its last positional, the rest of the line is the guest's command, options and all.
  command->prefix_command();
  takes_command_[command] = argv;
}

absl::Status Cli::Parse(std::vector<std::string> args) {
  named_ = &app_;
  help_shown_ = false;
  // A guest command after `--` is never parsed here, whatever it looks like.
  std::vector<std::string> after;
  bool dashdash = false;
  if (auto it = std::find(args.begin(), args.end(), "--"); it != args.end()) {
    after.assign(it + 1, args.end());
    args.erase(it, args.end());
    dashdash = true;
  }
  const std::vector<std::string> words = args;
  const std::string first = args.empty() ? "" : args.front();
  try {
    std::reverse(args.begin(), args.end());  // CLI11 takes the line last word first
    app_.parse(args);
    named_ = Named(app_);
  } catch (const CLI::ParseError& e) {
    named_ = Named(app_);
    if (e.get_exit_code() == 0) {  // --help
      // `airlock nosuch --help` names a command that does not exist: not a request for help.
      if (std::string word = UnknownCommand(*named_, words); !word.empty()) {
        return absl::InvalidArgumentError(absl::StrCat("unknown command \"", word, "\""));
      }
      app_.exit(e);
      help_shown_ = true;
      return absl::OkStatus();
    }
    if (named_ == &app_ && !first.empty() && first[0] != '-') {
      return absl::InvalidArgumentError(absl::StrCat("unknown command \"", first, "\""));
    }
    std::vector<const CLI::App*> subs =
        named_->get_subcommands([](const CLI::App*) { return true; });
    if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && !subs.empty()) {
      std::vector<std::string> names;
      for (const CLI::App* sub : subs) names.push_back(sub->get_name());
      return absl::InvalidArgumentError(
          absl::StrCat("needs one of its commands: ", absl::StrJoin(names, ", ")));
    }
    return absl::InvalidArgumentError(e.what());
  }
  auto takes = takes_command_.find(named_);
  if (takes != takes_command_.end()) {
    std::vector<std::string> rest = const_cast<CLI::App*>(named_)->remaining();
    if (dashdash && !rest.empty()) {
      return absl::InvalidArgumentError("unexpected argument " + rest.front());
    }
    // Without `--`, what CLI11 left over from an unknown option is a mistake, not a command.
    if (!dashdash && !rest.empty() && rest.front().size() > 1 && rest.front()[0] == '-') {
      return absl::InvalidArgumentError(absl::StrCat("unknown option ", rest.front(),
                                                     " (a command that starts with - goes "
                                                     "after --)"));
    }
    *takes->second = dashdash ? after : rest;
  } else if (dashdash) {
    return absl::InvalidArgumentError("takes nothing after --");
  }
  if (runs_.count(named_) == 0) return absl::InvalidArgumentError("which command? see --help");
  return absl::OkStatus();
}

int Cli::Run(std::vector<std::string> args) {
  if (args.empty()) {
    std::fputs(app_.help().c_str(), stderr);
    return 2;
  }
  absl::Status parsed = Parse(std::move(args));
  if (help_shown_) return 0;
  if (!parsed.ok()) {
    std::string path = PathOf(named_);
    std::fprintf(stderr, "airlock%s%s: %s\nsee: airlock %s%s--help\n", path.empty() ? "" : " ",
                 path.c_str(), std::string(parsed.message()).c_str(), path.c_str(),
                 path.empty() ? "" : " ");
    auto code = usage_exit_.find(named_);
    return code == usage_exit_.end() ? 2 : code->second;
  }
  return runs_.at(named_)();
}

void Cli::PrintBashCompletion() const {
  // Every command's path, the words that may follow it, and its options that take a value
  // (after those, files are offered).
  struct Node {
    std::string path;
    std::vector<std::string> words;
    std::vector<std::string> valued;
    bool ids = false;
  };
  std::vector<Node> nodes;
  std::function<void(const CLI::App*)> walk = [&](const CLI::App* app) {
    Node node;
    node.path = PathOf(app);
    for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
      node.words.push_back(sub->get_name());
    }
    for (const CLI::Option* opt : app->get_options()) {
      if (opt->get_positional()) {
        node.ids |= opt->get_type_name() == kSessionIdType;
        continue;
      }
      for (const std::string& n : opt->get_lnames()) {
        node.words.push_back("--" + n);
        if (opt->get_type_size() != 0) node.valued.push_back("--" + n);
      }
      for (const std::string& n : opt->get_snames()) {
        node.words.push_back("-" + n);
        if (opt->get_type_size() != 0) node.valued.push_back("-" + n);
      }
    }
    nodes.push_back(node);
    for (const CLI::App* sub : app->get_subcommands([](const CLI::App*) { return true; })) {
      walk(sub);
    }
  };
  walk(&app_);
  std::string out =
      "# bash completion for airlock: source <(airlock completion bash)\n"
      "_airlock() {\n"
      "  local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} path= w i\n"
      "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
      "    w=${COMP_WORDS[i]}\n"
      "    [[ $w == -- ]] && { COMPREPLY=(); return 0; }\n"
      "    case \"$path $w\" in\n";
  for (const Node& n : nodes) {
    if (!n.path.empty()) absl::StrAppend(&out, "      \" ", n.path, "\") path=\"$path $w\" ;;\n");
  }
  absl::StrAppend(&out,
                  "    esac\n"
                  "  done\n"
                  "  local words= valued= ids=\n"
                  "  case \"$path\" in\n");
  for (const Node& n : nodes) {
    absl::StrAppend(&out, "    \"", n.path.empty() ? "" : " " + n.path, "\") words=\"",
                    absl::StrJoin(n.words, " "), "\" valued=\" ", absl::StrJoin(n.valued, " "),
                    " \" ids=", n.ids ? "1" : "", " ;;\n");
  }
  absl::StrAppend(&out,
                  "  esac\n"
                  "  if [[ $valued == *\" $prev \"* ]]; then\n"
                  "    COMPREPLY=($(compgen -f -- \"$cur\"))\n"
                  "    return 0\n"
                  "  fi\n"
                  "  [[ -n $ids ]] && words=\"$words $(airlock ls -q 2>/dev/null)\"\n"
                  "  COMPREPLY=($(compgen -W \"$words\" -- \"$cur\"))\n"
                  "}\n"
                  "complete -F _airlock airlock\n");
  std::fputs(out.c_str(), stdout);
}

namespace {

// An option whose value `parse` turns into a number for `set`, or refuses with its message.
CLI::Option* AddParsed(CLI::App* app, const std::string& name,
                       absl::StatusOr<uint64_t> (*parse)(const std::string&),
                       std::function<void(uint64_t)> set, const std::string& description,
                       const std::string& type) {
  return app
      ->add_option_function<std::string>(
          name,
          [parse, set](const std::string& v) {
            absl::StatusOr<uint64_t> n = parse(v);
            ThrowIfBad(n.status());
            set(*n);
          },
          description)
      ->type_name(type);
}

}  // namespace

CLI::Option* AddSizeOption(CLI::App* app, const std::string& name,
                           std::function<void(uint64_t)> set, const std::string& description) {
  return AddParsed(app, name, ParseSize, std::move(set), description, "SIZE");
}

CLI::Option* AddSizeOption(CLI::App* app, const std::string& name, uint64_t* bytes,
                           const std::string& description) {
  return AddSizeOption(
      app, name, [bytes](uint64_t v) { *bytes = v; }, description);
}

CLI::Option* AddDurationOption(CLI::App* app, const std::string& name,
                               std::function<void(uint64_t)> set, const std::string& description) {
  return AddParsed(app, name, ParseDurationSeconds, std::move(set), description, "DURATION");
}

CLI::Option* AddSecondsOption(CLI::App* app, const std::string& name, double* seconds,
                              const std::string& description) {
  std::string flag = name.substr(name.rfind(',') == std::string::npos ? 0 : name.rfind(',') + 1);
  return app
      ->add_option_function<std::string>(
          name,
          [seconds, flag](const std::string& v) {
            double t = 0;
            if (!absl::SimpleAtod(v, &t) || !std::isfinite(t) || t <= 0) {
              throw CLI::ValidationError(
                  absl::StrCat(flag, " needs a positive number of seconds, not \"", v, "\""));
            }
            *seconds = t;
          },
          description)
      ->type_name("SECONDS");
}

CLI::Option* AddCountOption(CLI::App* app, const std::string& name,
                            std::function<void(uint32_t)> set, uint32_t min, uint32_t max,
                            const std::string& description) {
  std::string flag = name.substr(name.rfind(',') == std::string::npos ? 0 : name.rfind(',') + 1);
  return app
      ->add_option_function<std::string>(
          name,
          [set, min, max, flag](const std::string& v) {
            uint32_t value = 0;
            if (!absl::SimpleAtoi(v, &value) || value < min || value > max) {
              std::string range = max == UINT32_MAX
                                      ? absl::StrCat("a whole number from ", min)
                                      : absl::StrCat("a number from ", min, " to ", max);
              throw CLI::ValidationError(absl::StrCat(flag, " needs ", range, ", not \"", v, "\""));
            }
            set(value);
          },
          description)
      ->type_name("N");
}

CLI::Option* AddCheckedList(CLI::App* app, const std::string& name, std::vector<std::string>* out,
                            std::function<absl::Status(const std::string&)> check,
                            const std::string& description) {
  return app
      ->add_option_function<std::vector<std::string>>(
          name,
          [out, check](const std::vector<std::string>& values) {
            for (const std::string& v : values) {
              ThrowIfBad(check(v));
              if (out != nullptr) out->push_back(v);
            }
          },
          description)
      ->allow_extra_args(false);  // repeated as --allow A --allow B; what follows A is not B
}

CLI::Option* AddSessionId(CLI::App* app, std::function<void(const std::string&)> set,
                          bool required) {
  CLI::Option* id = app->add_option_function<std::string>("ID", std::move(set), "the session")
                        ->type_name(kSessionIdType);
  return required ? id->required() : id;
}

CLI::Option* AddSessionId(CLI::App* app, std::string* id) {
  return AddSessionId(app, [id](const std::string& v) { *id = v; });
}

CLI::Option* AddSessionIds(CLI::App* app, std::vector<std::string>* ids, bool required) {
  CLI::Option* option = app->add_option("ID", *ids, "the sessions")->type_name(kSessionIdType);
  return required ? option->required() : option;
}

CLI::Option* AddJsonFlag(CLI::App* app, bool* json) {
  return app->add_flag("--json", *json, "print JSON instead of a table");
}

}  // namespace airlock
