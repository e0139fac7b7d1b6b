#include "src/guest/oom_report.h"

#include <gtest/gtest.h>

namespace airlock::guest {
namespace {

TEST(OomReportTest, KillsAreReadFromTheKernelLogSinceATime) {
  std::vector<std::string> records = {
      "6,100,1000000,-;Linux version 6.1",
      // Before the command started.
      "3,200,4000000,-;Out of memory: Killed process 40 (old) total-vm:1kB, anon-rss:1kB",
      "4,201,5000000,-;python3 invoked oom-killer: gfp_mask=0xcc0(GFP_KERNEL), order=0",
      "3,202,5000100,-;Memory cgroup out of memory: Killed process 123 (python3) "
      "total-vm:524288kB, anon-rss:400000kB, file-rss:0kB\n SUBSYSTEM=memory\n",
      // A name with ") " and a control byte in it, as a process may set its own.
      "3,203,5000200,c;Out of memory: Killed process 7 (a) b\x1b[2J) total-vm:1kB, UID:0",
      "not a record",
      "3,204,notanumber,-;Out of memory: Killed process 8 (x) total-vm:1kB",
      "3,205,6000000,-;Out of memory: Killed process (x) total-vm:1kB",
  };
  std::vector<OomKill> kills = OomKillsIn(records, 5000000);
  ASSERT_EQ(kills.size(), 2u);
  EXPECT_EQ(kills[0].pid, 123);
  EXPECT_EQ(kills[0].name, "python3");
  EXPECT_EQ(kills[1].pid, 7);
  EXPECT_EQ(kills[1].name, "a) b\x1b[2J");
  EXPECT_EQ(DescribeOomKills(kills),
            "out of memory in the guest: the kernel killed 123 (python3), 7 (a) b?[2J)");
  EXPECT_EQ(OomKillsIn(records, 0).size(), 3u);
  EXPECT_TRUE(OomKillsIn(records, 7000000).empty());
}

TEST(OomReportTest, AFewKillsAreNamedAndTheRestCounted) {
  EXPECT_EQ(DescribeOomKills({}), "");
  std::vector<OomKill> kills = {{1, "a"}, {2, "b"}, {3, "c"}, {4, "d"}, {5, "e"}};
  EXPECT_EQ(DescribeOomKills(kills),
            "out of memory in the guest: the kernel killed 1 (a), 2 (b), 3 (c) and 2 more");
}

}  // namespace
}  // namespace airlock::guest
