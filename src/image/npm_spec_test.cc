#include "src/image/npm_spec.h"

#include <gtest/gtest.h>

namespace airlock {
namespace {

TEST(NpmSpecTest, PackagesOfTheRegistryOnly) {
  for (const char* ok :
       {"typescript", "opencode-ai@1.18.33", "@anthropic-ai/claude-code",
        "@anthropic-ai/claude-code@2.1.197", "lodash@^4.17.0", "left-pad@latest", "semver@>=7"}) {
    EXPECT_TRUE(ValidateNpmSpec(ok).ok()) << ok << ": " << ValidateNpmSpec(ok);
  }
  // What npm would fetch from elsewhere: GitHub's shorthand, git, URLs, paths, an option.
  for (const char* elsewhere :
       {"expressjs/express", "evil/pkg@1.0.0", "@scope/name/extra", "@scope", "name@user/repo",
        "github:user/repo", "git+https://example.com/r.git", "https://example.com/p.tgz",
        "file:../x", "./local", "../up", "/abs", "--registry=http://evil", "a b", ""}) {
    absl::Status s = ValidateNpmSpec(elsewhere);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << elsewhere;
  }
  EXPECT_NE(ValidateNpmSpec("expressjs/express").message().find("GitHub repository"),
            absl::string_view::npos);
}

}  // namespace
}  // namespace airlock
