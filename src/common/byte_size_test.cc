#include "src/common/byte_size.h"

#include <gtest/gtest.h>

namespace airlock {
namespace {

TEST(ByteSizeTest, SizesAreReadAsPeopleWriteThem) {
  uint64_t n = 0;
  EXPECT_TRUE(ParseByteSize("512m", 1, &n));
  EXPECT_EQ(n, 512ull << 20);
  EXPECT_TRUE(ParseByteSize("2T", 1, &n));
  EXPECT_EQ(n, 2ull << 40);
  for (const char* same : {"3g", "3G", "3gb", "3gib", "3GiB", "3gi"}) {
    EXPECT_TRUE(ParseByteSize(same, 1, &n)) << same;
    EXPECT_EQ(n, 3ull << 30) << same;
  }
  EXPECT_TRUE(ParseByteSize("4096", 1, &n));
  EXPECT_EQ(n, 4096u);
  EXPECT_TRUE(ParseByteSize("64", 1ull << 20, &n));  // a plain number in the caller's unit
  EXPECT_EQ(n, 64ull << 20);
  EXPECT_TRUE(ParseByteSize("0", 1, &n));
  EXPECT_EQ(n, 0u);
  for (const char* bad : {"", "g", "12x", "-1", "1.5g", "512b", "99999999999999t", "m512"}) {
    EXPECT_FALSE(ParseByteSize(bad, 1, &n)) << bad;
  }
}

TEST(ByteSizeTest, SizesAreShownInBinaryUnits) {
  EXPECT_EQ(FormatBytes(100), "100B");
  EXPECT_EQ(FormatBytes(12 << 10), "12KiB");
  EXPECT_EQ(FormatBytes(512ull << 20), "512MiB");
  EXPECT_EQ(FormatBytes(3ull << 29), "1.5GiB");
}

}  // namespace
}  // namespace airlock
