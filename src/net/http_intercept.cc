#include "src/net/http_intercept.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace airlock::net {
namespace {

constexpr char kCrlf[] = "\r\n";

bool IsTokenChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

bool IsToken(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar);
}

// A field value may hold visible bytes, spaces, tabs and obs-text; no other control bytes.
bool IsFieldValue(absl::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u == '\t' || (u >= 0x20 && u != 0x7f);
  });
}

// Bytes of a message as they may appear in an error: printable ASCII only, cut short.
std::string Printable(absl::string_view s, size_t most) {
  std::string out;
  for (char c : s.substr(0, most)) out.push_back(c >= 0x20 && c <= 0x7e ? c : '?');
  return out;
}

struct Header {
  std::string name;  // as sent
  std::string value;
};

struct Head {
  std::string start;  // the request or status line
  std::vector<Header> headers;
};

// Splits a head (without its final empty line) into lines and fields; returns why it is refused,
// or an empty string.
std::string ParseHead(absl::string_view text, Head* head) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, kCrlf);
  head->start = std::string(lines[0]);
  if (!IsFieldValue(head->start) || head->start.empty()) return "the first line is not printable";
  if (lines.size() - 1 > kMaxHttpHeaders) {
    return absl::StrCat("more than ", kMaxHttpHeaders, " header fields");
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    absl::string_view line = lines[i];
    if (line.empty()) return "an empty header line";
    if (line[0] == ' ' || line[0] == '\t') {
      return "a header line starts with whitespace (obs-fold is refused)";
    }
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) return "a header line has no ':'";
    absl::string_view name = line.substr(0, colon);
    if (!IsToken(name)) return "a header name is not a token (no spaces before ':')";
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (!IsFieldValue(value)) return absl::StrCat("header ", name, " holds control bytes");
    head->headers.push_back({std::string(name), std::string(value)});
  }
  return "";
}

// Finds the end of a head at the start of `in`. Returns its length without the final CRLFCRLF,
// npos while more is needed, or sets *error when the bytes so far cannot be a head.
size_t FindHeadEnd(absl::string_view in, std::string* error) {
  size_t end = in.find("\r\n\r\n");
  absl::string_view seen = in.substr(
      0, std::min(end == absl::string_view::npos ? in.size() : end + 2, kMaxHttpHeadBytes + 2));
  size_t line_start = 0;
  for (size_t i = 0; i < seen.size(); ++i) {
    if (seen[i] == '\n') {
      if (i == 0 || seen[i - 1] != '\r') {
        *error = "a line ends in a bare LF (CRLF is required)";
        return absl::string_view::npos;
      }
      line_start = i + 1;
    } else if (seen[i] == '\r' && i + 1 < seen.size() && seen[i + 1] != '\n') {
      *error = "a bare CR inside a line";
      return absl::string_view::npos;
    }
    if (i + 1 - line_start > kMaxHttpLineBytes) {
      *error = absl::StrCat("a header line is longer than ", kMaxHttpLineBytes, " bytes");
      return absl::string_view::npos;
    }
  }
  if (end == absl::string_view::npos) {
    if (in.size() > kMaxHttpHeadBytes) {
      *error = absl::StrCat("the head is longer than ", kMaxHttpHeadBytes, " bytes");
    }
    return absl::string_view::npos;
  }
  if (end > kMaxHttpHeadBytes) {
    *error = absl::StrCat("the head is longer than ", kMaxHttpHeadBytes, " bytes");
    return absl::string_view::npos;
  }
  return end;
}

const char* StatusText(int code) {
  switch (code) {
    case 400:
      return "Bad Request";
    case 405:
      return "Method Not Allowed";
    case 413:
      return "Content Too Large";
    case 421:
      return "Misdirected Request";
    case 431:
      return "Request Header Fields Too Large";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Error";
  }
}

std::string ErrorResponse(int code, absl::string_view reason) {
  std::string body = absl::StrCat("airlock: ", reason, "\n");
  return absl::StrCat("HTTP/1.1 ", code, " ", StatusText(code),
                      "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ",
                      body.size(), "\r\nConnection: close\r\n\r\n", body);
}

// Reads Content-Length fields: each must be digits, all the same. Returns why not, or "".
std::string ContentLength(const Head& head, bool* present, uint64_t* length) {
  *present = false;
  for (const Header& h : head.headers) {
    if (!absl::EqualsIgnoreCase(h.name, "content-length")) continue;
    if (h.value.empty() || h.value.size() > 15 ||
        !std::all_of(h.value.begin(), h.value.end(), absl::ascii_isdigit)) {
      return absl::StrCat("Content-Length \"", Printable(h.value, 32), "\" is not a length");
    }
    uint64_t n = 0;
    for (char c : h.value) n = n * 10 + static_cast<uint64_t>(c - '0');
    if (*present && n != *length) return "two Content-Length fields disagree";
    *present = true;
    *length = n;
  }
  return "";
}

