#include "src/net/public_suffix.h"

#include <gtest/gtest.h>
#include <unistd.h>

namespace airlock::net {
namespace {

TEST(PublicSuffixTest, RulesWildcardsAndExceptions) {
  const std::string list =
      "// comment\n"
      "uk\nco.uk\n\n*.ck\n!www.ck\ngithub.io  trailing words\n";
  for (const char* suffix : {"uk", "co.uk", "anything.ck", "github.io", "com"}) {
    EXPECT_TRUE(IsPublicSuffixIn(list, suffix)) << suffix;
  }
  for (const char* domain :
       {"example.co.uk", "www.ck", "ck.example", "user.github.io", "a.anything.ck"}) {
    EXPECT_FALSE(IsPublicSuffixIn(list, domain)) << domain;
  }
}

TEST(PublicSuffixTest, DebiansListIsRead) {
  if (access(kPublicSuffixList, R_OK) != 0) GTEST_SKIP() << "no " << kPublicSuffixList;
  EXPECT_TRUE(IsPublicSuffix("co.uk"));
  EXPECT_TRUE(IsPublicSuffix("github.io"));
  EXPECT_FALSE(IsPublicSuffix("example.co.uk"));
  EXPECT_FALSE(IsPublicSuffix("pythonhosted.org"));
}

}  // namespace
}  // namespace airlock::net
