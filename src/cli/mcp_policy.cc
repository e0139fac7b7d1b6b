#include "src/cli/mcp_policy.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "src/common/errno_status.h"

namespace airlock {
namespace {

// "a, b" or "none configured".
std::string ListOrNone(const std::vector<std::string>& items) {
  return items.empty() ? "none configured" : absl::StrJoin(items, ", ");
}

// A configured rule: a session's rule, or one of the ceiling's ("*" for any name).
absl::StatusOr<net::EgressRule> ParseConfiguredRule(const std::string& text) {
  absl::StatusOr<net::EgressRule> rule = net::ParseSessionRule(text);
  if (rule.ok()) return rule;
  absl::StatusOr<net::EgressRule> any = net::ParseEgressRule(text, net::RuleContext::kCeilingAllow);
  if (any.ok() && any->kind == net::EgressRule::Kind::kAnyName) return any;
  return rule.status();
}

}  // namespace

absl::StatusOr<McpPolicy> McpPolicy::Create(const std::vector<std::string>& secrets,
                                            const std::vector<std::string>& allow,
                                            const std::vector<std::string>& workspace_roots,
                                            const std::vector<std::string>& volumes) {
  McpPolicy policy;
  for (const std::string& text : secrets) {
    absl::StatusOr<secrets::SecretSpec> spec = secrets::ParseSecretSpec(text);
    if (!spec.ok())
      return absl::InvalidArgumentError(absl::StrCat("--secret: ", spec.status().message()));
    for (const secrets::SecretSpec& other : policy.secrets_) {
      if (other.name == spec->name) {
        return absl::InvalidArgumentError(
            absl::StrCat("--secret ", spec->name, " is given twice: give each name once"));
      }
    }
    policy.secrets_.push_back(*std::move(spec));
  }
  for (const std::string& text : allow) {
    absl::StatusOr<net::EgressRule> rule = ParseConfiguredRule(text);
    if (!rule.ok())
      return absl::InvalidArgumentError(absl::StrCat("--allow: ", rule.status().message()));
    policy.allow_.push_back(*std::move(rule));
  }
  for (const std::string& root : workspace_roots) {
    char resolved[PATH_MAX];
    struct stat st;
    if (realpath(root.c_str(), resolved) == nullptr || stat(resolved, &st) != 0 ||
        !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--workspace-root ", root, ": not a directory on this host"));
    }
    policy.roots_.push_back(resolved);
  }
  for (const std::string& text : volumes) {
    OfferedVolume v{.name = text};
    if (absl::EndsWith(text, ":ro")) {
      v.name.resize(text.size() - 3);
      v.read_only = true;
    }
    bool valid = !v.name.empty() && v.name.find(':') == std::string::npos &&
                 v.name.find('/') == std::string::npos;
    if (!valid) {
      return absl::InvalidArgumentError(
          absl::StrCat("--volume ", text,
                       ": give a volume's name, or NAME:ro to let the model attach it "
                       "read-only only (airlock volume ls lists yours)"));
    }
    policy.volumes_.push_back(std::move(v));
  }
  return policy;
}

absl::Status McpPolicy::CheckVolume(const std::string& name, bool read_only) const {
  for (const OfferedVolume& v : volumes_) {
    if (v.name != name) continue;
    if (v.read_only && !read_only) {
      return absl::PermissionDeniedError(
          absl::StrCat("volume ", net::QuoteForMessage(name),
                       " is offered read-only by this MCP server: attach it as NAME:/PATH:ro"));
    }
    return absl::OkStatus();
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "volume ", net::QuoteForMessage(name), " is not one this MCP server offers (",
      ListOrNone(VolumeNames()),
      "). The user chooses which volumes a model may attach, on the MCP server's command line: "
      "airlock mcp --volume NAME[:ro]"));
}

bool McpPolicy::Offers(const std::string& volume) const {
  for (const OfferedVolume& v : volumes_) {
    if (v.name == volume) return true;
  }
  return false;
}

std::vector<std::string> McpPolicy::VolumeNames() const {
  std::vector<std::string> names;
  for (const OfferedVolume& v : volumes_) {
    names.push_back(v.read_only ? v.name + " (read-only)" : v.name);
  }
  return names;
}

absl::StatusOr<std::string> McpPolicy::Secret(const std::string& name) const {
  for (const secrets::SecretSpec& spec : secrets_) {
    if (spec.name == name) return secrets::FormatSecretSpec(spec);
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "secret ", net::QuoteForMessage(name), " is not one this MCP server offers (",
      ListOrNone(SecretNames()),
      "). Name a configured secret only; sources and hosts are the user's to choose, on the MCP "
      "server's command line: airlock mcp --secret NAME=env:VAR@HOST"));
}

absl::Status McpPolicy::CheckAllow(const std::string& text) const {
  absl::StatusOr<net::EgressRule> rule = net::ParseSessionRule(text);
  if (!rule.ok()) return rule.status();
  for (const net::EgressRule& configured : allow_) {
    if (configured.Covers(*rule)) return absl::OkStatus();
  }
  for (const secrets::SecretSpec& spec : secrets_) {
    for (const std::string& host : spec.hosts) {
      absl::StatusOr<net::EgressRule> bound = net::ParseSessionRule(host);
      if (bound.ok() && bound->Covers(*rule)) return absl::OkStatus();
    }
  }
  return absl::PermissionDeniedError(absl::StrCat(
      net::QuoteForMessage(text), " is outside the egress this MCP server allows (",
      ListOrNone(AllowRules()),
      "). Ask only for those; the user widens them on the MCP server's command line: airlock mcp "
      "--allow ",
      rule->ToString()));
}

absl::StatusOr<std::string> McpPolicy::Workspace(const std::string& path) const {
  char resolved[PATH_MAX];
  if (realpath(path.c_str(), resolved) == nullptr) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrCat("workspace ", net::QuoteForMessage(path),
                                              ": no such directory on this host"));
    }
    return ErrnoStatus("resolve the workspace", path);
  }
  std::string real = resolved;
  for (const std::string& root : roots_) {
    if (root == "/" || real == root || real.starts_with(root + "/")) return real;
  }
  return absl::PermissionDeniedError(absl::StrCat(
      "workspace ", net::QuoteForMessage(path),
      " is not under a workspace root of this MCP server (", ListOrNone(roots_),
      "). Use a project under those; the user names the directories a model may use on the MCP "
      "server's command line: airlock mcp --workspace-root DIR"));
}

std::vector<std::string> McpPolicy::SecretNames() const {
  std::vector<std::string> names;
  for (const secrets::SecretSpec& spec : secrets_) {
    names.push_back(absl::StrCat(spec.name, " (to ", absl::StrJoin(spec.hosts, ", "), ")"));
  }
  return names;
}

std::vector<std::string> McpPolicy::AllowRules() const {
  std::vector<std::string> rules;
  for (const net::EgressRule& rule : allow_) rules.push_back(rule.ToString());
  for (const secrets::SecretSpec& spec : secrets_) {
    for (const std::string& host : spec.hosts) rules.push_back(host);
  }
  return rules;
}

}  // namespace airlock
