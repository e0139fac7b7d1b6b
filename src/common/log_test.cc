#include "src/common/log.h"

#include <gtest/gtest.h>
#include <stdio.h>
#include <unistd.h>

#include <algorithm>
#include <string>

namespace airlock {
namespace {

// What the log writes while `write` runs (stderr goes to a file meanwhile).
template <typename Write>
std::string Captured(Write write) {
  FILE* file = tmpfile();
  int saved = dup(STDERR_FILENO);
  dup2(fileno(file), STDERR_FILENO);
  write();
  dup2(saved, STDERR_FILENO);
  close(saved);
  std::string out;
  rewind(file);
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof(buf), file)) > 0;) out.append(buf, n);
  fclose(file);
  return out;
}

TEST(DaemonLogTest, LevelsFilterAndEveryEventIsOneLine) {
  EXPECT_EQ(ParseLogLevel("warning"), LogLevel::kWarning);
  EXPECT_EQ(ParseLogLevel("warn"), LogLevel::kWarning);
  EXPECT_EQ(ParseLogLevel("debug"), LogLevel::kDebug);
  EXPECT_FALSE(ParseLogLevel("loud").has_value());
  SetLogLevel(LogLevel::kWarning);
  std::string out = Captured([] {
    LogInfo("not shown");
    LogWarning("image pull of evil\nERROR forged not audited");
    LogIfFailed(absl::OkStatus(), "nothing to say");
    LogIfFailed(absl::UnavailableError("disk full"), "session 0123456789ab: files not removed");
  });
  SetLogLevel(LogLevel::kInfo);
  EXPECT_EQ(out.find("not shown"), std::string::npos) << out;
  EXPECT_EQ(out.find("nothing to say"), std::string::npos) << out;
  EXPECT_NE(out.find("Z WARN image pull of evil\\x0aERROR forged not audited\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("Z WARN session 0123456789ab: files not removed: disk full\n"),
            std::string::npos)
      << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2) << out;
}

}  // namespace
}  // namespace airlock
