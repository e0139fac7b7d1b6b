#include "src/net/http_request_head.h"

#include <http_parser.h>

#include <algorithm>
#include <string_view>
#include <utility>
#include <vector>

namespace airlock::net {
namespace {

// RFC 1035 caps a name at 255 bytes; nothing longer is a host the proxy could have allowed.
constexpr size_t kMaxHostBytes = 255;

char Lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return Lower(x) == Lower(y); });
}

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsHex(char c) { return IsDigit(c) || (Lower(c) >= 'a' && Lower(c) <= 'f'); }
bool IsNameChar(char c) {
  return IsDigit(c) || (Lower(c) >= 'a' && Lower(c) <= 'z') || c == '-' || c == '.' || c == '_';
}

// RFC 9110 5.6.2: tchar.
bool IsTokenChar(char c) {
  return IsDigit(c) || (Lower(c) >= 'a' && Lower(c) <= 'z') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

// A guest's bytes as they may appear in a message: quoted, cut short, unprintables replaced.
std::string Quote(std::string_view s) {
  constexpr size_t kMaxShown = 64;
  std::string out = "\"";
  for (char c : s.substr(0, kMaxShown)) {
    out.push_back(c >= 0x20 && c <= 0x7e && c != '"' && c != '\\' ? c : '?');
  }
  if (s.size() > kMaxShown) out += "...";
  return out + "\"";
}

// Splits an authority (RFC 3986 host [":" port], without user info) into its host, lower-cased
// and without brackets. Returns an empty string on success, else why `authority` is refused.
std::string ParseAuthority(std::string_view authority, std::string* host) {
  if (authority.empty()) return "is empty";
  std::string_view name, rest;
  if (authority[0] == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return "has an IPv6 address without its ']'";
    name = authority.substr(1, close - 1);
    rest = authority.substr(close + 1);
    if (name.find(':') == std::string_view::npos ||
        !std::all_of(name.begin(), name.end(),
                     [](char c) { return IsHex(c) || c == ':' || c == '.'; })) {
      return "has a bad IPv6 address";
    }
  } else {
    size_t colon = authority.find(':');
    name = authority.substr(0, std::min(colon, authority.size()));
    rest = authority.substr(name.size());
    if (name.empty()) return "has no host";
    if (!std::all_of(name.begin(), name.end(), IsNameChar)) return "is not a host name or address";
  }
  if (name.size() > kMaxHostBytes) return "names a host longer than 255 bytes";
  if (!rest.empty()) {
    std::string_view port = rest.substr(1);
    if (rest[0] != ':' || port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), IsDigit)) {
      return "has a bad port";
    }
    uint32_t number = 0;
    for (char c : port) number = number * 10 + static_cast<uint32_t>(c - '0');
    if (number == 0 || number > 65535) return "has a bad port";
  }
  host->clear();
  for (char c : name) host->push_back(Lower(c));
  return {};
}

// Finds the host of an absolute-form request-target ("http://host:port/path"); leaves *host
// empty for origin-form and asterisk-form. Returns an empty string on success, else why not.
std::string ParseTarget(std::string_view target, std::string* host) {
  host->clear();
  if (target == "*" || (!target.empty() && target[0] == '/')) return {};
  size_t scheme_end = target.find("://");
  std::string_view scheme = target.substr(0, std::min(scheme_end, target.size()));
  if (scheme_end == std::string_view::npos ||
      !(EqualsIgnoreCase(scheme, "http") || EqualsIgnoreCase(scheme, "https"))) {
    return "request target " + Quote(target) + " is neither a path nor an http:// URL";
  }
  std::string_view authority = target.substr(scheme_end + 3);
  authority = authority.substr(0, std::min(authority.find_first_of("/?#"), authority.size()));
  if (authority.find('@') != std::string_view::npos) {
    return "request target " + Quote(target) + " carries user info";
  }
  std::string why = ParseAuthority(authority, host);
  if (!why.empty()) return "request target " + Quote(target) + "'s authority " + why;
  return {};
}

// What the parser's callbacks collect from one pass over the bytes.
struct Collected {
  std::string url;
  std::string field;               // the name of the header being read
  std::string value;               // and its value so far
  bool in_header = false;          // field holds a header name not yet ended
  bool in_value = false;           // the last header callback was for the value
  std::vector<std::string> hosts;  // the values of the Host headers
  bool complete = false;           // the header block has ended
  std::string bad_name;            // the first header name that is not a token
};

Collected& Of(http_parser* parser) { return *static_cast<Collected*>(parser->data); }

void EndHeader(Collected* c) {
  // Debian builds http_parser lenient about spaces in names; a server that read "Host :" as Host
  // would see a host this parser did not.
  if (c->in_header && c->bad_name.empty() &&
      !std::all_of(c->field.begin(), c->field.end(), IsTokenChar)) {
    c->bad_name = c->field;
  }
  if (c->in_header && EqualsIgnoreCase(c->field, "host")) c->hosts.push_back(c->value);
  c->field.clear();
  c->value.clear();
  c->in_header = false;
  c->in_value = false;
}