int CountFields(const Head& head, absl::string_view name, std::string* last) {
  int n = 0;
  for (const Header& h : head.headers) {
    if (absl::EqualsIgnoreCase(h.name, name)) {
      ++n;
      *last = absl::AsciiStrToLower(h.value);
    }
  }
  return n;
}

std::string Chunk(absl::string_view data) {
  if (data.empty()) return "";
  return absl::StrCat(absl::Hex(data.size()), kCrlf, data, kCrlf);
}

// Parses a chunk-size line (without CRLF): hex digits, then optional extensions.
bool ChunkSize(absl::string_view line, uint64_t* size) {
  size_t digits = 0;
  *size = 0;
  while (digits < line.size() && absl::ascii_isxdigit(static_cast<unsigned char>(line[digits]))) {
    if (digits == 15) return false;
    char c = absl::ascii_tolower(static_cast<unsigned char>(line[digits]));
    *size = *size * 16 + static_cast<uint64_t>(c <= '9' ? c - '0' : c - 'a' + 10);
    ++digits;
  }
  if (digits == 0) return false;
  absl::string_view rest = line.substr(digits);
  return rest.empty() ||
         ((rest[0] == ';' || rest[0] == ' ' || rest[0] == '\t') && IsFieldValue(rest));
}

// The characters of base64(k zero bytes + value) that only the value's bits decide: how the
// value reads inside a longer base64 text, at each of the three alignments.
std::string Base64Core(const std::string& value, size_t k, bool web_safe) {
  std::string padded = std::string(k, '\0') + value;
  std::string encoded = web_safe ? absl::WebSafeBase64Escape(padded) : absl::Base64Escape(padded);
  size_t first = (8 * k + 5) / 6, end = (8 * (k + value.size())) / 6;
  return end > first ? encoded.substr(first, end - first) : "";
}

// %XX for every byte that is not unreserved in a URL (RFC 3986 2.3); the first `pad` unreserved
// bytes are escaped too, which lets a placeholder take the length of the value's encoding.
std::string PercentEncode(const std::string& value, size_t pad, bool lower) {
  std::string out;
  for (char c : value) {
    bool unreserved = absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '.' ||
                      c == '_' || c == '~';
    if (unreserved && pad == 0) {
      out += c;
      continue;
    }
    if (unreserved) --pad;
    std::string hex = absl::BytesToHexString(absl::string_view(&c, 1));
    out += '%';
    out += lower ? hex : absl::AsciiStrToUpper(hex);
  }
  return out;
}

// Encoded forms of a value shorter than this are not masked: they would match by chance.
constexpr size_t kMinEncodedPattern = 12;

}  // namespace

HttpIntercept::HttpIntercept(std::string host, uint16_t port,
                             std::vector<InterceptedSecret> secrets)
    : host_(std::move(host)), port_(port), secrets_(std::move(secrets)) {
  for (const InterceptedSecret& s : secrets_) {
    if (s.value.empty()) continue;
    mask_.push_back({s.value, s.placeholder, s.name});
    // A server that reflects the value encoded (hex, base64 at any alignment, URL-encoded)
    // must not hand it to the guest that way either.
    auto add = [&](std::string from, std::string to) {
      bool known = std::any_of(mask_.begin(), mask_.end(),
                               [&](const Replacement& r) { return r.from == from; });
      if (from.size() >= kMinEncodedPattern && !known) {
        mask_.push_back({std::move(from), std::move(to), s.name});
      }
    };
    std::string hex = absl::BytesToHexString(s.value);
    std::string placeholder_hex = absl::BytesToHexString(s.placeholder);
    add(hex, placeholder_hex);
    add(absl::AsciiStrToUpper(hex), absl::AsciiStrToUpper(placeholder_hex));
    for (size_t k = 0; k < 3; ++k) {
      for (bool web_safe : {false, true}) {
        add(Base64Core(s.value, k, web_safe), Base64Core(s.placeholder, k, web_safe));
      }
    }
    for (bool lower : {false, true}) {
      std::string encoded = PercentEncode(s.value, 0, lower);
      // Placeholders are letters, digits and '_': escaping some of them evens the lengths.
      size_t pad =
          encoded.size() > s.placeholder.size() ? (encoded.size() - s.placeholder.size()) / 2 : 0;
      add(encoded, PercentEncode(s.placeholder, pad, lower));
    }
  }
}

