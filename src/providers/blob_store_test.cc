#include "src/providers/blob_store.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include "src/providers/s3_blob_store.h"
#include "src/testing/test_util.h"

namespace airlock::providers {
namespace {

TEST(BlobStoreUrlTest, FileUrls) {
  absl::StatusOr<BlobStoreLocation> l = ParseBlobStoreUrl("file:///var/lib/airlock/blobs/");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->kind, BlobStoreLocation::Kind::kFile);
  EXPECT_EQ(l->directory, "/var/lib/airlock/blobs");
}

TEST(BlobStoreUrlTest, S3Urls) {
  absl::StatusOr<BlobStoreLocation> l = ParseBlobStoreUrl("s3://my-bucket.example");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->kind, BlobStoreLocation::Kind::kS3);
  EXPECT_EQ(l->bucket, "my-bucket.example");
  EXPECT_EQ(l->prefix, "");
  l = ParseBlobStoreUrl("s3://bucket/fleet/eu-1/");
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->bucket, "bucket");
  EXPECT_EQ(l->prefix, "fleet/eu-1");
}

TEST(BlobStoreUrlTest, BadUrlsSayHowToWriteOne) {
  for (const char* bad : {"", "/var/lib/blobs", "file://relative/dir", "file:///", "file:///a b",
                          "file:///a?x", "http://bucket", "s3://", "s3://ab", "s3://Bucket",
                          "s3://-bucket", "s3://bucket-", "s3://bucket/a//b", "s3://bucket/../x",
                          "s3://bucket/a b", "s3://bucket/a%2Fb", "s3://bucket/\xc3\xa9"}) {
    absl::StatusOr<BlobStoreLocation> l = ParseBlobStoreUrl(bad);
    ASSERT_FALSE(l.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(l.status())) << bad;
    EXPECT_NE(l.status().message().find("write file:///absolute/directory, or s3://bucket"),
              std::string::npos)
        << l.status();
  }
}

TEST(BlobStoreUrlTest, OpensAFileStore) {
  testing::TempDir dir;
  BlobStoreOptions options;
  options.url = "file://" + dir.File("store");
  absl::StatusOr<std::unique_ptr<BlobStore>> store = OpenBlobStore(options);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE((*store)->List()->empty());
}

BlobStoreLocation Bucket() { return *ParseBlobStoreUrl("s3://bucket/p"); }

BlobStoreOptions WithKeys() {
  BlobStoreOptions o;
  o.url = "s3://bucket/p";
  o.credentials = AwsCredentials{"AKID", "SECRET", ""};
  return o;
}

TEST(S3OptionsTest, DefaultsToAwsInTheRegion) {
  absl::StatusOr<S3Config> c = S3ConfigFromOptions(WithKeys(), Bucket());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->endpoint, "https://s3.us-east-1.amazonaws.com");
  EXPECT_EQ(c->region, "us-east-1");
  EXPECT_EQ(c->part_size, uint64_t{16} << 20);
  EXPECT_EQ(c->multipart_threshold, uint64_t{64} << 20);
  BlobStoreOptions o = WithKeys();
  o.region = "eu-west-3";
  c = S3ConfigFromOptions(o, Bucket());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->endpoint, "https://s3.eu-west-3.amazonaws.com");
}

TEST(S3OptionsTest, Endpoints) {
  for (const char* good : {"https://minio.internal:9000/", "http://127.0.0.1:4569",
                           "http://localhost:9000", "http://[::1]:9000", "https://[fd00::1]"}) {
    BlobStoreOptions o = WithKeys();
    o.endpoint = good;
    absl::StatusOr<S3Config> c = S3ConfigFromOptions(o, Bucket());
    EXPECT_TRUE(c.ok()) << good << ": " << c.status();
  }
  for (const char* bad :
       {"minio:9000", "ftp://host", "https://", "https://host/path", "https://user@host",
        "https://host:0", "https://host:99999", "https://host:", "https://host?x=1",
        "http://10.0.0.5:9000", "https://[::1"}) {
    BlobStoreOptions o = WithKeys();
    o.endpoint = bad;
    absl::StatusOr<S3Config> c = S3ConfigFromOptions(o, Bucket());
    ASSERT_FALSE(c.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(c.status())) << bad;
    EXPECT_NE(c.status().message().find("write https://host[:port]"), std::string::npos)
        << c.status();
  }
}

TEST(S3OptionsTest, RegionsAndSizes) {
  BlobStoreOptions o = WithKeys();
  o.region = "US East";
  EXPECT_TRUE(absl::IsInvalidArgument(S3ConfigFromOptions(o, Bucket()).status()));
  o = WithKeys();
  o.part_size = 1 << 20;
  absl::Status small = S3ConfigFromOptions(o, Bucket()).status();
  EXPECT_TRUE(absl::IsInvalidArgument(small));
  EXPECT_NE(small.message().find("5 MiB"), std::string::npos) << small;
  o = WithKeys();
  o.multipart_threshold = uint64_t{2} << 30;
  EXPECT_TRUE(absl::IsInvalidArgument(S3ConfigFromOptions(o, Bucket()).status()));
  o = WithKeys();
  o.part_size = o.multipart_threshold = 5 << 20;
  EXPECT_TRUE(S3ConfigFromOptions(o, Bucket()).ok());
  o.attempts = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(S3ConfigFromOptions(o, Bucket()).status()));
}

// Sets environment variables for a test's length.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = getenv(name);
    if (old) old_ = old;
    had_ = old != nullptr;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

TEST(S3OptionsTest, CredentialsFromTheEnvironment) {
  BlobStoreOptions o;
  o.url = "s3://bucket";
  {
    ScopedEnv id("AWS_ACCESS_KEY_ID", "AKIDENV");
    ScopedEnv secret("AWS_SECRET_ACCESS_KEY", "secret-env");
    ScopedEnv token("AWS_SESSION_TOKEN", "token-env");
    absl::StatusOr<S3Config> c = S3ConfigFromOptions(o, Bucket());
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(c->credentials.access_key_id, "AKIDENV");
    EXPECT_EQ(c->credentials.secret_access_key, "secret-env");
    EXPECT_EQ(c->credentials.session_token, "token-env");
  }
  ScopedEnv id("AWS_ACCESS_KEY_ID", nullptr);
  ScopedEnv secret("AWS_SECRET_ACCESS_KEY", nullptr);
  absl::StatusOr<std::unique_ptr<BlobStore>> store = OpenBlobStore(o);
  ASSERT_FALSE(store.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(store.status()));
  EXPECT_NE(store.status().message().find("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"),
            std::string::npos)
      << store.status();
  o.credentials = AwsCredentials{"AK ID", "secret", ""};
  EXPECT_TRUE(absl::IsInvalidArgument(OpenBlobStore(o).status()));
}

}  // namespace
}  // namespace airlock::providers
