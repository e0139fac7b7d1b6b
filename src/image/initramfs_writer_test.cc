#include "src/image/initramfs_writer.h"

#include <gtest/gtest.h>

namespace airlock {
namespace {

TEST(InitramfsWriterTest, HoldsOnlyTheAgentAndTheNodesTheKernelNeeds) {
  std::string archive = BuildInitramfs("AGENT");
  EXPECT_EQ(archive.substr(0, 6), "070701");
  EXPECT_EQ(archive.size() % 4, 0u);
  EXPECT_NE(archive.find("init"), std::string::npos);
  EXPECT_NE(archive.find("dev/console"), std::string::npos);
  EXPECT_NE(archive.find("AGENT"), std::string::npos);
  EXPECT_NE(archive.find("TRAILER!!!"), std::string::npos);
  EXPECT_EQ(archive.find("bin/sh"), std::string::npos);
}

}  // namespace
}  // namespace airlock
