// The --npm packages `airlock image build` takes: checked by the CLI as it parses, and again
// by npm_layer.cc before npm sees them. Its own file so that the CLI checks them without
// linking libarchive (npm_layer.cc's tar writer).
#ifndef AIRLOCK_IMAGE_NPM_SPEC_H_
#define AIRLOCK_IMAGE_NPM_SPEC_H_

#include <string>

#include "absl/status/status.h"

namespace airlock {

// A package from the registry, as npm takes it: NAME or @SCOPE/NAME, optionally @VERSION or
// @TAG or a range. Paths, URLs, git references and GitHub's USER/REPO shorthand are refused
// (they would read from the host or somewhere else than the registry), as is anything that npm
// could take for an option.
[[nodiscard]] absl::Status ValidateNpmSpec(const std::string& spec);

}  // namespace airlock

#endif  // AIRLOCK_IMAGE_NPM_SPEC_H_
