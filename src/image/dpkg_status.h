// What Debian packages an image holds, from its dpkg database (/var/lib/dpkg/status): for
// `airlock doctor`, which says what the default image gives agents. The file comes from an
// image, so any bytes; fuzzed (fuzz/dpkg_status_fuzz.cc).
#ifndef AIRLOCK_IMAGE_DPKG_STATUS_H_
#define AIRLOCK_IMAGE_DPKG_STATUS_H_

#include <map>
#include <string>

#include "absl/strings/string_view.h"

namespace airlock {

// Where dpkg keeps its database in a root filesystem.
inline constexpr char kDpkgStatusPath[] = "/var/lib/dpkg/status";

// The installed packages of a dpkg status file, name -> version: each paragraph (separated by
// empty lines) whose Status ends in " installed" and that has a Package and a Version. Other
// paragraphs, fields, continuation lines and malformed lines are skipped.
std::map<std::string, std::string> InstalledDebianPackages(absl::string_view status);

}  // namespace airlock

#endif  // AIRLOCK_IMAGE_DPKG_STATUS_H_
