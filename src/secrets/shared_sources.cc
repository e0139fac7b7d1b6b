#include "src/secrets/shared_sources.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "src/common/file_util.h"

namespace airlock::secrets {
namespace {

constexpr char kLineForm[] =
    "write NAME SOURCE@HOST[,HOST...][?OPTION...] TENANT [TENANT...], e.g. "
    "github op://Engineering/github/token@api.github.com uid:1000";

absl::Status BadLine(int number, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("line ", number, ": ", problem, "; ", kLineForm));
}

bool Contains(const std::vector<std::string>& list, absl::string_view item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

}  // namespace

absl::StatusOr<SharedSources> SharedSources::Parse(std::string_view input) {
  SharedSources out;
  int number = 0;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(input.data(), input.size()), '\n')) {
    ++number;
    line = line.substr(0, line.find('#'));
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    if (fields.size() < 3) return BadLine(number, "a source needs a name, a source and a tenant");
    SharedSource source;
    source.name = std::string(fields[0]);
    if (!IsSharedName(source.name)) {
      return BadLine(number, "a name is 1 to 64 letters, digits, '-', '_' and '.'");
    }
    if (std::any_of(out.sources_.begin(), out.sources_.end(),
                    [&](const SharedSource& s) { return s.name == source.name; })) {
      return BadLine(number, absl::StrCat(source.name, " is named twice"));
    }
    absl::StatusOr<SecretSpec> spec = ParseSecretSpec(absl::StrCat("SHARED=", fields[1]));
    if (!spec.ok()) return BadLine(number, spec.status().message());
    if (spec->kind() == SourceKind::kShared) {
      return BadLine(number, "a shared source reads env:, file: or op://, not shared:");
    }
    source.spec = *std::move(spec);
    for (size_t i = 2; i < fields.size(); ++i) {
      if (!Contains(source.tenants, fields[i])) source.tenants.emplace_back(fields[i]);
    }
    out.sources_.push_back(std::move(source));
    if (out.sources_.size() > kMaxSharedSources) {
      return BadLine(number, absl::StrCat("at most ", kMaxSharedSources, " sources"));
    }
  }
  return out;
}

absl::StatusOr<SharedSources> SharedSources::Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path, 1 << 20);
  if (!text.ok()) return text.status();
  absl::StatusOr<SharedSources> sources = Parse(*text);
  if (!sources.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", sources.status().message()));
  }
  return sources;
}

const SharedSource* SharedSources::Find(std::string_view name, std::string_view tenant) const {
  for (const SharedSource& s : sources_) {
    if (s.name != name) continue;
    if (Contains(s.tenants, "*") ||
        Contains(s.tenants, absl::string_view(tenant.data(), tenant.size())))
      return &s;
    return nullptr;
  }
  return nullptr;
}

absl::StatusOr<SecretSpec> SharedSources::Grant(const SecretSpec& requested,
                                                std::string_view tenant) const {
  const SharedSource* source = Find(requested.reference(), tenant);
  if (source == nullptr) {
    return absl::NotFoundError(absl::StrCat(
        "secret ", requested.name, ": no source ", requested.source,
        " is shared with you; read your own with env:, file: or op://, or ask the operator to "
        "share it (airlockd --shared-secrets)"));
  }
  for (const std::string& host : requested.hosts) {
    if (!Contains(source->spec.hosts, host)) {
      return absl::PermissionDeniedError(
          absl::StrCat("secret ", requested.name, ": ", requested.source, " may go only to ",
                       absl::StrJoin(source->spec.hosts, ","), ", not ", host));
    }
  }
  SecretSpec granted = requested;
  if (requested.body && !source->spec.body) {
    return absl::PermissionDeniedError(absl::StrCat(
        "secret ", requested.name, ": ", requested.source, " may not go into request bodies"));
  }
  std::vector<std::string> allowed = source->spec.EffectiveHeaders();
  for (const std::string& header : requested.headers) {
    if (!Contains(allowed, header)) {
      return absl::PermissionDeniedError(
          absl::StrCat("secret ", requested.name, ": ", requested.source,
                       " may go only into the headers ", absl::StrJoin(allowed, ", ")));
    }
  }
  if (requested.headers.empty()) granted.headers = source->spec.headers;
  if (requested.headers.empty() && !requested.body) granted.body = source->spec.body;
  return granted;
}

}  // namespace airlock::secrets