// The callbacks only collect; every check waits for the end of the head. http_parser hands over
// what it has of a name or value when its buffer ends, but not when it stops at a bad byte, so a
// check made on a piece could refuse a prefix that the whole would refuse for another reason.
int OnUrl(http_parser* parser, const char* at, size_t length) {
  Of(parser).url.append(at, length);
  return 0;
}

int OnHeaderField(http_parser* parser, const char* at, size_t length) {
  Collected& c = Of(parser);
  if (c.in_value) EndHeader(&c);
  c.in_header = true;
  c.field.append(at, length);
  return 0;
}

int OnHeaderValue(http_parser* parser, const char* at, size_t length) {
  Collected& c = Of(parser);
  c.in_value = true;
  c.value.append(at, length);
  return 0;
}

int OnHeadersComplete(http_parser* parser) {
  Collected& c = Of(parser);
  EndHeader(&c);
  c.complete = true;
  // Stop at the end of the head: the body and any pipelined requests are not ours to read.
  http_parser_pause(parser, 1);
  return 0;
}

std::string_view TrimWhitespace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Checks a complete head and fills *head. Returns an empty string on success, else why not.
std::string Finish(const http_parser& parser, const Collected& c, HttpRequestHead* head) {
  if (parser.method == HTTP_CONNECT) {
    return "CONNECT is not relayed: the egress proxy is transparent, so connect to the allowed "
           "host by its name instead of asking a proxy to";
  }
  if (parser.http_major != 1 || parser.http_minor > 1) {
    return "HTTP version " + std::to_string(parser.http_major) + "." +
           std::to_string(parser.http_minor) + " is not 1.0 or 1.1";
  }
  if (!c.bad_name.empty()) return "header name " + Quote(c.bad_name) + " is not a token";
  std::string target_host;
  std::string why = ParseTarget(c.url, &target_host);
  if (!why.empty()) return why;
  if (c.hosts.size() > 1) return "the request has more than one Host header";
  std::string host;
  if (c.hosts.empty()) {
    // RFC 9112 3.2: every HTTP/1.1 request carries Host; an HTTP/1.0 one may name its host in
    // the target instead.
    if (target_host.empty() || parser.http_minor != 0) return "no Host header";
    host = std::move(target_host);
  } else {
    std::string_view value = TrimWhitespace(c.hosts[0]);
    why = ParseAuthority(value, &host);
    if (!why.empty()) return "Host header " + Quote(value) + " " + why;
    // A server should take the target's host over the Host header (RFC 9112 3.2.2), but not all
    // do: refuse a request that names two hosts rather than guess which one is used.
    if (!target_host.empty() && target_host != host) {
      return "Host header " + Quote(value) + " names another host than the request target " +
             Quote(c.url);
    }
  }
  head->method = http_method_str(static_cast<http_method>(parser.method));
  head->host = std::move(host);
  head->target = c.url;
  return {};
}

const http_parser_settings kSettings = [] {
  http_parser_settings settings;
  http_parser_settings_init(&settings);
  settings.on_url = OnUrl;
  settings.on_header_field = OnHeaderField;
  settings.on_header_value = OnHeaderValue;
  settings.on_headers_complete = OnHeadersComplete;
  return settings;
}();

}  // namespace

HeadResult PeekHttpRequestHead(std::span<const uint8_t> bytes, HttpRequestHead* head,
                               std::string* error) {
  *head = {};
  if (error != nullptr) error->clear();
  auto malformed = [&](std::string message) {
    *head = {};
    if (error != nullptr) *error = std::move(message);
    return HeadResult::kMalformed;
  };
  // Only the first kMaxRequestHeadBytes count, so the answer for a longer buffer is the answer
  // for that prefix; running out of them is final, running out of bytes below them is not.
  const bool capped = bytes.size() >= kMaxRequestHeadBytes;
  const std::span<const uint8_t> in = bytes.first(std::min(bytes.size(), kMaxRequestHeadBytes));
  // http_parser takes an empty buffer as the end of the stream.
  if (in.empty()) return HeadResult::kNeedMore;

  Collected collected;
  http_parser parser;
  http_parser_init(&parser, HTTP_REQUEST);
  parser.data = &collected;
  const size_t parsed =
      http_parser_execute(&parser, &kSettings, reinterpret_cast<const char*>(in.data()), in.size());
  if (collected.complete) {
    std::string why = Finish(parser, collected, head);
    if (!why.empty()) return malformed(std::move(why));
    return HeadResult::kDone;
  }
  const http_errno err = HTTP_PARSER_ERRNO(&parser);
  if (err != HPE_OK || parsed != in.size()) {
    return malformed(std::string("not an HTTP/1.x request: ") + http_errno_description(err));
  }
  if (capped) return malformed("HTTP request head larger than 16 KiB");
  return HeadResult::kNeedMore;
}

}  // namespace airlock::net
