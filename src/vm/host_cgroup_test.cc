#include "src/vm/host_cgroup.h"

#include <gtest/gtest.h>

namespace airlock {
namespace {

TEST(HostCgroupTest, OomKillsAreReadFromEitherCgroupVersion) {
  // cgroup v2's memory.events and v1's memory.oom_control, as the kernel writes them.
  EXPECT_EQ(OomKillsIn("low 0\nhigh 0\nmax 212\noom 3\noom_kill 2\noom_group_kill 0\n"), 2u);
  EXPECT_EQ(OomKillsIn("oom_kill_disable 0\nunder_oom 0\noom_kill 1\n"), 1u);
  EXPECT_EQ(OomKillsIn("low 0\nhigh 0\nmax 0\noom 0\n"), 0u);  // an older kernel: no line
  EXPECT_EQ(OomKillsIn(""), 0u);
  EXPECT_EQ(OomKillsIn("oom_kill lots\n"), 0u);
}

}  // namespace
}  // namespace airlock
