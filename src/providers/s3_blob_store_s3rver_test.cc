// S3BlobStore against a real S3-compatible server: s3rver (npm, tests/s3) on loopback, opened
// the way the daemon will open it, from an s3:// URL. s3rver checks the access key and the
// request's form but not SigV4 signatures themselves (its source says so), so the signer is
// checked by sigv4_test.cc's AWS examples and here by a server that accepts what it sends.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "src/common/file_util.h"
#include "src/common/unique_fd.h"
#include "src/providers/blob_digest.h"
#include "src/providers/blob_store.h"
#include "src/providers/blob_store_testing.h"
#include "src/testing/s3rver.h"
#include "src/testing/test_util.h"

namespace airlock::providers {
namespace {

constexpr char kBucket[] = "airlock-blobs";

class S3rverTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.running()); }

  BlobStoreOptions Options() {
    BlobStoreOptions o;
    o.url = absl::StrCat("s3://", kBucket, "/fleet/one");
    o.endpoint = server_.Endpoint();
    o.credentials = AwsCredentials{"S3RVER", "S3RVER", ""};
    o.part_size = o.multipart_threshold = 5 << 20;  // S3's smallest
    o.retry_delay = absl::Milliseconds(20);
    return o;
  }
  std::unique_ptr<BlobStore> Open(const BlobStoreOptions& options) {
    absl::StatusOr<std::unique_ptr<BlobStore>> store = OpenBlobStore(options);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? std::move(*store) : nullptr;
  }
  absl::Status Put(BlobStore& store, const std::string& digest, const std::string& bytes) {
    std::string path = scratch_.File("input");
    EXPECT_TRUE(WriteFileAtomically(path, bytes, 0600).ok());
    UniqueFd in(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    return store.Put(digest, in.get(), bytes.size());
  }
  std::string ObjectFile(const std::string& bytes) {
    return server_.ObjectFile(kBucket, "fleet/one/sha256/" + Sha256Hex(bytes));
  }

  testing::TempDir scratch_;
  testing::S3rver server_{AIRLOCK_NODE, AIRLOCK_S3RVER_DIR, scratch_.File("s3rver"), kBucket};
};

TEST_F(S3rverTest, PutGetStatListDelete) {
  std::unique_ptr<BlobStore> store = Open(Options());
  ASSERT_TRUE(store);
  std::vector<std::string> blobs = {"", "small", std::string(300000, 'm')};
  for (const std::string& bytes : blobs) {
    absl::Status put = Put(*store, DigestOf(bytes), bytes);
    ASSERT_TRUE(put.ok()) << put;
  }
  EXPECT_TRUE(access(ObjectFile("small").c_str(), F_OK) == 0) << "not at <prefix>/sha256/<hex>";
  for (const std::string& bytes : blobs) {
    absl::StatusOr<std::string> got = GetBytes(*store, scratch_.path(), DigestOf(bytes));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(*got == bytes);
    EXPECT_EQ(*store->Stat(DigestOf(bytes)), bytes.size());
  }
  std::vector<std::string> expected;
  for (const std::string& bytes : blobs) expected.push_back(DigestOf(bytes));
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(*store->List(), expected);

  // Putting one again is fine.
  ASSERT_TRUE(Put(*store, DigestOf("small"), "small").ok());

  ASSERT_TRUE(store->Delete(DigestOf("small")).ok());
  EXPECT_TRUE(absl::IsNotFound(store->Stat(DigestOf("small")).status()));
  EXPECT_TRUE(store->Delete(DigestOf("small")).ok());
  expected.erase(std::find(expected.begin(), expected.end(), DigestOf("small")));
  EXPECT_EQ(*store->List(), expected);
}

TEST_F(S3rverTest, PrefixesKeepStoresApart) {
  BlobStoreOptions other = Options();
  other.url = absl::StrCat("s3://", kBucket, "/fleet/two");
  std::unique_ptr<BlobStore> one = Open(Options());
  std::unique_ptr<BlobStore> two = Open(other);
  ASSERT_TRUE(one && two);
  ASSERT_TRUE(Put(*one, DigestOf("in one"), "in one").ok());
  EXPECT_TRUE(two->List()->empty());
  EXPECT_TRUE(absl::IsNotFound(two->Stat(DigestOf("in one")).status()));
}

TEST_F(S3rverTest, GetOfAMissingBlobIsNotFound) {
  std::unique_ptr<BlobStore> store = Open(Options());
  ASSERT_TRUE(store);
  absl::StatusOr<std::string> got = GetBytes(*store, scratch_.path(), DigestOf("never stored"));
  EXPECT_TRUE(absl::IsNotFound(got.status())) << got.status();
  EXPECT_TRUE(absl::IsNotFound(store->Stat(DigestOf("never stored")).status()));
}