HttpIntercept::~HttpIntercept() {
  for (InterceptedSecret& s : secrets_) Wipe(s.value);
  for (Replacement& r : mask_) Wipe(r.from);
  Wipe(held_head_);
  Wipe(body_buffer_);
}

std::vector<InterceptEvent> HttpIntercept::TakeEvents() {
  std::vector<InterceptEvent> out;
  out.swap(events_);
  return out;
}

bool HttpIntercept::GuestIdle() const {
  return guest_in_.empty() && request_.body == Body::kNone && !buffering_;
}

absl::Status HttpIntercept::Refuse(int code, absl::string_view reason, std::string* guest) {
  // An answer of our own can go to the guest only where its response would come next: no
  // earlier request is waiting for one, and the server has not begun answering this one.
  size_t ahead = pending_.size() - (request_.body != Body::kNone && !pending_.empty() ? 1 : 0);
  if (ahead == 0 && !started_response_) guest->append(ErrorResponse(code, reason));
  guest_failed_ = true;
  guest_in_.clear();
  return absl::InvalidArgumentError(absl::StrCat(code, " ", reason));
}

void HttpIntercept::WarnOtherPlaceholders(absl::string_view bytes, absl::string_view where) {
  for (const InterceptedSecret& s : secrets_) {
    bool bound = !s.value.empty();
    if (bound && (where != "body" || s.body)) continue;
    if (bytes.find(s.placeholder) == absl::string_view::npos) continue;
    std::string why = bound
                          ? absl::StrCat(
                                "in the request body, which its binding keeps closed (bind it with "
                                "?body to send it there); sent unchanged")
                          : absl::StrCat("in the ", where, ", but it is not bound to ", host_,
                                         "; sent unchanged");
    bool seen = std::any_of(events_.begin(), events_.end(), [&](const InterceptEvent& e) {
      return e.secret == s.name && e.where == why;
    });
    if (!seen) events_.push_back({s.name, false, why});
  }
}

std::string HttpIntercept::SubstituteHeader(absl::string_view name, absl::string_view value) {
  std::string out(value);
  // A binding names the headers its value may enter (the credential headers, by default):
  // never a header the server might reflect or log, nor one the guest chose to smuggle it in.
  auto allows = [&](const InterceptedSecret& s) {
    return std::any_of(s.headers.begin(), s.headers.end(),
                       [&](const std::string& h) { return absl::EqualsIgnoreCase(h, name); });
  };
  for (const InterceptedSecret& s : secrets_) {
    if (s.value.empty()) continue;
    if (!allows(s)) {
      if (out.find(s.placeholder) != std::string::npos) {
        std::string why = absl::StrCat(
            "in header ", name,
            ", which its binding does not name (bind it with ?header=", absl::AsciiStrToLower(name),
            " to send it there); sent unchanged");
        bool seen = std::any_of(events_.begin(), events_.end(), [&](const InterceptEvent& e) {
          return e.secret == s.name && e.where == why;
        });
        if (!seen) events_.push_back({s.name, false, why});
      }
      continue;
    }
    if (absl::StrReplaceAll({{s.placeholder, s.value}}, &out) > 0) {
      events_.push_back({s.name, true, absl::StrCat("header ", name)});
    }
  }
  bool auth = absl::EqualsIgnoreCase(name, "authorization") ||
              absl::EqualsIgnoreCase(name, "proxy-authorization");
  if (auth && out.size() > 6 && absl::EqualsIgnoreCase(out.substr(0, 6), "basic ")) {
    std::string encoded(absl::StripAsciiWhitespace(absl::string_view(out).substr(6)));
    std::string decoded;
    if (absl::Base64Unescape(encoded, &decoded)) {
      std::string swapped = decoded;
      for (const InterceptedSecret& s : secrets_) {
        if (s.value.empty() || !allows(s)) continue;
        if (absl::StrReplaceAll({{s.placeholder, s.value}}, &swapped) > 0) {
          events_.push_back({s.name, true, absl::StrCat("header ", name, " (Basic)")});
          WarnOtherPlaceholders(decoded, absl::StrCat("header ", name));
        }
      }
      if (swapped != decoded) {
        std::string real = absl::Base64Escape(swapped);
        // A server that echoes the credentials back must not hand the guest their real form.
        mask_.push_back({real, encoded, "basic credentials"});
        out = absl::StrCat(out.substr(0, 6), real);
      }
    }
  }
  WarnOtherPlaceholders(out, absl::StrCat("header ", name));
  return out;
}

