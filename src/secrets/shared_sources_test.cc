#include "src/secrets/shared_sources.h"

#include <gtest/gtest.h>

namespace airlock::secrets {
namespace {

constexpr char kFile[] =
    "# shared with two tenants\n"
    "github op://Eng/github/token@api.github.com,uploads.github.com uid:1000 uid:1001\n"
    "\n"
    "registry  env:REGISTRY_TOKEN@registry.test?header=x-registry-token&body  *  # everyone\n";

SecretSpec Spec(const std::string& text) {
  absl::StatusOr<SecretSpec> spec = ParseSecretSpec(text);
  EXPECT_TRUE(spec.ok()) << spec.status();
  return spec.ok() ? *spec : SecretSpec{};
}

TEST(SharedSourcesTest, ATenantGetsOnlyWhatItsLineShares) {
  absl::StatusOr<SharedSources> shared = SharedSources::Parse(kFile);
  ASSERT_TRUE(shared.ok()) << shared.status();
  ASSERT_NE(shared->Find("github", "uid:1001"), nullptr);
  EXPECT_EQ(shared->Find("github", "uid:1001")->spec.source, "op://Eng/github/token");
  EXPECT_EQ(shared->Find("github", "uid:2000"), nullptr);
  EXPECT_NE(shared->Find("registry", "oidc:https://idp.test#bob"), nullptr);

  absl::StatusOr<SecretSpec> granted =
      shared->Grant(Spec("GH=shared:github@api.github.com"), "uid:1000");
  ASSERT_TRUE(granted.ok()) << granted.status();
  EXPECT_EQ(granted->source, "shared:github");  // the tenant never sees the operator's reference
  EXPECT_EQ(granted->hosts, std::vector<std::string>{"api.github.com"});
  EXPECT_TRUE(granted->headers.empty());

  // Not shared with this tenant, or not there at all: the same words.
  absl::StatusOr<SecretSpec> other =
      shared->Grant(Spec("GH=shared:github@api.github.com"), "uid:7");
  absl::StatusOr<SecretSpec> missing =
      shared->Grant(Spec("GH=shared:nope@api.github.com"), "uid:7");
  EXPECT_EQ(other.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(other.status().message().find("--shared-secrets"), std::string::npos);

  // Hosts, bodies and headers stay within the line.
  EXPECT_EQ(shared->Grant(Spec("GH=shared:github@evil.test"), "uid:1000").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(shared->Grant(Spec("GH=shared:github@api.github.com?body"), "uid:1000").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(shared->Grant(Spec("GH=shared:github@api.github.com?header=cookie"), "uid:1000")
                .status()
                .code(),
            absl::StatusCode::kPermissionDenied);
  // No options: the line's.
  granted = shared->Grant(Spec("R=shared:registry@registry.test"), "uid:5");
  ASSERT_TRUE(granted.ok()) << granted.status();
  EXPECT_EQ(granted->headers, std::vector<std::string>{"x-registry-token"});
  EXPECT_TRUE(granted->body);
}

TEST(SharedSourcesTest, BadLinesAreNamed) {
  for (const char* text :
       {"github op://Eng/github/token@api.github.com\n", "bad/name env:X@a.test *\n",
        "a env:X@a.test *\na env:Y@a.test *\n", "a shared:b@a.test *\n", "a env:X *\n"}) {
    absl::StatusOr<SharedSources> shared = SharedSources::Parse(text);
    EXPECT_FALSE(shared.ok()) << text;
    EXPECT_NE(shared.status().message().find("line "), std::string::npos) << shared.status();
  }
  EXPECT_TRUE(SharedSources::Parse("# nothing shared\n\n").ok());
}

}  // namespace
}  // namespace airlock::secrets
