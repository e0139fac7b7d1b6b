#include "src/providers/s3_xml.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

namespace airlock::providers {
namespace {

TEST(S3XmlTest, ParsesAnError) {
  std::optional<S3ErrorBody> e = ParseS3Error(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NoSuchKey</Code>"
      "<Message>The resource &lt;you&gt; asked for &amp; &#x41;&#66; is gone.</Message>"
      "<Key>a/b</Key><RequestId>4442587FB7D0A2F9</RequestId></Error>");
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, "NoSuchKey");
  EXPECT_EQ(e->message, "The resource <you> asked for & AB is gone.");
}

TEST(S3XmlTest, ErrorFieldsAreMadePrintableAndCut) {
  std::string long_message(5000, 'm');
  std::optional<S3ErrorBody> e = ParseS3Error(absl::StrCat(
      "<Error><Code>Bad&#10;\x1b[31mCode</Code><Message>", long_message, "</Message></Error>"));
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->code, "Bad??[31mCode");
  EXPECT_EQ(e->message.size(), kMaxS3Field);
}

TEST(S3XmlTest, OtherDocumentsAreNotErrors) {
  EXPECT_FALSE(ParseS3Error("").has_value());
  EXPECT_FALSE(ParseS3Error("<html><body>502 Bad Gateway</body></html>").has_value());
  EXPECT_FALSE(ParseS3Error("<Error><Code>x</Code>").has_value());  // unterminated
  EXPECT_FALSE(ParseS3Error("not xml at all").has_value());
}

TEST(S3XmlTest, ParsesAnUploadId) {
  absl::StatusOr<std::string> id = ParseInitiateMultipartUpload(
      "<?xml version=\"1.0\"?><InitiateMultipartUploadResult "
      "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Bucket>b</Bucket><Key>k</Key>"
      "<UploadId>VXBsb2FkIElE-_.~</UploadId></InitiateMultipartUploadResult>");
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, "VXBsb2FkIElE-_.~");
  EXPECT_FALSE(ParseInitiateMultipartUpload("<InitiateMultipartUploadResult><UploadId></UploadId>"
                                            "</InitiateMultipartUploadResult>")
                   .ok());
  EXPECT_FALSE(
      ParseInitiateMultipartUpload("<InitiateMultipartUploadResult><UploadId>a&#10;b</UploadId>"
                                   "</InitiateMultipartUploadResult>")
          .ok());
  EXPECT_FALSE(ParseInitiateMultipartUpload("<Error><Code>x</Code></Error>").ok());
}

TEST(S3XmlTest, ParsesAListPage) {
  absl::StatusOr<S3ListPage> page = ParseListObjectsV2(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<Name>bucket</Name><Prefix>p/sha256/</Prefix><KeyCount>2</KeyCount>"
      "<IsTruncated>true</IsTruncated>"
      "<NextContinuationToken>1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=</NextContinuationToken>"
      "<Contents><Key>p/sha256/aa</Key><Size>3</Size><ETag>&quot;x&quot;</ETag></Contents>"
      "<Contents><Key><![CDATA[p/sha256/<b>]]></Key><Size>4</Size></Contents>"
      "<!-- a comment --></ListBucketResult>");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->keys, (std::vector<std::string>{"p/sha256/aa", "p/sha256/<b>"}));
  EXPECT_TRUE(page->truncated);
  EXPECT_EQ(page->next_token, "1ueGcxLPRx1Tr/XYExHnhbYLgveDs2J/wm36Hy4vbOwM=");

  page =
      ParseListObjectsV2("<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_TRUE(page->keys.empty());
  EXPECT_FALSE(page->truncated);
}

TEST(S3XmlTest, ATruncatedListNeedsAToken) {
  EXPECT_FALSE(
      ParseListObjectsV2("<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>")
          .ok());
  EXPECT_FALSE(
      ParseListObjectsV2("<ListBucketResult><IsTruncated>maybe</IsTruncated></ListBucketResult>")
          .ok());
  EXPECT_FALSE(
      ParseListObjectsV2(absl::StrCat("<ListBucketResult><Contents><Key>", std::string(1025, 'k'),
                                      "</Key></Contents></ListBucketResult>"))
          .ok());
}

TEST(S3XmlTest, MalformedDocumentsAreRefused) {
  auto walks = [](absl::string_view body) {
    return WalkXml(body, [](const std::vector<std::string>&, absl::string_view) {}).ok();
  };
  EXPECT_TRUE(walks("<a><b x='1' y=\"2\"/>text<c></c></a>"));
  for (absl::string_view bad : {
           "",
           "   ",
           "<a>",
           "<a></b>",
           "<a></a><b></b>",                              // two roots
           "text<a></a>",                                 // text outside the root
           "<a>&unknown;</a>",                            // an entity XML does not define
           "<a>&#0;</a>",                                 // no character
           "<a>&#xD800;</a>",                             // a surrogate
           "<a>&#x110000;</a>",                           // beyond Unicode
           "<a>& b</a>",                                  // a bare '&'
           "<!DOCTYPE a [<!ENTITY x \"y\">]><a>&x;</a>",  // DTDs are refused
           "<a b></a>",                                   // attribute without value
           "<a b=c></a>",                                 // unquoted value
           "<a b='<'></a>",                               // '<' in a value
           "<a><!-- unterminated </a>",
           "<a><![CDATA[ unterminated </a>",
           "<?xml unterminated",
           "<1a></1a>",
           "</a>",
       }) {
    EXPECT_FALSE(walks(bad)) << bad;
  }
}

TEST(S3XmlTest, CapsDepthElementsAndSize) {
  std::string deep;
  for (size_t i = 0; i <= kMaxXmlDepth; ++i) deep += "<a>";
  for (size_t i = 0; i <= kMaxXmlDepth; ++i) deep += "</a>";
  EXPECT_FALSE(WalkXml(deep, [](const std::vector<std::string>&, absl::string_view) {}).ok());

  std::string many = "<r>";
  for (size_t i = 0; i < kMaxXmlElements; ++i) many += "<e/>";
  many += "</r>";
  EXPECT_FALSE(WalkXml(many, [](const std::vector<std::string>&, absl::string_view) {}).ok());

  std::string big = "<r>" + std::string(kMaxS3ResponseBody, 'x') + "</r>";
  EXPECT_FALSE(WalkXml(big, [](const std::vector<std::string>&, absl::string_view) {}).ok());
}

TEST(S3XmlTest, TextBelongsToItsOwnElement) {
  std::vector<std::pair<std::string, std::string>> seen;
  ASSERT_TRUE(WalkXml("<r>a<x>b</x>c<y/></r>", [&](const std::vector<std::string>& path,
                                                   absl::string_view text) {
                seen.emplace_back(path.back() + "@" + std::to_string(path.size()),
                                  std::string(text));
              }).ok());
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, std::string>>{
                      {"x@2", "b"}, {"y@2", ""}, {"r@1", "ac"}}));
}

}  // namespace
}  // namespace airlock::providers