absl::Status HttpIntercept::FromGuest(absl::string_view bytes, std::string* upstream,
                                      std::string* guest) {
  if (guest_failed_) return absl::FailedPreconditionError("the connection was refused already");
  guest_in_.append(bytes.data(), bytes.size());
  for (;;) {
    if (request_.body == Body::kNone) {
      if (guest_in_.empty()) return absl::OkStatus();
      std::string error;
      size_t end = FindHeadEnd(guest_in_, &error);
      if (!error.empty())
        return Refuse(error.find("longer") != std::string::npos ? 431 : 400, error, guest);
      if (end == std::string::npos) return absl::OkStatus();
      std::string head = guest_in_.substr(0, end);
      guest_in_.erase(0, end + 4);
      if (absl::Status s = GuestHead(head, upstream, guest); !s.ok()) return s;
      continue;
    }
    size_t before = guest_in_.size();
    Body state = request_.body;
    if (absl::Status s = GuestBody(upstream, guest); !s.ok()) return s;
    if (guest_in_.size() == before && request_.body == state) return absl::OkStatus();
  }
}

absl::Status HttpIntercept::GuestHead(absl::string_view text, std::string* upstream,
                                      std::string* guest) {
  Head head;
  if (std::string error = ParseHead(text, &head); !error.empty()) {
    return Refuse(error.find("more than") != std::string::npos ? 431 : 400, error, guest);
  }
  std::vector<absl::string_view> parts = absl::StrSplit(head.start, ' ');
  if (parts.size() != 3 || !IsToken(parts[0]) || parts[1].empty()) {
    return Refuse(400, "the request line is not METHOD TARGET VERSION", guest);
  }
  if (parts[2] != "HTTP/1.1") {
    return Refuse(505,
                  absl::StrCat("use HTTP/1.1 on connections that carry secrets (got ",
                               Printable(parts[2], 16), ")"),
                  guest);
  }
  if (parts[0] == "CONNECT") return Refuse(405, "CONNECT is not allowed", guest);
  absl::string_view target = parts[1];
  if (!std::all_of(target.begin(), target.end(), [](char c) { return c > 0x20 && c < 0x7f; })) {
    return Refuse(400, "the request target holds spaces or control bytes", guest);
  }
  std::string host_field;
  if (CountFields(head, "host", &host_field) != 1) {
    return Refuse(400, "a request needs exactly one Host field", guest);
  }
  std::vector<std::string> allowed_hosts = {host_, absl::StrCat(host_, ":", port_)};
  if (std::find(allowed_hosts.begin(), allowed_hosts.end(), host_field) == allowed_hosts.end()) {
    return Refuse(421,
                  absl::StrCat("the Host field names another host than ", host_,
                               ", the name this connection was opened to"),
                  guest);
  }
  if (target[0] != '/' && target != "*") {
    std::string lower = absl::AsciiStrToLower(target);
    absl::string_view rest = lower;
    if (!absl::ConsumePrefix(&rest, "https://") && !absl::ConsumePrefix(&rest, "http://")) {
      return Refuse(400, "the request target is not a path or an absolute URL", guest);
    }
    absl::string_view authority = rest.substr(0, rest.find_first_of("/?#"));
    if (std::find(allowed_hosts.begin(), allowed_hosts.end(), authority) == allowed_hosts.end()) {
      return Refuse(421, absl::StrCat("the request target names another host than ", host_), guest);
    }
  }
  std::string ignored;
  if (CountFields(head, "upgrade", &ignored) > 0) {
    return Refuse(501,
                  "protocol upgrades (WebSocket) are not supported on connections that "
                  "carry secrets",
                  guest);
  }
  bool has_length = false;
  uint64_t length = 0;
  if (std::string error = ContentLength(head, &has_length, &length); !error.empty()) {
    return Refuse(400, error, guest);
  }
  std::string coding;
  int codings = CountFields(head, "transfer-encoding", &coding);
  if (codings > 0 && has_length) {
    return Refuse(400, "Content-Length and Transfer-Encoding together are refused", guest);
  }
  if (codings > 1 || (codings == 1 && coding != "chunked")) {
    return Refuse(501, "Transfer-Encoding other than a single \"chunked\" is not supported", guest);
  }
  std::string expect;
  bool expects_continue = CountFields(head, "expect", &expect) == 1 && expect == "100-continue";

  WarnOtherPlaceholders(target, "URL");
  buffering_ = std::any_of(secrets_.begin(), secrets_.end(),
                           [](const InterceptedSecret& s) { return !s.value.empty() && s.body; }) &&
               (codings == 1 || (has_length && length > 0));
  std::vector<std::string> values;
  std::string carried;  // a secret whose value goes (or may go, in the body) into this request
  for (const InterceptedSecret& s : secrets_) {
    if (buffering_ && s.body && !s.value.empty() && carried.empty()) carried = s.name;
  }
  for (const Header& h : head.headers) {
    size_t before = events_.size();
    values.push_back(SubstituteHeader(h.name, h.value));
    for (size_t e = before; e < events_.size() && carried.empty(); ++e) {
      if (events_[e].used) carried = events_[e].secret;
    }
  }
  bool carries = !carried.empty();
  std::string out = absl::StrCat(head.start, kCrlf);
  for (size_t i = 0; i < head.headers.size(); ++i) {
    const Header& h = head.headers[i];
    if (absl::EqualsIgnoreCase(h.name, "accept-encoding")) continue;
    if (buffering_ && (absl::EqualsIgnoreCase(h.name, "content-length") ||
                       absl::EqualsIgnoreCase(h.name, "transfer-encoding") ||
                       (expects_continue && absl::EqualsIgnoreCase(h.name, "expect")))) {
      continue;
    }
    // A part of a response is a part of what the server reflects: slices of the value would
    // pass a mask that looks for the whole. A request that carries the value asks for all.
    if (carries &&
        (absl::EqualsIgnoreCase(h.name, "range") || absl::EqualsIgnoreCase(h.name, "if-range"))) {
      ReportRangeDropped(carried);
      continue;
    }
    absl::StrAppend(&out, h.name, ": ", values[i], kCrlf);
  }
  // The mask needs the response's bytes as the server meant them.
  absl::StrAppend(&out, "Accept-Encoding: identity", kCrlf);
  pending_.push_back({parts[0] == "HEAD"});
  warn_tail_.clear();
  if (codings == 1) {
    request_ = {Body::kChunkSize, 0};
  } else if (has_length && length > 0) {
    request_ = {Body::kLength, length};
  } else {
    request_ = {Body::kNone, 0};
  }
  if (buffering_) {
    held_head_ = std::move(out);
    body_buffer_.clear();
    if (expects_continue) guest->append("HTTP/1.1 100 Continue\r\n\r\n");
    return absl::OkStatus();
  }
  absl::StrAppend(upstream, out, kCrlf);
  return absl::OkStatus();
}

