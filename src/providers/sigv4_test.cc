#include "src/providers/sigv4.h"

#include <gtest/gtest.h>

#include "src/providers/blob_digest.h"

namespace airlock::providers {
namespace {

// The example credentials and time of AWS's documented SigV4 examples for S3 ("Signature
// calculations for the Authorization header: transferring payload in a single chunk").
const AwsCredentials kExample{"AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                              ""};
const char kEmptySha[] = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

absl::Time ExampleTime() { return absl::FromUnixSeconds(1369353600); }  // 2013-05-24T00:00:00Z

TEST(SigV4Test, AmzDateIsUtcBasicFormat) { EXPECT_EQ(AmzDate(ExampleTime()), "20130524T000000Z"); }

TEST(SigV4Test, GetObjectMatchesAwsExample) {
  SigV4Request r;
  r.method = "GET";
  r.canonical_uri = "/test.txt";
  r.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
               {"Range", "bytes=0-9"},
               {"x-amz-content-sha256", kEmptySha},
               {"x-amz-date", "20130524T000000Z"}};
  r.payload_sha256 = kEmptySha;
  EXPECT_EQ(CanonicalRequest(r),
            "GET\n/test.txt\n\nhost:examplebucket.s3.amazonaws.com\nrange:bytes=0-9\n"
            "x-amz-content-sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
            "\nx-amz-date:20130524T000000Z\n\nhost;range;x-amz-content-sha256;x-amz-date\n"
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(SigV4Authorization(r, ExampleTime(), kExample, "us-east-1", "s3"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
            "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
}

TEST(SigV4Test, PutObjectMatchesAwsExample) {
  std::string payload = "Welcome to Amazon S3.";
  std::string payload_sha = Sha256Hex(payload);
  ASSERT_EQ(payload_sha, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
  SigV4Request r;
  r.method = "PUT";
  r.canonical_uri = "/" + UriEncode("test$file.text", false);
  EXPECT_EQ(r.canonical_uri, "/test%24file.text");
  r.headers = {{"Host", "examplebucket.s3.amazonaws.com"},
               {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
               {"x-amz-date", "20130524T000000Z"},
               {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
               {"x-amz-content-sha256", payload_sha}};
  r.payload_sha256 = payload_sha;
  EXPECT_EQ(SigV4Authorization(r, ExampleTime(), kExample, "us-east-1", "s3"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,"
            "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
}

TEST(SigV4Test, ListObjectsMatchesAwsExample) {
  SigV4Request r;
  r.method = "GET";
  r.canonical_uri = "/";
  r.query = {{"prefix", "J"}, {"max-keys", "2"}};  // out of order: the signer sorts
  r.headers = {{"host", "examplebucket.s3.amazonaws.com"},
               {"x-amz-date", "20130524T000000Z"},
               {"x-amz-content-sha256", kEmptySha}};
  r.payload_sha256 = kEmptySha;
  EXPECT_EQ(SigV4Authorization(r, ExampleTime(), kExample, "us-east-1", "s3"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
            "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

TEST(SigV4Test, GetBucketLifecycleMatchesAwsExample) {
  SigV4Request r;
  r.method = "GET";
  r.canonical_uri = "/";
  r.query = {{"lifecycle", ""}};
  r.headers = {{"host", "examplebucket.s3.amazonaws.com"},
               {"x-amz-date", "20130524T000000Z"},
               {"x-amz-content-sha256", kEmptySha}};
  r.payload_sha256 = kEmptySha;
  EXPECT_EQ(SigV4Authorization(r, ExampleTime(), kExample, "us-east-1", "s3"),
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,"
            "SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
            "Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543");
}

TEST(SigV4Test, UriEncodeKeepsUnreservedAndEncodesTheRestUppercase) {
  EXPECT_EQ(UriEncode("AZaz09-._~", true), "AZaz09-._~");
  EXPECT_EQ(UriEncode("a b+c=d&e/f", true), "a%20b%2Bc%3Dd%26e%2Ff");
  EXPECT_EQ(UriEncode("dir/a b/c*", false), "dir/a%20b/c%2A");
  EXPECT_EQ(UriEncode("\xc3\xa9\x01", true), "%C3%A9%01");
}

TEST(SigV4Test, QueryIsEncodedAndSortedByNameThenValue) {
  EXPECT_EQ(CanonicalQueryString({}), "");
  EXPECT_EQ(CanonicalQueryString({{"uploads", ""}}), "uploads=");
  EXPECT_EQ(CanonicalQueryString({{"prefix", "a/b c"},
                                  {"list-type", "2"},
                                  {"continuation-token", "x+y=="},
                                  {"b", "2"},
                                  {"b", "1"}}),
            "b=1&b=2&continuation-token=x%2By%3D%3D&list-type=2&prefix=a%2Fb%20c");
}

TEST(SigV4Test, HeadersAreLowercasedTrimmedSortedAndJoined) {
  std::string names;
  EXPECT_EQ(CanonicalHeaders({{"X-Amz-Meta-B", "  two   spaces  here "},
                              {"Host", "h"},
                              {"x-amz-meta-a", "1"},
                              {"X-AMZ-META-A", "2"}},
                             &names),
            "host:h\nx-amz-meta-a:1,2\nx-amz-meta-b:two spaces here\n");
  EXPECT_EQ(names, "host;x-amz-meta-a;x-amz-meta-b");
}

TEST(SigV4Test, AnythingSignedChangesTheSignature) {
  SigV4Request r;
  r.method = "PUT";
  r.canonical_uri = "/bucket/sha256/ab";
  r.headers = {{"host", "h"}, {"x-amz-date", "20130524T000000Z"}, {"x-amz-content-sha256", "0"}};
  r.payload_sha256 = "0";
  std::string base = SigV4Authorization(r, ExampleTime(), kExample, "us-east-1", "s3");
  SigV4Request other = r;
  other.payload_sha256 = "1";
  EXPECT_NE(SigV4Authorization(other, ExampleTime(), kExample, "us-east-1", "s3"), base);
  EXPECT_NE(SigV4Authorization(r, ExampleTime(), kExample, "eu-west-1", "s3"), base);
  AwsCredentials wrong = kExample;
  wrong.secret_access_key += "x";
  EXPECT_NE(SigV4Authorization(r, ExampleTime(), wrong, "us-east-1", "s3"), base);
}

}  // namespace
}  // namespace airlock::providers
