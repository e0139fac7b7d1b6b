#include "src/image/tar_path.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace airlock {

absl::StatusOr<std::string> CleanTarPath(absl::string_view name) {
  if (name.size() > kMaxImagePath) {
    return absl::InvalidArgumentError(
        absl::StrCat("tar entry name of ", name.size(), " bytes is longer than ", kMaxImagePath));
  }
  if (name.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError("tar entry name contains a NUL byte");
  }
  std::string out;
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == absl::string_view::npos) end = name.size();
    absl::string_view component = name.substr(start, end - start);
    start = end + 1;
    if (component.empty() || component == ".") continue;
    if (component == "..") {
      return absl::InvalidArgumentError(absl::StrCat(
          "tar entry \"", name, "\" has a \"..\" component (it would escape the image)"));
    }
    if (component.size() > kMaxNameComponent) {
      return absl::InvalidArgumentError(absl::StrCat("tar entry \"", name.substr(0, 64),
                                                     "...\" has a name component longer than ",
                                                     kMaxNameComponent, " bytes"));
    }
    if (!out.empty()) out.push_back('/');
    out.append(component.data(), component.size());
  }
  return out;
}

}  // namespace airlock
