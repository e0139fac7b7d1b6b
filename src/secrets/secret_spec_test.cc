#include "src/secrets/secret_spec.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace airlock::secrets {
namespace {

TEST(SecretSpecTest, ReadsEachSourceAndItsHosts) {
  absl::StatusOr<SecretSpec> s =
      ParseSecretSpec("OPENAI_API_KEY=env:OPENAI_API_KEY@api.openai.com");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->name, "OPENAI_API_KEY");
  EXPECT_EQ(s->kind(), SourceKind::kEnv);
  EXPECT_EQ(s->reference(), "OPENAI_API_KEY");
  EXPECT_EQ(s->hosts, std::vector<std::string>{"api.openai.com"});
  EXPECT_FALSE(s->body);

  s = ParseSecretSpec("GH_TOKEN=op://Engineering/github/token@API.github.com,uploads.github.com");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kind(), SourceKind::kOnePassword);
  EXPECT_EQ(s->reference(), "op://Engineering/github/token");
  EXPECT_EQ(s->hosts, (std::vector<std::string>{"api.github.com", "uploads.github.com"}));
  EXPECT_EQ(FormatSecretSpec(*s),
            "GH_TOKEN=op://Engineering/github/token@api.github.com,uploads.github.com");

  s = ParseSecretSpec("GH_TOKEN=shared:github.ci@api.github.com");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kind(), SourceKind::kShared);
  EXPECT_EQ(s->reference(), "github.ci");
  EXPECT_FALSE(ParseSecretSpec("K=shared:@a.test").ok());
  EXPECT_FALSE(ParseSecretSpec("K=shared:a/b@a.test").ok());

  s = ParseSecretSpec("K=file:/run/keys/k@a.test?body");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->kind(), SourceKind::kFile);
  EXPECT_EQ(s->reference(), "/run/keys/k");
  EXPECT_TRUE(s->body);
  EXPECT_EQ(*ParseSecretSpec(FormatSecretSpec(*s)), *s);
  // Without header= options the value goes into the credential headers only.
  EXPECT_TRUE(s->headers.empty());
  std::vector<std::string> defaults = s->EffectiveHeaders();
  EXPECT_NE(std::find(defaults.begin(), defaults.end(), "authorization"), defaults.end());
  EXPECT_NE(std::find(defaults.begin(), defaults.end(), "x-api-key"), defaults.end());
  EXPECT_EQ(std::find(defaults.begin(), defaults.end(), "cookie"), defaults.end());

  s = ParseSecretSpec("S=env:S@app.test?header=Cookie&body&header=x-session&header=cookie");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->body);
  EXPECT_EQ(s->headers, (std::vector<std::string>{"cookie", "x-session"}));
  EXPECT_EQ(s->EffectiveHeaders(), s->headers);
  EXPECT_EQ(FormatSecretSpec(*s), "S=env:S@app.test?body&header=cookie&header=x-session");
  EXPECT_EQ(*ParseSecretSpec(FormatSecretSpec(*s)), *s);
}

TEST(SecretSpecTest, RefusesWhatCannotBeBoundAndShowsTheForm) {
  for (const char* bad : {"",
                          "NOEQUALS",
                          "1X=env:A@h.test",
                          "A-B=env:A@h.test",
                          "K=env:A",
                          "K=env:@h.test",
                          "K=env:A@",
                          "K=env:A@bad host",
                          "K=env:A@*.h.test",
                          "K=vault:x@h.test",
                          "K=op://vault@h.test",
                          "K=op://v//f@h.test",
                          "K=file:@h.test",
                          "K=env:A@h.test:443",
                          "K=env:A@h.test?",
                          "K=env:A@h.test?bodies",
                          "K=env:A@h.test?header=",
                          "K=env:A@h.test?body&body",
                          "K=env:A@h.test?header=a b",
                          "K=env:A@h.test?header=a:b"}) {
    absl::StatusOr<SecretSpec> s = ParseSecretSpec(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_NE(s.status().message().find("NAME=SOURCE@HOST"), std::string::npos) << s.status();
  }
}

}  // namespace
}  // namespace airlock::secrets
