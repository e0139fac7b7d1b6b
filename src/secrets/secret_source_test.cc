#include "src/secrets/secret_source.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace airlock::secrets {
namespace {

// A directory with a fake `op` in it: a script that behaves as the test needs.
class FakeOp {
 public:
  explicit FakeOp(const std::string& script) {
    char dir[] = "/tmp/airlock-fakeop-XXXXXX";
    dir_ = mkdtemp(dir);
    std::string op = dir_ + "/op";
    std::ofstream(op) << "#!/bin/sh\n" << script << "\n";
    chmod(op.c_str(), 0755);
  }
  ~FakeOp() {
    unlink((dir_ + "/op").c_str());
    rmdir(dir_.c_str());
  }
  absl::StatusOr<std::string> Resolve(const std::string& ref, absl::Duration timeout) {
    OnePasswordSource source(dir_ + ":/bin:/usr/bin", {"HOME=/root"}, timeout);
    return source.Resolve(*ParseSecretSpec("K=" + ref + "@api.test"));
  }

 private:
  std::string dir_;
};

TEST(OnePasswordSourceTest, ReadsTheValueOpPrints) {
  FakeOp op(R"([ "$1" = read ] && [ "$2" = op://vault/item/field ] && printf 'tok-123\n')");
  absl::StatusOr<std::string> v = op.Resolve("op://vault/item/field", absl::Seconds(10));
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, "tok-123");
}

TEST(OnePasswordSourceTest, FailsClosedWithOpsComplaintATimeoutOrGarbage) {
  {
    FakeOp op("echo '[ERROR] 2026/11/30 not signed in' >&2; exit 1");
    absl::StatusOr<std::string> v = op.Resolve("op://v/i/f", absl::Seconds(10));
    ASSERT_FALSE(v.ok());
    EXPECT_NE(v.status().message().find("not signed in"), std::string::npos) << v.status();
  }
  {
    FakeOp op("sleep 30");
    absl::StatusOr<std::string> v = op.Resolve("op://v/i/f", absl::Milliseconds(300));
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.status().code(), absl::StatusCode::kDeadlineExceeded) << v.status();
  }
  {
    FakeOp op("printf 'line one\\nline two\\n'");
    absl::StatusOr<std::string> v = op.Resolve("op://v/i/f", absl::Seconds(10));
    ASSERT_FALSE(v.ok());
    EXPECT_NE(v.status().message().find("line break"), std::string::npos) << v.status();
  }
  {
    OnePasswordSource source("/nonexistent", {}, absl::Seconds(1));
    absl::StatusOr<std::string> v = source.Resolve(*ParseSecretSpec("K=op://v/i/f@api.test"));
    ASSERT_FALSE(v.ok());
    EXPECT_NE(v.status().message().find("is not on the PATH"), std::string::npos);
  }
}

TEST(ReadLocalSecretTest, ReadsEnvAndFilesAndWarnsAboutOpenFiles) {
  setenv("AIRLOCK_TEST_SECRET", "from-env", 1);
  std::string warning;
  EXPECT_EQ(*ReadLocalSecret(*ParseSecretSpec("K=env:AIRLOCK_TEST_SECRET@a.test"), &warning),
            "from-env");
  EXPECT_FALSE(
      ReadLocalSecret(*ParseSecretSpec("K=env:AIRLOCK_TEST_UNSET_X@a.test"), &warning).ok());

  char path[] = "/tmp/airlock-secret-XXXXXX";
  close(mkstemp(path));
  std::ofstream(path) << "from-file\n";
  chmod(path, 0600);
  SecretSpec spec = *ParseSecretSpec(std::string("K=file:") + path + "@a.test");
  EXPECT_EQ(*ReadLocalSecret(spec, &warning), "from-file");
  EXPECT_EQ(warning, "");
  chmod(path, 0644);
  EXPECT_EQ(*ReadLocalSecret(spec, &warning), "from-file");
  EXPECT_NE(warning.find("chmod 600"), std::string::npos) << warning;
  unlink(path);
  absl::StatusOr<std::string> missing = ReadLocalSecret(spec, &warning);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
}

TEST(PlaceholderTest, IsMarkedRandomAndAsLongAsALongValue) {
  std::string a = MakePlaceholder(10), b = MakePlaceholder(10);
  EXPECT_EQ(a.rfind("AIRLOCK_PLACEHOLDER_", 0), 0u);
  EXPECT_EQ(a.size(), 45u);
  EXPECT_NE(a, b);
  EXPECT_EQ(MakePlaceholder(164).size(), 164u);
  for (char c : MakePlaceholder(100))
    EXPECT_TRUE(isalnum(static_cast<unsigned char>(c)) || c == '_');
}

}  // namespace
}  // namespace airlock::secrets
