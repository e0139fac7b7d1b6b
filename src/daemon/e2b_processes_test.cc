// E2bProcesses over a SessionManager of fake VMs (src/testing/fake_vm.h, whose `cat` echoes its
// stdin at its end): a command outlives its watchers, takes input by pid, is watched again,
// signalled, listed while it runs and remembered a while after it ends.
#include "src/daemon/e2b_processes.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <string>

#include "src/daemon/session_manager_testing.h"
#include "src/testing/fake_vm.h"
#include "src/testing/test_util.h"

namespace airlock {
namespace {

namespace e2b = gateway::e2b;

const Principal kOwner{.uid = 1001, .gid = 1001, .api_key = "ci"};

class E2bProcessesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tar = dir_.File("rootfs.tar");
    testing::WriteTar(tar, {{.name = "etc/hostname", .data = "base\n"}});
    home_ = std::make_unique<FakeVmHome>(dir_.path(), kOwner, "base:1", tar);
    ASSERT_NE(home_->store, nullptr);
    sessions_ =
        std::make_unique<SessionManager>(SessionManagerOptions{.store = home_->store.get(),
                                                               .paths = home_->paths,
                                                               .hosts = &host_,
                                                               .pool = {.max_per_kind = 0}});
    ASSERT_TRUE(sessions_->Recover().ok());
    absl::StatusOr<SessionLimits> limits = SessionManager::ResolveLimits({});
    ASSERT_TRUE(limits.ok());
    absl::StatusOr<SessionRecord> made = sessions_->Create(kOwner, "base:1", *limits);
    ASSERT_TRUE(made.ok()) << made.status();
    id_ = made->id;
    runner_ = std::make_unique<ExecRunner>(sessions_.get(), home_->store.get(), &uploads_);
    processes_ = std::make_unique<E2bProcesses>(runner_.get());
  }
  void TearDown() override {
    processes_.reset();
    sessions_.reset();
  }

  std::unique_ptr<E2bProcesses::Watch> Start(std::string cmd, bool stdin) {
    E2bProcesses::StartSpec spec;
    spec.request.process.cmd = std::move(cmd);
    spec.request.stdin = stdin;
    absl::StatusOr<std::unique_ptr<E2bProcesses::Watch>> watch =
        processes_->Start(kOwner, id_, std::move(spec));
    EXPECT_TRUE(watch.ok()) << watch.status();
    return watch.ok() ? *std::move(watch) : nullptr;
  }
  // The events until the end: "out:TEXT", "err:TEXT", then "end:CODE:STATUS".
  static std::vector<std::string> Drain(E2bProcesses::Watch& watch) {
    std::vector<std::string> seen;
    for (;;) {
      std::optional<E2bProcessEvent> e = watch.Next(absl::Now() + absl::Seconds(10));
      if (!e) {
        seen.push_back("(no event in 10 s)");
        return seen;
      }
      if (e->end) {
        seen.push_back(absl::StrCat("end:", e->exit_code, ":", e->status));
        return seen;
      }
      seen.push_back(absl::StrCat(e->output == e2b::Output::kStderr ? "err:" : "out:", e->data));
    }
  }
  static e2b::Selector Pid(uint32_t pid) { return {.pid = pid, .tag = ""}; }

  testing::TempDir dir_;
  std::unique_ptr<FakeVmHome> home_;
  FakeVmDriver driver_;
  providers::LocalHost host_{&driver_, "test", providers::MachineCapacity()};
  std::unique_ptr<SessionManager> sessions_;
  WorkspaceUploads uploads_;
  std::unique_ptr<ExecRunner> runner_;
  std::unique_ptr<E2bProcesses> processes_;
  std::string id_;
};

