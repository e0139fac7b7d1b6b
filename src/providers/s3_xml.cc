#include "src/providers/s3_xml.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace airlock::providers {
namespace {

constexpr size_t kMaxName = 256;

absl::Status Malformed(absl::string_view why, size_t at) {
  return absl::InvalidArgumentError(
      absl::StrCat("the S3 server's answer is not well-formed XML: ", why, " at byte ", at));
}

bool NameStart(char c) { return absl::ascii_isalpha(c) || c == '_' || c == ':'; }
bool NameChar(char c) { return NameStart(c) || absl::ascii_isdigit(c) || c == '-' || c == '.'; }

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

// Decodes one reference starting at body[*pos] == '&' onto out; advances past its ';'.
absl::Status DecodeReference(absl::string_view body, size_t* pos, std::string* out) {
  size_t start = *pos;
  size_t semi = body.find(';', start);
  if (semi == absl::string_view::npos || semi - start > 12) {
    return Malformed("an '&' that starts no entity", start);
  }
  absl::string_view name = body.substr(start + 1, semi - start - 1);
  *pos = semi + 1;
  if (name == "amp") return out->push_back('&'), absl::OkStatus();
  if (name == "lt") return out->push_back('<'), absl::OkStatus();
  if (name == "gt") return out->push_back('>'), absl::OkStatus();
  if (name == "quot") return out->push_back('"'), absl::OkStatus();
  if (name == "apos") return out->push_back('\''), absl::OkStatus();
  if (name.size() < 2 || name[0] != '#') return Malformed("an unknown entity", start);
  bool hex = name[1] == 'x';
  absl::string_view digits = name.substr(hex ? 2 : 1);
  if (digits.empty()) return Malformed("an empty character reference", start);
  uint32_t cp = 0;
  for (char c : digits) {
    int d = absl::ascii_isdigit(c)        ? c - '0'
            : hex && c >= 'a' && c <= 'f' ? c - 'a' + 10
            : hex && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                          : -1;
    if (d < 0) return Malformed("a bad character reference", start);
    cp = cp * (hex ? 16 : 10) + static_cast<uint32_t>(d);
    if (cp > 0x10ffff) return Malformed("a character reference beyond Unicode", start);
  }
  if (cp == 0 || (cp >= 0xd800 && cp <= 0xdfff)) {
    return Malformed("a character reference to no character", start);
  }
  AppendUtf8(cp, out);
  return absl::OkStatus();
}

// Printable ASCII, anything else as '?', cut to kMaxS3Field.
std::string Printable(absl::string_view s) {
  std::string out(s.substr(0, kMaxS3Field));
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return out;
}

bool IsPrintable(absl::string_view s) {
  for (char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// The name of the root element, or "" if the body is not XML.
std::string RootOf(absl::string_view body) {
  std::string root;
  absl::Status walked = WalkXml(body, [&](const std::vector<std::string>& path, absl::string_view) {
    if (path.size() == 1) root = path[0];
  });
  return walked.ok() ? root : "";
}

}  // namespace

absl::Status WalkXml(absl::string_view body,
                     const std::function<void(const std::vector<std::string>& path,
                                              absl::string_view text)>& on_element) {
  if (body.size() > kMaxS3ResponseBody) {
    return absl::InvalidArgumentError(
        absl::StrCat("the S3 server's answer is larger than ", kMaxS3ResponseBody, " bytes"));
  }
  std::vector<std::string> path;
  std::vector<std::string> texts;
  size_t elements = 0;
  bool root_closed = false;
  size_t pos = 0;
  if (absl::StartsWith(body, "\xef\xbb\xbf")) pos = 3;
  auto read_name = [&](std::string* name) -> absl::Status {
    size_t start = pos;
    if (pos >= body.size() || !NameStart(body[pos])) return Malformed("a tag without a name", pos);
    while (pos < body.size() && NameChar(body[pos])) ++pos;
    if (pos - start > kMaxName) return Malformed("a name that is too long", start);
    *name = std::string(body.substr(start, pos - start));
    return absl::OkStatus();
  };
  auto skip_space = [&] {
    while (pos < body.size() && absl::ascii_isspace(body[pos])) ++pos;
  };
  auto close = [&] {
    on_element(path, texts.back());
    path.pop_back();
    texts.pop_back();
    root_closed = path.empty();
  };
  while (pos < body.size()) {
    absl::string_view rest = body.substr(pos);
    if (rest[0] != '<') {
      size_t end = std::min(body.find('<', pos), body.size());
      if (path.empty()) {
        for (size_t i = pos; i < end; ++i) {
          if (!absl::ascii_isspace(body[i])) return Malformed("text outside the root element", i);
        }
        pos = end;
        continue;
      }
      while (pos < end) {
        if (body[pos] == '&') {
          absl::Status decoded = DecodeReference(body, &pos, &texts.back());
          if (!decoded.ok()) return decoded;
          if (pos > end) return Malformed("an entity that runs into a tag", pos);
        } else {
          texts.back().push_back(body[pos++]);
        }
      }
      continue;
    }
    if (absl::StartsWith(rest, "<?")) {
      size_t end = body.find("?>", pos + 2);
      if (end == absl::string_view::npos) return Malformed("an unterminated <?", pos);
      pos = end + 2;
    } else if (absl::StartsWith(rest, "<!--")) {
      size_t end = body.find("-->", pos + 4);
      if (end == absl::string_view::npos) return Malformed("an unterminated comment", pos);
      pos = end + 3;
    } else if (absl::StartsWith(rest, "<![CDATA[")) {
      if (path.empty()) return Malformed("CDATA outside the root element", pos);
      size_t end = body.find("]]>", pos + 9);
      if (end == absl::string_view::npos) return Malformed("an unterminated CDATA section", pos);
      texts.back().append(body.data() + pos + 9, end - pos - 9);
      pos = end + 3;
    } else if (absl::StartsWith(rest, "<!")) {
      return Malformed("a DTD or declaration (not accepted)", pos);
    } else if (absl::StartsWith(rest, "</")) {
      size_t at = pos;
      pos += 2;
      std::string name;
      if (absl::Status s = read_name(&name); !s.ok()) return s;
      skip_space();
      if (pos >= body.size() || body[pos] != '>') return Malformed("an unterminated end tag", at);
      ++pos;
      if (path.empty() || path.back() != name) return Malformed("a mismatched end tag", at);
      close();
    } else {
      size_t at = pos;
      ++pos;
      std::string name;
      if (absl::Status s = read_name(&name); !s.ok()) return s;
      if (root_closed) return Malformed("a second root element", at);
      if (++elements > kMaxXmlElements) return Malformed("too many elements", at);
      if (path.size() >= kMaxXmlDepth) return Malformed("elements nested too deep", at);
      path.push_back(std::move(name));
      texts.emplace_back();
      for (;;) {
        bool spaced = pos < body.size() && absl::ascii_isspace(body[pos]);
        skip_space();
        if (pos >= body.size()) return Malformed("an unterminated start tag", at);
        if (body[pos] == '>') {
          ++pos;
          break;
        }
        if (absl::StartsWith(body.substr(pos), "/>")) {
          pos += 2;
          close();
          break;
        }
        // An attribute (namespaces included): read past it, its value is not used.
        std::string attribute;
        if (!spaced) return Malformed("an attribute not separated by a space", pos);
        if (absl::Status s = read_name(&attribute); !s.ok()) return s;
        skip_space();
        if (pos >= body.size() || body[pos] != '=') return Malformed("an attribute without =", pos);
        ++pos;
        skip_space();
        if (pos >= body.size() || (body[pos] != '"' && body[pos] != '\'')) {
          return Malformed("an attribute value without quotes", pos);
        }
        size_t end = body.find(body[pos], pos + 1);
        if (end == absl::string_view::npos ||
            body.substr(pos, end - pos).find('<') != absl::string_view::npos) {
          return Malformed("an unterminated attribute value", pos);
        }
        pos = end + 1;
      }
    }
  }
  if (!path.empty()) return Malformed("the document ends inside an element", pos);
  if (!root_closed) return Malformed("no root element", pos);
  return absl::OkStatus();
}

std::optional<S3ErrorBody> ParseS3Error(absl::string_view body) {
  if (RootOf(body) != "Error") return std::nullopt;
  S3ErrorBody error;
  absl::Status walked =
      WalkXml(body, [&](const std::vector<std::string>& path, absl::string_view text) {
        if (path.size() != 2) return;
        if (path[1] == "Code") error.code = Printable(absl::StripAsciiWhitespace(text));
        if (path[1] == "Message") error.message = Printable(absl::StripAsciiWhitespace(text));
      });
  if (!walked.ok()) return std::nullopt;
  return error;
}

absl::StatusOr<std::string> ParseInitiateMultipartUpload(absl::string_view body) {
  if (RootOf(body) != "InitiateMultipartUploadResult") {
    return absl::InvalidArgumentError(
        "the S3 server's answer to CreateMultipartUpload is not an "
        "InitiateMultipartUploadResult document");
  }
  std::string upload_id;
  absl::Status walked =
      WalkXml(body, [&](const std::vector<std::string>& path, absl::string_view text) {
        if (path.size() == 2 && path[1] == "UploadId") upload_id = std::string(text);
      });
  if (!walked.ok()) return walked;
  if (upload_id.empty() || upload_id.size() > kMaxS3Field || !IsPrintable(upload_id)) {
    return absl::InvalidArgumentError(
        "the S3 server's answer to CreateMultipartUpload has no usable UploadId");
  }
  return upload_id;
}

absl::StatusOr<S3ListPage> ParseListObjectsV2(absl::string_view body) {
  if (RootOf(body) != "ListBucketResult") {
    return absl::InvalidArgumentError(
        "the S3 server's answer to ListObjectsV2 is not a ListBucketResult document");
  }
  S3ListPage page;
  std::string truncated;
  bool bad_key = false;
  absl::Status walked =
      WalkXml(body, [&](const std::vector<std::string>& path, absl::string_view text) {
        if (path.size() == 3 && path[1] == "Contents" && path[2] == "Key") {
          // S3 keys are at most 1024 bytes.
          if (text.empty() || text.size() > 1024) bad_key = true;
          page.keys.emplace_back(text);
        } else if (path.size() == 2 && path[1] == "IsTruncated") {
          truncated = std::string(absl::StripAsciiWhitespace(text));
        } else if (path.size() == 2 && path[1] == "NextContinuationToken") {
          page.next_token = std::string(text);
        }
      });
  if (!walked.ok()) return walked;
  if (bad_key) {
    return absl::InvalidArgumentError(
        "the S3 server's ListObjectsV2 answer has an empty key or one longer than 1024 bytes");
  }
  if (truncated != "true" && truncated != "false" && !truncated.empty()) {
    return absl::InvalidArgumentError("the S3 server's ListObjectsV2 answer has a bad IsTruncated");
  }
  page.truncated = truncated == "true";
  if (page.truncated && (page.next_token.empty() || page.next_token.size() > kMaxS3Field ||
                         !IsPrintable(page.next_token))) {
    return absl::InvalidArgumentError(
        "the S3 server's ListObjectsV2 answer is truncated but has no usable "
        "NextContinuationToken");
  }
  return page;
}

}  // namespace airlock::providers
