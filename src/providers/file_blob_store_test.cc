#include "src/providers/file_blob_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "src/common/file_util.h"
#include "src/common/unique_fd.h"
#include "src/providers/blob_digest.h"
#include "src/providers/blob_store_testing.h"
#include "src/testing/test_util.h"

namespace airlock::providers {
namespace {

class FileBlobStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<FileBlobStore>> store =
        FileBlobStore::Create(scratch_.File("blobs"));
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  testing::TempDir scratch_;
  std::unique_ptr<FileBlobStore> store_;
};

TEST_F(FileBlobStoreTest, PutGetStatListDelete) {
  std::string a = "hello, blob";
  std::string b(3 << 20, '\0');  // several read chunks
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>(i * 7 + i / 4096);
  for (const std::string* bytes : {&a, &b}) {
    UniqueFd in = Input(scratch_.path(), *bytes);
    ASSERT_TRUE(store_->Put(DigestOf(*bytes), in.get(), bytes->size()).ok());
  }
  std::string hex = Sha256Hex(a);
  EXPECT_TRUE(
      access(absl::StrCat(scratch_.path(), "/blobs/sha256/", hex.substr(0, 2), "/", hex).c_str(),
             F_OK) == 0);
  EXPECT_EQ(*GetBytes(*store_, scratch_.path(), DigestOf(a)), a);
  EXPECT_EQ(*GetBytes(*store_, scratch_.path(), DigestOf(b)), b);
  EXPECT_EQ(*store_->Stat(DigestOf(a)), a.size());
  std::vector<std::string> expected = {DigestOf(a), DigestOf(b)};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(*store_->List(), expected);

  ASSERT_TRUE(store_->Delete(DigestOf(a)).ok());
  EXPECT_TRUE(absl::IsNotFound(store_->Stat(DigestOf(a)).status()));
  EXPECT_TRUE(absl::IsNotFound(GetBytes(*store_, scratch_.path(), DigestOf(a)).status()));
  EXPECT_TRUE(store_->Delete(DigestOf(a)).ok());  // absent is fine
  EXPECT_EQ(*store_->List(), std::vector<std::string>{DigestOf(b)});
}

TEST_F(FileBlobStoreTest, EmptyBlob) {
  UniqueFd in = Input(scratch_.path(), "");
  ASSERT_TRUE(store_->Put(DigestOf(""), in.get(), 0).ok());
  EXPECT_EQ(*store_->Stat(DigestOf("")), 0u);
  EXPECT_EQ(*GetBytes(*store_, scratch_.path(), DigestOf("")), "");
}

TEST_F(FileBlobStoreTest, BlobFilesAreOwnerOnly) {
  UniqueFd in = Input(scratch_.path(), "secret memory");
  ASSERT_TRUE(store_->Put(DigestOf("secret memory"), in.get(), 13).ok());
  struct stat st;
  ASSERT_EQ(stat(store_->PathOf(Sha256Hex("secret memory")).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(stat(scratch_.File("blobs/sha256").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST_F(FileBlobStoreTest, PutIsIdempotent) {
  std::string bytes = "same bytes twice";
  for (int i = 0; i < 2; ++i) {
    UniqueFd in = Input(scratch_.path(), bytes);
    ASSERT_TRUE(store_->Put(DigestOf(bytes), in.get(), bytes.size()).ok());
  }
  EXPECT_EQ(*store_->List(), std::vector<std::string>{DigestOf(bytes)});
  EXPECT_EQ(*GetBytes(*store_, scratch_.path(), DigestOf(bytes)), bytes);
}

TEST_F(FileBlobStoreTest, ConcurrentPutsOfOneBlob) {
  std::string bytes(1 << 20, 'c');
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      UniqueFd in = Input(scratch_.path(), bytes);
      if (store_->Put(DigestOf(bytes), in.get(), bytes.size()).ok()) ++ok;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok, 4);
  EXPECT_EQ(*GetBytes(*store_, scratch_.path(), DigestOf(bytes)), bytes);
  EXPECT_EQ(ListDirectory(scratch_.File("blobs/sha256/" + Sha256Hex(bytes).substr(0, 2))).size(),
            1u);  // no temporary file left
}

TEST_F(FileBlobStoreTest, PutFromAPipe) {
  std::string bytes(200000, 'p');  // more than a pipe holds: Put must read as it is written
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  UniqueFd read_end(fds[0]);
  std::thread writer([&, w = fds[1]] {
    EXPECT_TRUE(WriteAll(w, bytes).ok());
    close(w);
  });
  absl::Status put = store_->Put(DigestOf(bytes), read_end.get(), bytes.size());
  writer.join();
  ASSERT_TRUE(put.ok()) << put;
  EXPECT_EQ(*GetBytes(*store_, scratch_.path(), DigestOf(bytes)), bytes);
}

TEST_F(FileBlobStoreTest, PutReadsOnlySizeBytesFromTheCurrentOffset) {
  UniqueFd in = Input(scratch_.path(), "skipBLOBrest");
  ASSERT_EQ(lseek(in.get(), 4, SEEK_SET), 4);
  ASSERT_TRUE(store_->Put(DigestOf("BLOB"), in.get(), 4).ok());
  EXPECT_EQ(*GetBytes(*store_, scratch_.path(), DigestOf("BLOB")), "BLOB");
}

TEST_F(FileBlobStoreTest, WrongDigestStoresNothing) {
  UniqueFd in = Input(scratch_.path(), "not what the digest says");
  absl::Status put = store_->Put(DigestOf("other bytes"), in.get(), 24);
  EXPECT_TRUE(absl::IsInvalidArgument(put)) << put;
  EXPECT_NE(put.message().find("nothing was stored"), std::string::npos) << put;
  EXPECT_TRUE(store_->List()->empty());
  EXPECT_TRUE(absl::IsNotFound(store_->Stat(DigestOf("other bytes")).status()));
  // Nor a temporary file.
  std::string fan = scratch_.File("blobs/sha256/" + Sha256Hex("other bytes").substr(0, 2));
  EXPECT_TRUE(ListDirectory(fan).empty());
}

TEST_F(FileBlobStoreTest, ShortInputStoresNothing) {
  UniqueFd in = Input(scratch_.path(), "short");
  absl::Status put = store_->Put(DigestOf("short and more"), in.get(), 14);
  EXPECT_TRUE(absl::IsInvalidArgument(put)) << put;
  EXPECT_NE(put.message().find("ended after 5 of the 14 bytes"), std::string::npos) << put;
  EXPECT_TRUE(store_->List()->empty());
}

TEST_F(FileBlobStoreTest, AFlippedByteOnDiskIsRefusedAtGet) {
  std::string bytes = "the bytes as they were stored";
  UniqueFd in = Input(scratch_.path(), bytes);
  ASSERT_TRUE(store_->Put(DigestOf(bytes), in.get(), bytes.size()).ok());
  std::string path = store_->PathOf(Sha256Hex(bytes));
  {
    UniqueFd f(open(path.c_str(), O_WRONLY | O_CLOEXEC));
    ASSERT_EQ(pwrite(f.get(), "T", 1, 0), 1);
  }
  absl::StatusOr<std::string> got = GetBytes(*store_, scratch_.path(), DigestOf(bytes));
  ASSERT_TRUE(absl::IsDataLoss(got.status())) << got.status();
  EXPECT_NE(got.status().message().find("does not match its digest"), std::string::npos);
}

TEST_F(FileBlobStoreTest, BadDigestsAreInvalidArgument) {
  UniqueFd in = Input(scratch_.path(), "x");
  for (const std::string& bad :
       {std::string(""), std::string("sha256:"), "sha256:" + std::string(63, 'a'),
        "sha256:" + std::string(64, 'A'), "sha512:" + std::string(64, 'a'),
        "sha256:" + std::string(63, 'a') + "/", std::string("sha256:../../../../etc/passwd")}) {
    absl::Status put = store_->Put(bad, in.get(), 1);
    EXPECT_TRUE(absl::IsInvalidArgument(put)) << bad;
    EXPECT_NE(put.message().find("64 lowercase hex"), std::string::npos) << put;
    EXPECT_TRUE(absl::IsInvalidArgument(store_->Stat(bad).status())) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(store_->Get(bad, 1))) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(store_->Delete(bad))) << bad;
  }
}

TEST_F(FileBlobStoreTest, ListSkipsWhatIsNotABlob) {
  std::string fan = scratch_.File("blobs/sha256/ab");
  ASSERT_TRUE(MakeDirectories(fan, 0700).ok());
  ASSERT_TRUE(WriteFileAtomically(fan + "/.tmp-123", "x", 0600).ok());
  ASSERT_TRUE(WriteFileAtomically(fan + "/notes", "x", 0600).ok());
  ASSERT_TRUE(WriteFileAtomically(fan + "/" + std::string(64, 'c'), "x", 0600).ok());  // wrong fan
  EXPECT_TRUE(store_->List()->empty());
}

}  // namespace
}  // namespace airlock::providers
