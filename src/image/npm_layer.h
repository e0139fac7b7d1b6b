// npm packages for images (`airlock image build --npm SPEC`): fetched on the host by the host's
// own npm with --ignore-scripts, so that no package's code runs on the host, into an empty
// prefix that becomes a layer holding usr/local. Their install scripts run later, inside a
// build VM (src/daemon/image_builds.cc).
#ifndef AIRLOCK_IMAGE_NPM_LAYER_H_
#define AIRLOCK_IMAGE_NPM_LAYER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace airlock {

struct NpmFetchOptions {
  // true: npm gets this process's environment, and so the settings of whoever runs it (a
  // registry mirror, credentials in ~/.npmrc, proxies). false: only PATH, the proxy and CA
  // variables, and an empty HOME, so that no ~/.npmrc (no one's credentials) is read; the
  // host's global npmrc still applies.
  bool own_settings = true;
  // Asked while npm runs (ProcessOptions::cancelled): true kills it.
  std::function<bool()> cancelled;
};

// Installs specs globally into a new prefix with the host's npm (`npm install --global
// --ignore-scripts`; its cache in cache_dir/npm-cache) and writes out_tar: usr/local/... with
// what npm put there (packages under lib/node_modules, their commands as links in bin).
// CANCELLED when options.cancelled said so.
[[nodiscard]] absl::Status FetchNpmLayer(const std::vector<std::string>& specs,
                                         const std::string& cache_dir, const std::string& out_tar,
                                         const NpmFetchOptions& options = {});

// Writes dir's tree into a new tar at out_tar with every path under prefix (e.g. "usr/local"):
// no link followed, owners root.
[[nodiscard]] absl::Status TarDirectory(const std::string& dir, const std::string& prefix,
                                        const std::string& out_tar);

}  // namespace airlock

#endif  // AIRLOCK_IMAGE_NPM_LAYER_H_
