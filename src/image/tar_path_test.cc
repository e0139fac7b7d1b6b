#include "src/image/tar_path.h"

#include <gtest/gtest.h>

namespace airlock {
namespace {

TEST(TarPathTest, CleansNames) {
  EXPECT_EQ(*CleanTarPath("./usr//bin/"), "usr/bin");
  EXPECT_EQ(*CleanTarPath("/etc/passwd"), "etc/passwd");
  EXPECT_EQ(*CleanTarPath("."), "");
  EXPECT_EQ(*CleanTarPath("./"), "");
  EXPECT_EQ(*CleanTarPath("a/./b"), "a/b");
}

TEST(TarPathTest, RefusesEscapesAndOversizedNames) {
  for (const char* bad : {"../etc/passwd", "a/../../b", "/..", "a/.."}) {
    absl::StatusOr<std::string> p = CleanTarPath(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_NE(p.status().message().find("escape"), absl::string_view::npos);
  }
  EXPECT_FALSE(CleanTarPath(std::string(300, 'x')).ok());
  EXPECT_FALSE(CleanTarPath(std::string(5000, '/')).ok());
  EXPECT_FALSE(CleanTarPath(std::string("a\0b", 3)).ok());
}

}  // namespace
}  // namespace airlock
