// The guest agent through the host library, on one real VM booted once for the whole suite:
// several commands in the same guest, signals, files, metrics and orphan reaping.
#include <gtest/gtest.h>

#include <memory>

#include "src/common/host_paths.h"
#include "src/image/image_store.h"
#include "src/vm/qemu_driver.h"
#include "src/vm/vm_launcher.h"

namespace airlock {
namespace {

struct Output {
  std::string out, err;
  ExitKind kind = ExitKind::kFailed;
  int code = -1;
};

class AgentTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    HostPaths paths = DefaultHostPaths();
    absl::StatusOr<ImageInfo> image = ImageStore(paths.images).Resolve(kDefaultImage);
    ASSERT_TRUE(image.ok()) << image.status();
    driver_ = new QemuDriver(paths.qemu);
    absl::StatusOr<LaunchedVm> vm = LaunchVm(*driver_, paths, *image, {.hostname = "agent-test"});
    ASSERT_TRUE(vm.ok()) << vm.status();
    vm_ = vm->vm.release();
  }
  static void TearDownTestSuite() {
    delete vm_;
    delete driver_;
  }

  static Output Exec(std::vector<std::string> argv, const std::string& input = "") {
    Output o;
    auto stream = vm_->channel().StartExec({.argv = std::move(argv), .stdin = !input.empty()});
    EXPECT_TRUE(stream.ok()) << stream.status();
    if (!stream.ok()) return o;
    if (!input.empty()) {
      // A command may end before reading all of its input; then the rest is refused.
      if ((*stream)->WriteStdin(input).ok()) (*stream)->CloseStdin().IgnoreError();
    }
    for (;;) {
      absl::StatusOr<ExecEvent> e = (*stream)->Next(absl::Now() + absl::Seconds(60));
      EXPECT_TRUE(e.ok()) << e.status();
      if (!e.ok()) return o;
      if (e->type == ExecEvent::Type::kStdout) o.out += e->data;
      if (e->type == ExecEvent::Type::kStderr) o.err += e->data;
      if (e->type == ExecEvent::Type::kExit) {
        o.kind = e->exit_kind;
        o.code = e->code;
        return o;
      }
    }
  }

  static QemuDriver* driver_;
  static Vm* vm_;
};
QemuDriver* AgentTest::driver_ = nullptr;
Vm* AgentTest::vm_ = nullptr;

TEST_F(AgentTest, StateLastsAcrossCommandsInOneVm) {
  EXPECT_EQ(Exec({"sh", "-c", "echo kept > /root/state"}).code, 0);
  Output o = Exec({"cat", "/root/state"});
  EXPECT_EQ(o.out, "kept\n");
  EXPECT_EQ(Exec({"hostname"}).out, "agent-test\n");
}

TEST_F(AgentTest, SignalsReachTheCommandsProcessGroup) {
  auto stream = vm_->channel().StartExec({.argv = {"sh", "-c", "echo up; sleep 300"}});
  ASSERT_TRUE(stream.ok());
  absl::StatusOr<ExecEvent> up = (*stream)->Next(absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(up.ok());
  EXPECT_EQ(up->data, "up\n");
  ASSERT_TRUE((*stream)->Signal(9).ok());
  absl::StatusOr<ExecEvent> exit = (*stream)->Next(absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->exit_kind, ExitKind::kSignaled);
  EXPECT_EQ(exit->code, 9);
}

TEST_F(AgentTest, WritesAndReadsFiles) {
  absl::Time deadline = absl::Now() + absl::Seconds(30);
  std::string content(300000, 'f');  // several frames and windows
  ASSERT_TRUE(vm_->channel().WriteFile("/work/dir/data.txt", 0600, content, deadline).ok());
  EXPECT_EQ(Exec({"stat", "-c", "%a %s", "/work/dir/data.txt"}).out, "600 300000\n");
  absl::StatusOr<std::string> back =
      vm_->channel().ReadFile("/work/dir/data.txt", 1 << 20, deadline);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, content);
  absl::StatusOr<std::string> missing = vm_->channel().ReadFile("/nope", 100, deadline);
  EXPECT_TRUE(absl::IsNotFound(missing.status())) << missing.status();
  absl::StatusOr<std::string> too_big = vm_->channel().ReadFile("/work/dir/data.txt", 10, deadline);
  EXPECT_FALSE(too_big.ok());
  EXPECT_FALSE(vm_->channel().WriteFile("relative", 0644, "x", deadline).ok());
}

TEST_F(AgentTest, ReportsMetrics) {
  absl::StatusOr<GuestMetrics> m = vm_->channel().Metrics(absl::Now() + absl::Seconds(30));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_GT(m->memory_total_bytes, 256ull << 20);
  EXPECT_GT(m->memory_available_bytes, 0u);
  EXPECT_GE(m->processes, 1u);
  EXPECT_EQ(m->vcpus, 1u);
  EXPECT_GT(m->disk_total_bytes, 512ull << 20);
  EXPECT_GT(m->cpu_total_ticks, 0u);
}

TEST_F(AgentTest, ReapsOrphansAndSurvivesMisbehavingChildren) {
  // Orphans re-parented to PID 1 must not stay zombies.
  EXPECT_EQ(Exec({"sh", "-c", "for i in 1 2 3 4 5; do (sleep 0.1 &) ; done"}).code, 0);
  Output zombies =
      Exec({"sh", "-c", "sleep 1; grep -l '^State:.*Z' /proc/[0-9]*/status 2>/dev/null | wc -l"});
  EXPECT_EQ(zombies.out, "0\n");
  // A child that closes its output early, floods, or exits without reading stdin.
  EXPECT_EQ(Exec({"sh", "-c", "exec >&- 2>&-; sleep 0.1; exit 4"}).code, 4);
  EXPECT_EQ(Exec({"sh", "-c", "head -c 5000000 /dev/zero"}).out.size(), 5000000u);
  EXPECT_EQ(Exec({"true"}, std::string(1 << 20, 'i')).code, 0);
  EXPECT_EQ(Exec({"echo", "still serving"}).out, "still serving\n");
}

}  // namespace
}  // namespace airlock
