// S3BlobStore against a scripted S3 server in memory (cpp-httplib on loopback), for what a real
// server rarely does on demand: fail, slow down, lie. tests/s3 (s3_blob_store_s3rver_test.cc)
// runs the store against a real S3-compatible server.
#include "src/providers/s3_blob_store.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <functional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "src/common/file_util.h"
#include "src/common/unique_fd.h"
#include "src/providers/blob_digest.h"
#include "src/providers/blob_store_testing.h"
#include "src/providers/s3_xml.h"
#include "src/testing/test_util.h"

namespace airlock::providers {
namespace {

struct Seen {
  std::string method, path, query, content_sha256, body_sha256, range, authorization;
};

// Answers every request with handler(request, response) and records what it saw.
class ScriptedS3 {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
  ScriptedS3() {
    auto handle = [this](const httplib::Request& req, httplib::Response& res) {
      Handler handler;
      {
        absl::MutexLock lock(&mu_);
        std::string query;
        for (const auto& [name, value] : req.params) absl::StrAppend(&query, name, "=", value, "&");
        seen_.push_back({req.method, req.path, query, req.get_header_value("x-amz-content-sha256"),
                         Sha256Hex(req.body), req.get_header_value("range"),
                         req.get_header_value("authorization")});
        handler = handler_;
      }
      handler(req, res);
    };
    server_.Get(".*", handle);
    server_.Put(".*", handle);
    server_.Post(".*", handle);
    server_.Delete(".*", handle);
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ~ScriptedS3() {
    server_.stop();
    thread_.join();
  }
  void Handle(Handler handler) {
    absl::MutexLock lock(&mu_);
    handler_ = std::move(handler);
  }
  std::vector<Seen> seen() {
    absl::MutexLock lock(&mu_);
    return seen_;
  }
  std::unique_ptr<S3BlobStore> Store() {
    S3Config config;
    config.endpoint = absl::StrCat("http://127.0.0.1:", port_);
    config.bucket = "bucket";
    config.prefix = "fleet";
    config.credentials = {"AKID", "SECRET", ""};
    config.part_size = config.multipart_threshold = 5 << 20;
    config.attempts = 3;
    config.retry_delay = absl::Milliseconds(5);
    return std::move(*S3BlobStore::Create(config));
  }

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  absl::Mutex mu_;
  Handler handler_ ABSL_GUARDED_BY(mu_) = [](const httplib::Request&, httplib::Response& res) {
    res.status = 200;
  };
  std::vector<Seen> seen_ ABSL_GUARDED_BY(mu_);
};

std::string ErrorXml(const std::string& code, const std::string& message) {
  return absl::StrCat("<?xml version=\"1.0\" encoding=\"UTF-8\"?><Error><Code>", code,
                      "</Code><Message>", message, "</Message></Error>");
}

TEST(S3BlobStoreTest, PutSignsTheRealPayloadHashAtThePathStyleKey) {
  ScriptedS3 s3;
  testing::TempDir dir;
  s3.Handle([](const httplib::Request& req, httplib::Response& res) {
    res.status = req.method == "HEAD" || req.method == "GET" ? 404 : 200;
  });
  std::string bytes = "a small blob";
  UniqueFd in = Input(dir.path(), bytes);
  ASSERT_TRUE(s3.Store()->Put(DigestOf(bytes), in.get(), bytes.size()).ok());
  std::vector<Seen> seen = s3.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].method, "HEAD");
  EXPECT_EQ(seen[1].method, "PUT");
  EXPECT_EQ(seen[1].path, "/bucket/fleet/sha256/" + Sha256Hex(bytes));
  EXPECT_EQ(seen[1].content_sha256, Sha256Hex(bytes));
  EXPECT_EQ(seen[1].body_sha256, Sha256Hex(bytes));
  EXPECT_TRUE(absl::StartsWith(seen[1].authorization, "AWS4-HMAC-SHA256 Credential=AKID/"))
      << seen[1].authorization;
}

TEST(S3BlobStoreTest, PutSkipsABlobAlreadyThere) {
  ScriptedS3 s3;
  testing::TempDir dir;
  std::string bytes = "present";
  s3.Handle([&](const httplib::Request& req, httplib::Response& res) {
    res.status = 200;
    res.set_content(bytes, "application/octet-stream");
  });
  UniqueFd in = Input(dir.path(), bytes);
  ASSERT_TRUE(s3.Store()->Put(DigestOf(bytes), in.get(), bytes.size()).ok());
  ASSERT_EQ(s3.seen().size(), 1u);
  EXPECT_EQ(s3.seen()[0].method, "HEAD");
}

TEST(S3BlobStoreTest, RetriesSlowDownAndServerErrorsWithTheSameBytes) {
  ScriptedS3 s3;
  testing::TempDir dir;
  int puts = 0;
  s3.Handle([&](const httplib::Request& req, httplib::Response& res) {
    if (req.method != "PUT") {
      res.status = 404;
      return;
    }
    ++puts;
    if (puts == 1) {
      res.status = 503;
      res.set_content(ErrorXml("SlowDown", "Please reduce your request rate."), "application/xml");
    } else if (puts == 2) {
      res.status = 500;
    } else {
      res.status = 200;
    }
  });
  std::string bytes(100000, 'r');
  UniqueFd in = Input(dir.path(), bytes);
  absl::Status put = s3.Store()->Put(DigestOf(bytes), in.get(), bytes.size());
  ASSERT_TRUE(put.ok()) << put;
  EXPECT_EQ(puts, 3);
  for (const Seen& seen : s3.seen()) {
    if (seen.method == "PUT") {
      EXPECT_EQ(seen.body_sha256, Sha256Hex(bytes));
    }
  }
}

TEST(S3BlobStoreTest, GivesUpAfterTheLastAttemptSayingSo) {
  ScriptedS3 s3;
  testing::TempDir dir;
  s3.Handle([](const httplib::Request& req, httplib::Response& res) {
    res.status = req.method == "HEAD" ? 404 : 503;
    if (req.method != "HEAD") res.set_content(ErrorXml("SlowDown", "Reduce"), "application/xml");
  });
  UniqueFd in = Input(dir.path(), "x");
  absl::Status put = s3.Store()->Put(DigestOf("x"), in.get(), 1);
  EXPECT_TRUE(absl::IsUnavailable(put)) << put;
  EXPECT_NE(put.message().find("after 3 tries"), std::string::npos) << put;
  EXPECT_NE(put.message().find("SlowDown"), std::string::npos) << put;
  EXPECT_NE(put.message().find("try again later"), std::string::npos) << put;
}

TEST(S3BlobStoreTest, ClientErrorsAreNotRetriedAndSayWhatToDo) {
  struct Case {
    int status;
    std::string code;
    absl::StatusCode expected;
    std::string advice;
  };
  for (const Case& c : std::vector<Case>{
           {403, "SignatureDoesNotMatch", absl::StatusCode::kPermissionDenied,
            "check AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY"},
           {403, "AccessDenied", absl::StatusCode::kPermissionDenied, "check AWS_ACCESS_KEY_ID"},
           {404, "NoSuchBucket", absl::StatusCode::kFailedPrecondition, "create the bucket bucket"},
           {403, "RequestTimeTooSkewed", absl::StatusCode::kFailedPrecondition, "clock"},
           {400, "AuthorizationHeaderMalformed", absl::StatusCode::kFailedPrecondition,
            "give its region"},
           {400, "InvalidRequest", absl::StatusCode::kFailedPrecondition, "InvalidRequest"},
       }) {
    ScriptedS3 s3;
    testing::TempDir dir;
    s3.Handle([&](const httplib::Request& req, httplib::Response& res) {
      res.status = c.status;
      res.set_content(ErrorXml(c.code, "the server's words"), "application/xml");
    });
    std::unique_ptr<S3BlobStore> store = s3.Store();
    absl::StatusOr<std::vector<std::string>> listed = store->List();
    ASSERT_FALSE(listed.ok()) << c.code;
    EXPECT_EQ(listed.status().code(), c.expected) << listed.status();
    EXPECT_NE(listed.status().message().find(c.advice), std::string::npos) << listed.status();
    EXPECT_NE(listed.status().message().find("the server's words"), std::string::npos)
        << listed.status();
    EXPECT_EQ(s3.seen().size(), 1u) << c.code;
  }
}

TEST(S3BlobStoreTest, GetVerifiesAndMapsNotFound) {
  ScriptedS3 s3;
  testing::TempDir dir;
  std::string bytes = "the real bytes";
  std::string served = bytes;
  s3.Handle([&](const httplib::Request& req, httplib::Response& res) {
    if (absl::EndsWith(req.path, Sha256Hex(bytes))) {
      res.status = 200;
      res.set_content(served, "application/octet-stream");
    } else {
      res.status = 404;
      res.set_content(ErrorXml("NoSuchKey", "The specified key does not exist."),
                      "application/xml");
    }
  });
  std::unique_ptr<S3BlobStore> store = s3.Store();
  EXPECT_EQ(*GetBytes(*store, dir.path(), DigestOf(bytes)), bytes);
  served[0] ^= 1;
  absl::StatusOr<std::string> got = GetBytes(*store, dir.path(), DigestOf(bytes));
  EXPECT_TRUE(absl::IsDataLoss(got.status())) << got.status();
  EXPECT_NE(got.status().message().find("does not match its digest: the store changed it"),
            std::string::npos);
  got = GetBytes(*store, dir.path(), DigestOf("absent"));
  EXPECT_TRUE(absl::IsNotFound(got.status())) << got.status();
  EXPECT_TRUE(absl::IsNotFound(store->Stat(DigestOf("absent")).status()));
}

TEST(S3BlobStoreTest, AnOversizedAnswerIsRefused) {
  ScriptedS3 s3;
  s3.Handle([](const httplib::Request& req, httplib::Response& res) {
    res.status = 200;
    res.set_content(std::string(kMaxS3ResponseBody + 1, 'x'), "application/xml");
  });
  absl::StatusOr<std::vector<std::string>> listed = s3.Store()->List();
  ASSERT_FALSE(listed.ok());
  EXPECT_NE(listed.status().message().find("more than 1048576 bytes"), std::string::npos)
      << listed.status();
  EXPECT_EQ(s3.seen().size(), 1u);
}

TEST(S3BlobStoreTest, ListFollowsContinuationTokensAndKeepsOnlyBlobs) {
  ScriptedS3 s3;
  std::string a(64, 'a'), b(64, 'b');
  s3.Handle([&](const httplib::Request& req, httplib::Response& res) {
    res.status = 200;
    EXPECT_EQ(req.get_param_value("list-type"), "2");
    EXPECT_EQ(req.get_param_value("prefix"), "fleet/sha256/");
    if (!req.has_param("continuation-token")) {
      res.set_content(absl::StrCat("<ListBucketResult><IsTruncated>true</IsTruncated>"
                                   "<NextContinuationToken>t+1/=</NextContinuationToken>"
                                   "<Contents><Key>fleet/sha256/",
                                   b,
                                   "</Key></Contents><Contents><Key>fleet/sha256/notes</Key>"
                                   "</Contents></ListBucketResult>"),
                      "application/xml");
    } else {
      EXPECT_EQ(req.get_param_value("continuation-token"), "t+1/=");
      res.set_content(absl::StrCat("<ListBucketResult><IsTruncated>false</IsTruncated>"
                                   "<Contents><Key>fleet/sha256/",
                                   a, "</Key></Contents></ListBucketResult>"),
                      "application/xml");
    }
  });
  absl::StatusOr<std::vector<std::string>> listed = s3.Store()->List();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(*listed, (std::vector<std::string>{"sha256:" + a, "sha256:" + b}));
}

TEST(S3BlobStoreTest, ListRefusesARepeatedToken) {
  ScriptedS3 s3;
  s3.Handle([&](const httplib::Request& req, httplib::Response& res) {
    res.status = 200;
    res.set_content(
        "<ListBucketResult><IsTruncated>true</IsTruncated>"
        "<NextContinuationToken>same</NextContinuationToken></ListBucketResult>",
        "application/xml");
  });
  absl::StatusOr<std::vector<std::string>> listed = s3.Store()->List();
  ASSERT_FALSE(listed.ok());
  EXPECT_NE(listed.status().message().find("repeated a continuation token"), std::string::npos);
}

// A multipart upload as S3 runs one, scripted: parts kept by number, assembled on completion.
class MultipartS3 {
 public:
  explicit MultipartS3(ScriptedS3* s3) {
    s3->Handle([this](const httplib::Request& req, httplib::Response& res) {
      absl::MutexLock lock(&mu_);
      res.status = 200;
      if (req.method == "HEAD") {
        res.status = 404;
      } else if (req.method == "POST" && req.has_param("uploads")) {
        res.set_content(
            "<InitiateMultipartUploadResult><UploadId>up-1</UploadId>"
            "</InitiateMultipartUploadResult>",
            "application/xml");
      } else if (req.method == "PUT" && req.has_param("partNumber")) {
        if (fail_part_ > 0 && req.get_param_value("partNumber") == "2") {
          --fail_part_;
          res.status = 500;
          return;
        }
        parts_[std::stoi(req.get_param_value("partNumber"))] = req.body;
        res.set_header("ETag", "\"etag-" + req.get_param_value("partNumber") + "\"");
      } else if (req.method == "POST" && req.has_param("uploadId")) {
        completion_ = req.body;
        for (const auto& [number, bytes] : parts_) object_ += bytes;
      } else if (req.method == "DELETE" && req.has_param("uploadId")) {
        aborted_ = true;
        res.status = 204;
      }
    });
  }
  int fail_part_ = 0;
  std::map<int, std::string> parts_;
  std::string completion_, object_;
  bool aborted_ = false;
  absl::Mutex mu_;
};

TEST(S3BlobStoreTest, LargeBlobsGoUpInParts) {
  ScriptedS3 s3;
  MultipartS3 multipart(&s3);
  multipart.fail_part_ = 1;  // part 2's first try fails: the retry sends the same bytes
  testing::TempDir dir;
  std::string bytes((11 << 20) + 3, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i % 251);
  UniqueFd in = Input(dir.path(), bytes);
  absl::Status put = s3.Store()->Put(DigestOf(bytes), in.get(), bytes.size());
  ASSERT_TRUE(put.ok()) << put;
  EXPECT_EQ(multipart.parts_.size(), 3u);
  EXPECT_EQ(multipart.parts_[1].size(), 5u << 20);
  EXPECT_EQ(multipart.parts_[3].size(), (1u << 20) + 3);
  EXPECT_TRUE(multipart.object_ == bytes);
  EXPECT_EQ(multipart.completion_,
            "<CompleteMultipartUpload>"
            "<Part><PartNumber>1</PartNumber><ETag>&quot;etag-1&quot;</ETag></Part>"
            "<Part><PartNumber>2</PartNumber><ETag>&quot;etag-2&quot;</ETag></Part>"
            "<Part><PartNumber>3</PartNumber><ETag>&quot;etag-3&quot;</ETag></Part>"
            "</CompleteMultipartUpload>");
  for (const Seen& seen : s3.seen()) EXPECT_EQ(seen.content_sha256, seen.body_sha256);
  EXPECT_FALSE(multipart.aborted_);
}

TEST(S3BlobStoreTest, AMultipartUploadOfWrongBytesIsAborted) {
  ScriptedS3 s3;
  MultipartS3 multipart(&s3);
  testing::TempDir dir;
  std::string bytes((6 << 20), 'w');
  UniqueFd in = Input(dir.path(), bytes);
  absl::Status put = s3.Store()->Put(DigestOf("something else"), in.get(), bytes.size());
  EXPECT_TRUE(absl::IsInvalidArgument(put)) << put;
  EXPECT_TRUE(multipart.aborted_);
  EXPECT_TRUE(multipart.completion_.empty());
}

}  // namespace
}  // namespace airlock::providers
