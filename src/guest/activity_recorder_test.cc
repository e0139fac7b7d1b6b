#include "src/guest/activity_recorder.h"

#include <gtest/gtest.h>
#include <time.h>

#include <string>
#include <vector>

namespace airlock::guest {
namespace {

TEST(ActivityRecorderTest, KeepsFilesUnderTheWorkspaceAndHomesOnly) {
  EXPECT_TRUE(IsRecordedPath("/workspace"));
  EXPECT_TRUE(IsRecordedPath("/workspace/src/app.py"));
  EXPECT_TRUE(IsRecordedPath("/root/.bashrc"));
  EXPECT_TRUE(IsRecordedPath("/home/user/notes"));
  EXPECT_FALSE(IsRecordedPath("/workspaces/x"));
  EXPECT_FALSE(IsRecordedPath("/usr/lib/python3/os.py"));
  EXPECT_FALSE(IsRecordedPath("/rootfs"));
  EXPECT_FALSE(IsRecordedPath(""));
}

TEST(ActivityRecorderTest, MapsTheSessionDisksLayersToTheGuestsPaths) {
  EXPECT_EQ(GuestPathOfLayer("/upper"), "/");
  EXPECT_EQ(GuestPathOfLayer("/upper/root/x"), "/root/x");
  EXPECT_EQ(GuestPathOfLayer("/workspace/upper"), "/workspace");
  EXPECT_EQ(GuestPathOfLayer("/workspace/upper/src/a.py"), "/workspace/src/a.py");
  // Overlayfs's work directories, and anything else on the disk, are no one's files.
  EXPECT_EQ(GuestPathOfLayer("/work/#1f"), "");
  EXPECT_EQ(GuestPathOfLayer("/workspace/work/index"), "");
  EXPECT_EQ(GuestPathOfLayer("/uppers/x"), "");
}

ActivityRecord Write(const std::string& path) {
  return ActivityRecord{.kind = ActivityKind::kWrite, .pid = 7, .process = "sh", .path = path};
}

uint64_t NowMicros() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<uint64_t>(t.tv_sec) * 1000000 + t.tv_nsec / 1000;
}

TEST(ActivityRecorderTest, RecordsWaitForTheHostUntilDueAndLeaveWhole) {
  ActivityRecorder recorder;
  EXPECT_EQ(recorder.MillisUntilDue(NowMicros()), -1);
  recorder.Add(Write("/workspace/a"));
  recorder.Add(Write("/workspace/b"));
  int due = recorder.MillisUntilDue(NowMicros());
  EXPECT_GT(due, 0);  // a second after the first, at the most
  EXPECT_LE(due, static_cast<int>(kActivityBatchMicros / 1000) + 1);
  std::string one = EncodeActivityRecord(Write("/workspace/a"));
  // Only whole records, and none when not even one fits.
  EXPECT_EQ(recorder.Take(one.size() - 1), "");
  std::string first = recorder.Take(one.size() + 3);
  std::vector<ActivityRecord> records;
  std::string error;
  ASSERT_TRUE(DecodeActivityRecords(first, &records, &error)) << error;
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].path, "/workspace/a");
  ASSERT_TRUE(DecodeActivityRecords(recorder.Take(1 << 20), &records, &error)) << error;
  ASSERT_EQ(records.size(), 1u);
  EXPECT_EQ(records[0].path, "/workspace/b");
  EXPECT_EQ(recorder.MillisUntilDue(NowMicros()), -1);
}

TEST(ActivityRecorderTest, ABacklogTheHostDoesNotTakeIsBoundedAndTheLossIsSaid) {
  ActivityRecorder recorder;
  std::string long_path = "/workspace/" + std::string(4000, 'x');
  size_t added = 0;
  for (; added < 2 * kMaxActivityBacklog / long_path.size(); ++added) {
    recorder.Add(Write(long_path));
  }
  EXPECT_EQ(recorder.MillisUntilDue(NowMicros()), 0);  // over the batch size: due at once
  size_t writes = 0;
  int64_t lost = 0;
  for (std::string batch; !(batch = recorder.Take(1 << 20)).empty();) {
    std::vector<ActivityRecord> records;
    std::string error;
    ASSERT_TRUE(DecodeActivityRecords(batch, &records, &error)) << error;
    for (const ActivityRecord& r : records) {
      if (r.kind == ActivityKind::kWrite) ++writes;
      if (r.kind == ActivityKind::kLost) lost += r.code;
    }
  }
  EXPECT_LT(writes * long_path.size(), kMaxActivityBacklog);
  EXPECT_GT(writes, 0u);
  EXPECT_EQ(writes + static_cast<size_t>(lost), added);
}

}  // namespace
}  // namespace airlock::guest
