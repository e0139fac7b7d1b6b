#include "src/vm/host_cgroup.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

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

// A VM of a session that is still going away (its object held a moment longer) keeps its
// cgroup, and the session's new VM gets one of its own: the old one's removal never takes the
// new one's.
TEST(HostCgroupTest, ASecondCgroupOfTheSameNameIsAnotherAndOutlivesTheFirst) {
  if (geteuid() != 0) GTEST_SKIP() << "host cgroups need root";
  std::string name = absl::StrCat("airlock-cgroup-test-", getpid());
  absl::StatusOr<std::unique_ptr<HostCgroup>> first =
      HostCgroup::Create(name, {.memory_bytes = 64 << 20});
  if (absl::IsFailedPrecondition(first.status())) GTEST_SKIP() << first.status();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ((*first)->name(), name);
  absl::StatusOr<std::unique_ptr<HostCgroup>> second =
      HostCgroup::Create(name, {.memory_bytes = 64 << 20});
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->name(), name + ".1");
  // A pooled VM's cgroup renamed to a name in use takes the next free one.
  absl::StatusOr<std::unique_ptr<HostCgroup>> third =
      HostCgroup::Create(name + "-pool", {.memory_bytes = 64 << 20});
  ASSERT_TRUE(third.ok()) << third.status();
  ASSERT_TRUE((*third)->Rename(name).ok());
  EXPECT_EQ((*third)->name(), name + ".2");
  std::vector<std::string> dirs = (*second)->dirs();
  ASSERT_FALSE(dirs.empty());
  first->reset();
  for (const std::string& dir : dirs) EXPECT_EQ(access(dir.c_str(), F_OK), 0) << dir;
  third->reset();
  second->reset();
  for (const std::string& dir : dirs) EXPECT_NE(access(dir.c_str(), F_OK), 0) << dir;
}

}  // namespace
}  // namespace airlock
