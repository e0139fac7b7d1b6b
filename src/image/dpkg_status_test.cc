#include "src/image/dpkg_status.h"

#include <gtest/gtest.h>

namespace airlock {
namespace {

TEST(DpkgStatusTest, InstalledPackagesAreReadWithTheirVersions) {
  std::map<std::string, std::string> packages = InstalledDebianPackages(
      "Package: jq\n"
      "Status: install ok installed\n"
      "Priority: optional\n"
      "Version: 1.6-2.1\n"
      "Description: lightweight and flexible command-line JSON processor\n"
      " jq is like sed for JSON data\n"
      " .\n"
      "\n"
      "Package: removed\n"
      "Status: deinstall ok config-files\n"
      "Version: 1.0\n"
      "\r\n"
      "Package: python3\r\n"
      "Status: install ok installed\r\n"
      "Version: 3.11.2-1+b1\r\n"
      "\n\n"
      "Package: no-version\n"
      "Status: install ok installed\n"
      "\n"
      "garbage line\n"
      "Package: git\n"
      "Version: 1:2.39.5-0+deb12u2\n"
      "Status: install ok installed");
  std::map<std::string, std::string> expected = {
      {"git", "1:2.39.5-0+deb12u2"}, {"jq", "1.6-2.1"}, {"python3", "3.11.2-1+b1"}};
  EXPECT_EQ(packages, expected);
  EXPECT_TRUE(InstalledDebianPackages("").empty());
}

}  // namespace
}  // namespace airlock
