#include "src/cli/mcp_policy.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "src/testing/test_util.h"

namespace airlock {
namespace {

McpPolicy Policy(const std::vector<std::string>& secrets, const std::vector<std::string>& allow,
                 const std::vector<std::string>& roots = {}) {
  absl::StatusOr<McpPolicy> policy = McpPolicy::Create(secrets, allow, roots);
  EXPECT_TRUE(policy.ok()) << policy.status();
  return policy.value_or(McpPolicy());
}

TEST(McpPolicyTest, NothingConfiguredAllowsNothingAndSaysWhichFlagToAdd) {
  McpPolicy none = Policy({}, {});
  absl::StatusOr<std::string> secret = none.Secret("GH_TOKEN");
  EXPECT_EQ(secret.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(secret.status().message().find("airlock mcp --secret"), absl::string_view::npos)
      << secret.status();
  absl::Status allow = none.CheckAllow("pypi.org");
  EXPECT_EQ(allow.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(allow.message().find("airlock mcp --allow pypi.org"), absl::string_view::npos) << allow;
  absl::StatusOr<std::string> workspace = none.Workspace("/");
  EXPECT_EQ(workspace.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(workspace.status().message().find("--workspace-root"), absl::string_view::npos);
}

TEST(McpPolicyTest, TheModelNamesConfiguredSecretsAndNeverASource) {
  McpPolicy policy = Policy({"GH_TOKEN=env:GH_TOKEN@api.github.com"}, {});
  absl::StatusOr<std::string> spec = policy.Secret("GH_TOKEN");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(*spec, "GH_TOKEN=env:GH_TOKEN@api.github.com");
  // What a prompt-injected model would try: its own source, its own host, another name.
  for (const char* asked :
       {"GH_TOKEN=env:GH_TOKEN@evil.example", "X=file:/root/.git-credentials@evil.example",
        "GH_TOKEN=env:AWS_SECRET_ACCESS_KEY@api.github.com", "OTHER"}) {
    EXPECT_EQ(policy.Secret(asked).status().code(), absl::StatusCode::kPermissionDenied) << asked;
  }
  EXPECT_EQ(policy.SecretNames(), std::vector<std::string>{"GH_TOKEN (to api.github.com)"});
}

TEST(McpPolicyTest, EgressStaysWithinTheConfiguredRulesAndTheSecretsHosts) {
  McpPolicy policy =
      Policy({"GH_TOKEN=env:GH_TOKEN@api.github.com"}, {"pypi.org", "*.pythonhosted.org"});
  EXPECT_TRUE(policy.CheckAllow("pypi.org").ok());
  EXPECT_TRUE(policy.CheckAllow("pypi.org:443").ok());
  EXPECT_TRUE(policy.CheckAllow("files.pythonhosted.org").ok());
  EXPECT_TRUE(policy.CheckAllow("api.github.com").ok());
  for (const char* wider :
       {"evil.example", "pypi.org:22", "*.pypi.org", "pypi.org/raw", "10.0.0.0/8", "github.com"}) {
    EXPECT_EQ(policy.CheckAllow(wider).code(), absl::StatusCode::kPermissionDenied) << wider;
  }
  EXPECT_EQ(policy.CheckAllow("*foo").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Policy({}, {"*"}).CheckAllow("anything.example").ok());
}

TEST(McpPolicyTest, WorkspacesOnlyUnderARootWithLinksFollowed) {
  testing::TempDir dir;
  std::string root = dir.File("projects"), outside = dir.File("secret");
  ASSERT_EQ(mkdir(root.c_str(), 0755), 0);
  ASSERT_EQ(mkdir((root + "/app").c_str(), 0755), 0);
  ASSERT_EQ(mkdir(outside.c_str(), 0755), 0);
  ASSERT_EQ(symlink(outside.c_str(), (root + "/escape").c_str()), 0);
  McpPolicy policy = Policy({}, {}, {root});
  absl::StatusOr<std::string> app = policy.Workspace(root + "/app/.");
  ASSERT_TRUE(app.ok()) << app.status();
  EXPECT_EQ(*app, root + "/app");
  EXPECT_TRUE(policy.Workspace(root).ok());
  EXPECT_EQ(policy.Workspace(outside).status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(policy.Workspace(root + "/escape").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(policy.Workspace(root + "/../secret").status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(policy.Workspace(root + "x").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(policy.Workspace(root + "/nosuch").status().code(), absl::StatusCode::kNotFound);
}

TEST(McpPolicyTest, TheModelAttachesOnlyOfferedVolumesAndReadOnlyWhereSaid) {
  absl::StatusOr<McpPolicy> policy = McpPolicy::Create({}, {}, {}, {"data:ro", "work"});
  ASSERT_TRUE(policy.ok()) << policy.status();
  EXPECT_TRUE(policy->CheckVolume("data", true).ok());
  EXPECT_TRUE(policy->CheckVolume("work", false).ok());
  absl::Status write = policy->CheckVolume("data", false);
  EXPECT_EQ(write.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(write.message().find("offered read-only"), absl::string_view::npos) << write;
  absl::Status other = policy->CheckVolume("secrets", true);
  EXPECT_EQ(other.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(other.message().find("(data (read-only), work)"), absl::string_view::npos) << other;
  EXPECT_NE(other.message().find("airlock mcp --volume"), absl::string_view::npos) << other;
  EXPECT_TRUE(policy->Offers("work"));
  EXPECT_FALSE(policy->Offers("secrets"));
  EXPECT_EQ(Policy({}, {}).CheckVolume("data", true).code(), absl::StatusCode::kPermissionDenied);
  for (const char* bad : {"", ":ro", "a:/x", "a/b"}) {
    EXPECT_FALSE(McpPolicy::Create({}, {}, {}, {bad}).ok()) << bad;
  }
}

TEST(McpPolicyTest, AMistakeInTheConfigurationNamesTheFlag) {
  auto error = [](const std::vector<std::string>& secrets, const std::vector<std::string>& allow,
                  const std::vector<std::string>& roots) {
    absl::StatusOr<McpPolicy> policy = McpPolicy::Create(secrets, allow, roots);
    EXPECT_FALSE(policy.ok());
    return policy.ok() ? std::string() : std::string(policy.status().message());
  };
  EXPECT_NE(error({"nonsense"}, {}, {}).find("--secret"), std::string::npos);
  EXPECT_NE(error({"A=env:A@x.org", "A=env:B@y.org"}, {}, {}).find("given twice"),
            std::string::npos);
  EXPECT_NE(error({}, {"*foo"}, {}).find("--allow"), std::string::npos);
  EXPECT_NE(error({}, {}, {"/no/such/dir"}).find("--workspace-root /no/such/dir"),
            std::string::npos);
}

}  // namespace
}  // namespace airlock
