#include "src/daemon/exec_runner.h"

#include <gtest/gtest.h>

namespace airlock {
namespace {

TEST(ExecRunnerTest, LaterEnvironmentLayersOverrideKeyByKeyInFirstSeenOrder) {
  EXPECT_EQ(MergeEnv({{"PATH=/bin", "LANG=C", "HOME=/root"},
                      {"LANG=C.UTF-8", "TOKEN=placeholder"},
                      {"PATH=/opt/bin", "EMPTY="}}),
            (std::vector<std::string>{"PATH=/opt/bin", "LANG=C.UTF-8", "HOME=/root",
                                      "TOKEN=placeholder", "EMPTY="}));
  EXPECT_TRUE(MergeEnv({}).empty());
}

TEST(ExecRunnerTest, AStartIsCheckedBeforeAnythingRuns) {
  v1::ExecStart ok;
  ok.add_argv("true");
  EXPECT_TRUE(ValidateExecStart(ok).ok());

  v1::ExecStart bad_id = ok;
  bad_id.set_session_id("../etc");
  EXPECT_EQ(ValidateExecStart(bad_id).code(), absl::StatusCode::kInvalidArgument);

  v1::ExecStart huge = ok;
  huge.add_argv(std::string(64 << 10, 'x'));
  EXPECT_NE(ValidateExecStart(huge).message().find("48 KiB"), absl::string_view::npos);

  v1::ExecStart timeout = ok;
  timeout.set_timeout_seconds(-1);
  EXPECT_FALSE(ValidateExecStart(timeout).ok());

  v1::ExecStart window = ok;
  window.mutable_window()->set_rows(24);
  window.mutable_window()->set_cols(80);
  EXPECT_NE(ValidateExecStart(window).message().find("tty"), absl::string_view::npos);
  window.set_tty(true);
  EXPECT_TRUE(ValidateExecStart(window).ok());
  window.mutable_window()->set_rows(0);
  EXPECT_FALSE(ValidateExecStart(window).ok());

  v1::ExecStart mixed = ok;
  mixed.set_session_id("0123456789ab");
  mixed.set_image("python:3.11-slim");
  EXPECT_NE(ValidateExecStart(mixed).message().find("without a session"), absl::string_view::npos);

  // Detached: in a session, with neither input nor a terminal.
  v1::ExecStart detached = ok;
  detached.set_detach(true);
  EXPECT_NE(ValidateExecStart(detached).message().find("give its id"), absl::string_view::npos);
  detached.set_session_id("0123456789ab");
  EXPECT_TRUE(ValidateExecStart(detached).ok());
  detached.set_stdin(true);
  EXPECT_NE(ValidateExecStart(detached).message().find("leave out -i and -t"),
            absl::string_view::npos);
  detached.set_stdin(false);
  detached.set_tty(true);
  EXPECT_FALSE(ValidateExecStart(detached).ok());
}

}  // namespace
}  // namespace airlock
