#include "src/image/dpkg_status.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"

namespace airlock {

std::map<std::string, std::string> InstalledDebianPackages(absl::string_view status) {
  std::map<std::string, std::string> installed;
  std::string name, version;
  bool is_installed = false;
  auto end_paragraph = [&] {
    if (is_installed && !name.empty() && !version.empty()) installed[name] = version;
    name.clear();
    version.clear();
    is_installed = false;
  };
  for (absl::string_view line : absl::StrSplit(status, '\n')) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) {
      end_paragraph();
      continue;
    }
    if (line[0] == ' ' || line[0] == '\t') continue;  // a continuation of the field before
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) continue;
    absl::string_view field = line.substr(0, colon);
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (field == "Package") {
      name = std::string(value);
    } else if (field == "Version") {
      version = std::string(value);
    } else if (field == "Status") {
      is_installed = absl::EndsWith(value, " installed");
    }
  }
  end_paragraph();
  return installed;
}

}  // namespace airlock