TEST_F(S3rverTest, LargeBlobFromAPipeGoesUpInParts) {
  std::unique_ptr<BlobStore> store = Open(Options());
  ASSERT_TRUE(store);
  std::string bytes((12 << 20) + 5, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>((i * 131) >> 7);
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  UniqueFd read_end(fds[0]);
  std::thread writer([&, w = fds[1]] {
    EXPECT_TRUE(WriteAll(w, bytes).ok());
    close(w);
  });
  absl::Status put = store->Put(DigestOf(bytes), read_end.get(), bytes.size());
  writer.join();
  ASSERT_TRUE(put.ok()) << put;
  // Three parts (5 + 5 + 2 MiB) reached the server.
  EXPECT_NE(server_.Log().find("Stored part 3 of"), std::string::npos) << server_.Log();
  EXPECT_EQ(server_.Log().find("Stored part 4 of"), std::string::npos);
  EXPECT_TRUE(*ReadFileToString(ObjectFile(bytes), 64 << 20) == bytes);
  absl::StatusOr<std::string> got = GetBytes(*store, scratch_.path(), DigestOf(bytes));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(*got == bytes);
}

TEST_F(S3rverTest, WrongBytesAreNotStored) {
  std::unique_ptr<BlobStore> store = Open(Options());
  ASSERT_TRUE(store);
  absl::Status put = Put(*store, DigestOf("claimed"), "actual!");
  EXPECT_TRUE(absl::IsInvalidArgument(put)) << put;
  std::string large(6 << 20, 'L');
  put = Put(*store, DigestOf("claimed"), large);  // multipart: caught before completion
  EXPECT_TRUE(absl::IsInvalidArgument(put)) << put;
  EXPECT_TRUE(store->List()->empty());
}

TEST_F(S3rverTest, ABlobChangedInTheServersStorageIsRefusedAtGet) {
  std::unique_ptr<BlobStore> store = Open(Options());
  ASSERT_TRUE(store);
  std::string bytes = "the bytes as they went up";
  ASSERT_TRUE(Put(*store, DigestOf(bytes), bytes).ok());
  {
    // s3rver may answer the put before its file is in place: wait for it (at most 10 s).
    UniqueFd f;
    for (int i = 0; i < 200 && !f.valid(); ++i) {
      f = UniqueFd(open(ObjectFile(bytes).c_str(), O_WRONLY | O_CLOEXEC));
      if (!f.valid()) usleep(50000);
    }
    ASSERT_TRUE(f.valid()) << ObjectFile(bytes) << ": " << strerror(errno);
    ASSERT_EQ(pwrite(f.get(), "T", 1, 0), 1);
  }
  absl::StatusOr<std::string> got = GetBytes(*store, scratch_.path(), DigestOf(bytes));
  ASSERT_TRUE(absl::IsDataLoss(got.status())) << got.status();
  EXPECT_NE(got.status().message().find("does not match its digest: the store changed it"),
            std::string::npos)
      << got.status();
}

TEST_F(S3rverTest, WrongCredentialsSayToCheckThem) {
  BlobStoreOptions options = Options();
  options.credentials = AwsCredentials{"NOT-A-KEY", "S3RVER", ""};
  std::unique_ptr<BlobStore> store = Open(options);
  ASSERT_TRUE(store);
  absl::Status put = Put(*store, DigestOf("x"), "x");
  EXPECT_TRUE(absl::IsPermissionDenied(put)) << put;
  EXPECT_NE(put.message().find("check AWS_ACCESS_KEY_ID"), std::string::npos) << put;
  absl::StatusOr<std::vector<std::string>> listed = store->List();
  EXPECT_TRUE(absl::IsPermissionDenied(listed.status())) << listed.status();
  EXPECT_NE(listed.status().message().find("InvalidAccessKeyId"), std::string::npos)
      << listed.status();
}

TEST_F(S3rverTest, AMissingBucketSaysToCreateIt) {
  BlobStoreOptions options = Options();
  options.url = "s3://no-such-bucket";
  std::unique_ptr<BlobStore> store = Open(options);
  ASSERT_TRUE(store);
  absl::Status put = Put(*store, DigestOf("x"), "x");
  EXPECT_TRUE(absl::IsFailedPrecondition(put)) << put;
  EXPECT_NE(put.message().find("create the bucket no-such-bucket"), std::string::npos) << put;
}

}  // namespace
}  // namespace airlock::providers