TEST_F(E2bProcessesTest, ACommandOutlivesItsWatcherAndTakesInputByPid) {
  std::unique_ptr<E2bProcesses::Watch> first = Start("cat", /*stdin=*/true);
  ASSERT_NE(first, nullptr);
  uint32_t pid = first->pid();
  EXPECT_GE(pid, 1000u);
  first.reset();  // the client went away; the command runs on

  std::vector<e2b::ProcessInfo> listed = processes_->List(id_);
  ASSERT_EQ(listed.size(), 1u);
  EXPECT_EQ(listed[0].pid, pid);
  EXPECT_EQ(listed[0].config.cmd, "cat");

  absl::StatusOr<std::unique_ptr<E2bProcesses::Watch>> again = processes_->Connect(id_, Pid(pid));
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_TRUE(processes_->SendInput(id_, Pid(pid), "ping\n").ok());
  ASSERT_TRUE(processes_->CloseStdin(id_, Pid(pid)).ok());
  EXPECT_EQ(Drain(**again), (std::vector<std::string>{"out:ping\n", "end:0:exit status 0"}));

  // Ended: no longer listed, no more input, but a late watcher still learns how it ended.
  EXPECT_TRUE(processes_->List(id_).empty());
  EXPECT_EQ(processes_->SendInput(id_, Pid(pid), "x").code(),
            absl::StatusCode::kFailedPrecondition);
  absl::StatusOr<std::unique_ptr<E2bProcesses::Watch>> late = processes_->Connect(id_, Pid(pid));
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(Drain(**late), (std::vector<std::string>{"end:0:exit status 0"}));
}

TEST_F(E2bProcessesTest, ExitsAndSignalsAreReportedAsEnvdDoes) {
  std::unique_ptr<E2bProcesses::Watch> watch = Start("echo", false);
  ASSERT_NE(watch, nullptr);
  EXPECT_EQ(Drain(*watch), (std::vector<std::string>{"out:\n", "end:0:exit status 0"}));

  E2bProcesses::StartSpec failing;
  failing.request.process = {.cmd = "exit", .args = {"3"}, .envs = {}, .cwd = std::nullopt};
  failing.request.stdin = false;  // the fake guest runs a command with stdin at its end
  absl::StatusOr<std::unique_ptr<E2bProcesses::Watch>> exits =
      processes_->Start(kOwner, id_, failing);
  ASSERT_TRUE(exits.ok()) << exits.status();
  EXPECT_EQ(Drain(**exits), (std::vector<std::string>{"end:3:exit status 3"}));

  std::unique_ptr<E2bProcesses::Watch> cat = Start("cat", /*stdin=*/true);
  ASSERT_NE(cat, nullptr);
  ASSERT_TRUE(processes_->Signal(id_, Pid(cat->pid()), SIGKILL).ok());
  EXPECT_EQ(Drain(*cat), (std::vector<std::string>{"end:-1:signal: killed"}));
}

TEST_F(E2bProcessesTest, WhatIsNotThereOrNotAllowedIsSaid) {
  EXPECT_EQ(processes_->SendInput(id_, Pid(4242), "x").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(processes_->Connect(id_, {.pid = std::nullopt, .tag = "web"}).status().code(),
            absl::StatusCode::kNotFound);
  std::unique_ptr<E2bProcesses::Watch> no_input = Start("cat", /*stdin=*/false);
  ASSERT_NE(no_input, nullptr);
  absl::Status refused = processes_->SendInput(id_, Pid(no_input->pid()), "x");
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("without stdin"), absl::string_view::npos) << refused;
  EXPECT_EQ(processes_->Resize(id_, Pid(no_input->pid()), 24, 80).code(),
            absl::StatusCode::kFailedPrecondition);
  // Another session's processes are not this one's.
  EXPECT_EQ(processes_->Connect("0123456789ab", Pid(no_input->pid())).status().code(),
            absl::StatusCode::kNotFound);
  // A stop kills what runs; later starts are refused.
  processes_->Stop();
  E2bProcesses::StartSpec spec;
  spec.request.process.cmd = "echo";
  EXPECT_EQ(processes_->Start(kOwner, id_, spec).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace airlock
