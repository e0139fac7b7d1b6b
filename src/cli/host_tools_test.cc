#include "src/cli/host_tools.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "src/common/host_paths.h"
#include "src/common/subprocess.h"
#include "src/common/unique_fd.h"
#include "src/testing/test_util.h"

namespace airlock {
namespace {

using testing::Debugfs;
using testing::TempDir;

TEST(HostToolsTest, AResultCrossesIntactEvenWithNamesThatAreNotUtf8) {
  CapturedWorkspace c;
  c.root = "/home/me/project";
  c.head = "0123456789abcdef0123456789abcdef01234567";
  c.branch = "main";
  c.image_bytes = uint64_t{5} << 32;
  c.tree.data_bytes = 17;
  c.tree.directories = 3;
  c.tree.digest = "sha256:ab";
  c.tree.entries = {{.path = std::string("caf\xe9\0x", 6),
                     .mode = 0100644,
                     .size = 17,
                     .sha256 = "cd",
                     .target = ""},
                    {.path = "link", .mode = 0120777, .target = "../\xff"}};
  absl::StatusOr<CapturedWorkspace> back = DecodeCaptureResult(EncodeCaptureResult(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->root, c.root);
  EXPECT_EQ(back->head, c.head);
  EXPECT_EQ(back->branch, c.branch);
  EXPECT_EQ(back->image_bytes, c.image_bytes);
  EXPECT_EQ(back->tree.data_bytes, 17u);
  EXPECT_EQ(back->tree.directories, 3u);
  EXPECT_EQ(back->tree.digest, c.tree.digest);
  ASSERT_EQ(back->tree.entries.size(), 2u);
  EXPECT_EQ(back->tree.entries[0].path, c.tree.entries[0].path);
  EXPECT_EQ(back->tree.entries[0].mode, 0100644u);
  EXPECT_EQ(back->tree.entries[0].size, 17u);
  EXPECT_EQ(back->tree.entries[0].sha256, "cd");
  EXPECT_EQ(back->tree.entries[1].target, "../\xff");
}

TEST(HostToolsTest, AnErrorKeepsItsCodeAndMessageAndGarbageIsRefused) {
  absl::Status over = absl::ResourceExhaustedError("the project holds 3 GiB; leave out build/");
  absl::StatusOr<CapturedWorkspace> back = DecodeCaptureResult(EncodeCaptureResult(over));
  EXPECT_EQ(back.status(), over);

  std::string bytes = EncodeCaptureResult(CapturedWorkspace{});
  for (std::string bad : {std::string(), std::string("{}"), bytes.substr(0, bytes.size() - 1)}) {
    absl::StatusOr<CapturedWorkspace> garbled = DecodeCaptureResult(bad);
    EXPECT_EQ(garbled.status().code(), absl::StatusCode::kInternal);
    EXPECT_NE(garbled.status().message().find("same build"), std::string::npos);
  }
}

// The real program: the image arrives in the descriptor handed over, the tree with it, and
// a mistake comes back as CaptureWorkspace's own error.
TEST(HostToolsTest, AirlockToolsCapturesIntoTheDescriptorItIsGiven) {
  TempDir dir;
  std::string project = dir.File("project");
  ASSERT_EQ(mkdir(project.c_str(), 0755), 0);
  std::ofstream(project + "/hello.txt") << "hello\n";
  UniqueFd image(open(dir.path().c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  ASSERT_TRUE(image.valid());
  absl::StatusOr<CapturedWorkspace> captured =
      CaptureWorkspaceWithTools(project, image.get(), 1 << 20);
  ASSERT_TRUE(captured.ok()) << captured.status();
  EXPECT_EQ(captured->root, project);
  ASSERT_EQ(captured->tree.entries.size(), 1u);
  EXPECT_EQ(captured->tree.entries[0].path, "hello.txt");
  struct stat st;
  ASSERT_EQ(fstat(image.get(), &st), 0);
  EXPECT_EQ(static_cast<uint64_t>(st.st_size), captured->image_bytes);
  std::string copy = dir.File("copy.ext4");
  ProcessOptions copy_options;
  copy_options.pass_fd = image.get();
  absl::StatusOr<ProcessResult> copied =
      RunProcess({"/bin/cp", "/proc/self/fd/3", copy}, copy_options);
  ASSERT_TRUE(copied.ok() && copied->exit_code == 0);
  EXPECT_EQ(Debugfs(copy, "cat /hello.txt"), "hello\n");

  absl::StatusOr<WorkspaceTree> described = DescribeWorkspaceWithTools(project, 1 << 20);
  ASSERT_TRUE(described.ok()) << described.status();
  EXPECT_EQ(described->digest, captured->tree.digest);

  absl::StatusOr<CapturedWorkspace> missing =
      CaptureWorkspaceWithTools(dir.File("nowhere"), image.get(), 1 << 20);
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.status().code(), absl::StatusCode::kInternal) << missing.status();
}

// The point of airlock-tools: airlock itself starts without these libraries and their tails.
TEST(HostToolsTest, AirlockDoesNotLoadTheArchiveExt4OrHttpLibraries) {
  absl::StatusOr<ProcessResult> dynamic =
      RunProcess({"/usr/bin/readelf", "-d", ExecutableDir() + "/airlock"});
  ASSERT_TRUE(dynamic.ok()) << dynamic.status();
  ASSERT_EQ(dynamic->exit_code, 0) << dynamic->output;
  EXPECT_NE(dynamic->output.find("libgrpc++"), std::string::npos) << dynamic->output;
  for (const char* heavy : {"libarchive", "libext2fs", "libcurl", "libevent"}) {
    EXPECT_EQ(dynamic->output.find(heavy), std::string::npos) << heavy << "\n" << dynamic->output;
  }
}

}  // namespace
}  // namespace airlock