absl::Status HttpIntercept::GuestBody(std::string* upstream, std::string* guest) {
  auto data = [&](absl::string_view bytes) -> absl::Status {
    if (buffering_) {
      if (body_buffer_.size() + bytes.size() > kMaxSubstitutedBodyBytes) {
        return Refuse(413,
                      absl::StrCat("a body that a secret may enter is buffered, up to ",
                                   kMaxSubstitutedBodyBytes, " bytes"),
                      guest);
      }
      body_buffer_.append(bytes.data(), bytes.size());
      return absl::OkStatus();
    }
    std::string scan = absl::StrCat(warn_tail_, bytes);
    WarnOtherPlaceholders(scan, "body");
    size_t keep = std::min<size_t>(scan.size(), 256);
    warn_tail_ = scan.substr(scan.size() - keep);
    upstream->append(bytes.data(), bytes.size());
    return absl::OkStatus();
  };
  // In pass-through, framing bytes go up as they came (they were checked).
  auto frame = [&](absl::string_view bytes) {
    if (!buffering_) upstream->append(bytes.data(), bytes.size());
  };
  auto line = [&](std::string* out) -> int {  // 1: got a line, 0: need more, -1: too long
    size_t end = guest_in_.find(kCrlf);
    if (end == std::string::npos) return guest_in_.size() > kMaxHttpLineBytes ? -1 : 0;
    if (end > kMaxHttpLineBytes) return -1;
    *out = guest_in_.substr(0, end);
    guest_in_.erase(0, end + 2);
    return 1;
  };
  switch (request_.body) {
    case Body::kNone:
    case Body::kToClose:
      return absl::OkStatus();
    case Body::kLength:
    case Body::kChunkData: {
      size_t n = static_cast<size_t>(std::min<uint64_t>(request_.remaining, guest_in_.size()));
      if (n == 0) return absl::OkStatus();
      std::string piece = guest_in_.substr(0, n);
      guest_in_.erase(0, n);
      request_.remaining -= n;
      if (absl::Status s = data(piece); !s.ok()) return s;
      if (request_.remaining > 0) return absl::OkStatus();
      if (request_.body == Body::kChunkData) {
        request_.body = Body::kChunkDataEnd;
        return absl::OkStatus();
      }
      request_.body = Body::kNone;
      if (buffering_) return FinishBufferedBody(upstream);
      return absl::OkStatus();
    }
    case Body::kChunkSize: {
      std::string text;
      int got = line(&text);
      if (got < 0) return Refuse(400, "a chunk-size line is too long", guest);
      if (got == 0) return absl::OkStatus();
      uint64_t size = 0;
      if (!ChunkSize(text, &size)) return Refuse(400, "a chunk size is not hexadecimal", guest);
      frame(absl::StrCat(text, kCrlf));
      request_ = size == 0 ? Framing{Body::kTrailers, 0} : Framing{Body::kChunkData, size};
      return absl::OkStatus();
    }
    case Body::kChunkDataEnd: {
      if (guest_in_.size() < 2) return absl::OkStatus();
      if (guest_in_.compare(0, 2, kCrlf) != 0) {
        return Refuse(400, "a chunk's data is longer than its size", guest);
      }
      guest_in_.erase(0, 2);
      frame(kCrlf);
      request_.body = Body::kChunkSize;
      return absl::OkStatus();
    }
    case Body::kTrailers: {
      std::string text;
      int got = line(&text);
      if (got < 0) return Refuse(431, "a trailer line is too long", guest);
      if (got == 0) return absl::OkStatus();
      if (!text.empty()) {
        Head trailer;
        if (std::string error = ParseHead(absl::StrCat("x", kCrlf, text), &trailer);
            !error.empty()) {
          return Refuse(400, absl::StrCat("in the trailers: ", error), guest);
        }
        WarnOtherPlaceholders(text, "trailers");
        frame(absl::StrCat(text, kCrlf));  // buffered bodies drop their trailers
        return absl::OkStatus();
      }
      frame(kCrlf);
      request_.body = Body::kNone;
      if (buffering_) return FinishBufferedBody(upstream);
      return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::Status HttpIntercept::FinishBufferedBody(std::string* upstream) {
  for (const InterceptedSecret& s : secrets_) {
    if (s.value.empty() || !s.body) continue;
    if (absl::StrReplaceAll({{s.placeholder, s.value}}, &body_buffer_) > 0) {
      events_.push_back({s.name, true, "body"});
    }
  }
  WarnOtherPlaceholders(body_buffer_, "body");
  absl::StrAppend(upstream, held_head_, "Content-Length: ", body_buffer_.size(), kCrlf, kCrlf,
                  body_buffer_);
  held_head_.clear();
  body_buffer_.clear();
  buffering_ = false;
  return absl::OkStatus();
}

void HttpIntercept::Masker::Scan(bool final, std::string* out, std::vector<std::string>* hits) {
  if (table_ == nullptr || table_->empty()) {
    out->append(held_);
    held_.clear();
    return;
  }
  absl::string_view s = held_;
  // The next occurrence of each pattern at or after pos (npos: none left).
  std::vector<size_t> next(table_->size());
  for (size_t i = 0; i < table_->size(); ++i) next[i] = s.find((*table_)[i].from);
  size_t pos = 0;
  for (;;) {
    size_t best = absl::string_view::npos, which = 0;
    for (size_t i = 0; i < next.size(); ++i) {
      if (next[i] != absl::string_view::npos && next[i] < pos) {
        next[i] = s.find((*table_)[i].from, pos);
      }
      bool longer = next[i] == best && (*table_)[i].from.size() > (*table_)[which].from.size();
      if (next[i] < best || (best != absl::string_view::npos && longer)) {
        best = next[i];
        which = i;
      }
    }
    if (best == absl::string_view::npos) break;
    const Replacement& r = (*table_)[which];
    absl::StrAppend(out, s.substr(pos, best - pos));
    out->append(r.to);
    hits->push_back(r.secret);
    pos = best + r.from.size();
  }
  // Hold back the longest tail that could begin a pattern.
  size_t keep = 0;
  absl::string_view rest = s.substr(pos);
  for (const Replacement& r : *table_) {
    if (final) break;
    for (size_t len = std::min(r.from.size() - 1, rest.size()); len > keep; --len) {
      if (rest.substr(rest.size() - len) == absl::string_view(r.from).substr(0, len)) {
        keep = len;
        break;
      }
    }
  }
  absl::StrAppend(out, rest.substr(0, rest.size() - keep));
  held_ = std::string(rest.substr(rest.size() - keep));
}

std::string HttpIntercept::Mask(absl::string_view text, std::vector<std::string>* hits) const {
  Masker m;
  m.Reset(&mask_);
  std::string out;
  m.Add(text, &out, hits);
  m.Finish(&out, hits);
  return out;
}

void HttpIntercept::ReportRangeDropped(const std::string& secret) {
  std::string why =
      "Range left out of a request that carries it (a part of a response could "
      "hold a slice of it)";
  bool seen = std::any_of(events_.begin(), events_.end(), [&](const InterceptEvent& e) {
    return e.secret == secret && e.where == why;
  });
  if (!seen) events_.push_back({secret, false, why});
}

void HttpIntercept::ReportMasked(const std::vector<std::string>& hits) {
  for (const std::string& name : hits) {
    std::string why = "the server sent it back; the guest got the placeholder";
    bool seen = std::any_of(events_.begin(), events_.end(), [&](const InterceptEvent& e) {
      return e.secret == name && e.where == why;
    });
    if (!seen) events_.push_back({name, false, why});
  }
}

absl::Status HttpIntercept::BadResponse(absl::string_view reason, std::string* guest) {
  upstream_failed_ = true;
  // The reason may quote the server's bytes, which may hold the value.
  // (And the message goes to the session's log, where no value may be written either.)
  std::vector<std::string> hits;
  std::string masked = Mask(reason, &hits);
  if (!started_response_) guest->append(ErrorResponse(502, masked));
  return absl::UnavailableError(absl::StrCat("the response from ", host_, ": ", masked));
}

void HttpIntercept::FailUpstream(absl::string_view reason, std::string* guest) {
  BadResponse(reason, guest).IgnoreError();  // the caller ends the connection
}

absl::Status HttpIntercept::FromUpstream(absl::string_view bytes, std::string* guest) {
  if (upstream_failed_) return absl::FailedPreconditionError("the connection failed already");
  upstream_in_.append(bytes.data(), bytes.size());
  for (;;) {
    if (response_.body == Body::kNone) {
      if (upstream_in_.empty()) return absl::OkStatus();
      std::string error;
      size_t end = FindHeadEnd(upstream_in_, &error);
      if (!error.empty()) return BadResponse(error, guest);
      if (end == std::string::npos) return absl::OkStatus();
      std::string head = upstream_in_.substr(0, end);
      upstream_in_.erase(0, end + 4);
      if (absl::Status s = UpstreamHead(head, guest); !s.ok()) return s;
      continue;
    }
    size_t before = upstream_in_.size();
    Body state = response_.body;
    if (absl::Status s = UpstreamBody(guest); !s.ok()) return s;
    if (upstream_in_.size() == before && response_.body == state) return absl::OkStatus();
  }
}

absl::Status HttpIntercept::UpstreamHead(absl::string_view text, std::string* guest) {
  if (pending_.empty()) return BadResponse("a response came to no request", guest);
  started_response_ = false;
  Head head;
  if (std::string error = ParseHead(text, &head); !error.empty()) return BadResponse(error, guest);
  std::vector<absl::string_view> parts = absl::StrSplit(head.start, absl::MaxSplits(' ', 2));
  int code = 0;
  if (parts.size() < 2 || (parts[0] != "HTTP/1.1" && parts[0] != "HTTP/1.0") ||
      parts[1].size() != 3 || !absl::SimpleAtoi(parts[1], &code) || code < 100) {
    return BadResponse("the status line is not HTTP/1.x", guest);
  }
  if (code == 101) return BadResponse("the server switched protocols, which is refused", guest);
  bool interim = code < 200;
  bool no_body = interim || code == 204 || code == 304 || pending_.front().head_method;
  bool has_length = false;
  uint64_t length = 0;
  if (std::string error = ContentLength(head, &has_length, &length); !error.empty()) {
    return BadResponse(error, guest);
  }
  std::string coding;
  int codings = CountFields(head, "transfer-encoding", &coding);
  if (!no_body && codings > 0 && coding != "chunked") {
    return BadResponse("a Transfer-Encoding other than chunked", guest);
  }
  std::string encoding;
  if (!no_body && CountFields(head, "content-encoding", &encoding) > 0 && encoding != "identity") {
    return BadResponse(
        absl::StrCat("the server compressed its response (Content-Encoding ",
                     Printable(encoding, 32),
                     ") on a connection that carries a secret, which would hide it from the mask"),
        guest);
  }
  bool same_length = std::all_of(mask_.begin(), mask_.end(),
                                 [](const Replacement& r) { return r.from.size() == r.to.size(); });
  Framing framing;
  if (no_body) {
    framing = {Body::kNone, 0};
  } else if (codings > 0) {
    framing = {Body::kChunkSize, 0};
  } else if (has_length) {
    framing = {length == 0 ? Body::kNone : Body::kLength, length};
  } else {
    framing = {Body::kToClose, 0};
  }
  rechunk_ = framing.body == Body::kChunkSize ||
             (framing.body == Body::kLength && !same_length && !mask_.empty());
  std::vector<std::string> hits;
  std::string out = absl::StrCat(Mask(head.start, &hits), kCrlf);
  for (const Header& h : head.headers) {
    bool framing_field = absl::EqualsIgnoreCase(h.name, "transfer-encoding") ||
                         absl::EqualsIgnoreCase(h.name, "content-length");
    if (framing_field && (rechunk_ || codings > 0) && !no_body) continue;
    absl::StrAppend(&out, Mask(absl::StrCat(h.name, ": ", h.value), &hits), kCrlf);
  }
  if (rechunk_) absl::StrAppend(&out, "Transfer-Encoding: chunked", kCrlf);
  out += kCrlf;
  ReportMasked(hits);
  guest->append(out);
  started_response_ = true;
  response_ = framing;
  masker_.Reset(&mask_);
  if (interim) {
    started_response_ = false;
  } else if (response_.body == Body::kNone) {
    pending_.pop_front();
    started_response_ = false;
  }
  return absl::OkStatus();
}

absl::Status HttpIntercept::UpstreamBody(std::string* guest) {
  std::vector<std::string> hits;
  auto emit = [&](absl::string_view bytes) {
    std::string masked;
    masker_.Add(bytes, &masked, &hits);
    guest->append(rechunk_ ? Chunk(masked) : masked);
  };
  auto end = [&](absl::string_view trailers) {
    std::string masked;
    masker_.Finish(&masked, &hits);
    if (rechunk_) {
      absl::StrAppend(guest, Chunk(masked), "0", kCrlf, trailers, kCrlf);
    } else {
      guest->append(masked);
    }
    response_ = {Body::kNone, 0};
    pending_.pop_front();
    started_response_ = false;
  };
  auto line = [&](std::string* out) -> int {
    size_t at = upstream_in_.find(kCrlf);
    if (at == std::string::npos) return upstream_in_.size() > kMaxHttpLineBytes ? -1 : 0;
    if (at > kMaxHttpLineBytes) return -1;
    *out = upstream_in_.substr(0, at);
    upstream_in_.erase(0, at + 2);
    return 1;
  };
  absl::Status status = absl::OkStatus();
  switch (response_.body) {
    case Body::kNone:
      break;
    case Body::kToClose:
      emit(upstream_in_);
      upstream_in_.clear();
      break;
    case Body::kLength:
    case Body::kChunkData: {
      size_t n = static_cast<size_t>(std::min<uint64_t>(response_.remaining, upstream_in_.size()));
      if (n == 0) break;
      emit(absl::string_view(upstream_in_).substr(0, n));
      upstream_in_.erase(0, n);
      response_.remaining -= n;
      if (response_.remaining > 0) break;
      if (response_.body == Body::kLength) {
        end("");
      } else {
        response_.body = Body::kChunkDataEnd;
      }
      break;
    }
    case Body::kChunkSize: {
      std::string text;
      int got = line(&text);
      uint64_t size = 0;
      if (got < 0 || (got > 0 && !ChunkSize(text, &size))) {
        status = BadResponse("a bad chunk-size line", guest);
        break;
      }
      if (got > 0) {
        response_ = size == 0 ? Framing{Body::kTrailers, 0} : Framing{Body::kChunkData, size};
        trailers_.clear();
      }
      break;
    }
    case Body::kChunkDataEnd:
      if (upstream_in_.size() < 2) break;
      if (upstream_in_.compare(0, 2, kCrlf) != 0) {
        status = BadResponse("a chunk's data is longer than its size", guest);
        break;
      }
      upstream_in_.erase(0, 2);
      response_.body = Body::kChunkSize;
      break;
    case Body::kTrailers: {
      std::string text;
      int got = line(&text);
      if (got < 0 || trailers_.size() > kMaxHttpHeadBytes) {
        status = BadResponse("the trailers are too long", guest);
        break;
      }
      if (got == 0) break;
      if (!text.empty()) {
        absl::StrAppend(&trailers_, Mask(text, &hits), kCrlf);
        break;
      }
      end(trailers_);
      break;
    }
  }
  ReportMasked(hits);
  return status;
}

absl::Status HttpIntercept::UpstreamEnded(std::string* guest) {
  if (response_.body == Body::kToClose) {
    std::vector<std::string> hits;
    std::string masked;
    masker_.Finish(&masked, &hits);
    guest->append(masked);
    ReportMasked(hits);
    response_ = {Body::kNone, 0};
    pending_.pop_front();
    return absl::OkStatus();
  }
  if (response_.body == Body::kNone && upstream_in_.empty()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(host_, " closed the connection inside a response"));
}

}  // namespace airlock::net
