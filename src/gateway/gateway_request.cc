#include "src/gateway/gateway_request.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace airlock::gateway {
namespace {

bool IsTokenChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
         absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

bool IsToken(absl::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!IsTokenChar(c)) return false;
  }
  return true;
}

// 1..65535, decimal, no sign, no leading zero.
bool ParsePort(absl::string_view s, uint16_t* port) {
  if (s.empty() || s.size() > 5 || s[0] == '0') return false;
  uint32_t value = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    value = value * 10 + static_cast<uint32_t>(c - '0');
  }
  if (value > 65535) return false;
  *port = static_cast<uint16_t>(value);
  return true;
}

bool IsSessionId(absl::string_view s) {
  if (s.size() != 12) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

absl::string_view TrimSpaces(absl::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// "PORT-ID.DOMAIN" with an optional ":port" after it.
bool RouteFromHost(absl::string_view host, absl::string_view domain, std::string* id,
                   uint16_t* port) {
  if (host.empty() || host.front() == '[' || domain.empty()) return false;
  if (size_t colon = host.rfind(':'); colon != absl::string_view::npos)
    host = host.substr(0, colon);
  std::string name = absl::AsciiStrToLower(host);
  std::string suffix = absl::StrCat(".", domain);
  if (!absl::EndsWith(name, suffix)) return false;
  absl::string_view label = absl::string_view(name).substr(0, name.size() - suffix.size());
  size_t dash = label.find('-');
  if (label.find('.') != absl::string_view::npos || dash == absl::string_view::npos) return false;
  absl::string_view session = label.substr(dash + 1);
  uint16_t named = 0;
  if (!ParsePort(label.substr(0, dash), &named) || !IsSessionId(session)) return false;
  *port = named;
  *id = std::string(session);
  return true;
}

// Takes every airlock_token parameter out of an origin-form target's query.
void TakeQueryToken(absl::string_view target, std::string* token, std::string* rest) {
  size_t question = target.find('?');
  if (target.empty() || target.front() != '/' || question == absl::string_view::npos) {
    *rest = std::string(target);
    return;
  }
  std::vector<absl::string_view> kept;
  for (absl::string_view param : absl::StrSplit(target.substr(question + 1), '&')) {
    absl::string_view name = param.substr(0, param.find('='));
    if (name != kTokenParameter) {
      kept.push_back(param);
    } else if (token->empty() && name.size() < param.size()) {
      *token = std::string(param.substr(name.size() + 1));
    }
  }
  *rest = std::string(target.substr(0, question));
  if (!kept.empty()) absl::StrAppend(rest, "?", absl::StrJoin(kept, "&"));
}

GatewayParse Malformed(std::string* error, GatewayRequest* request, std::string message) {
  *request = GatewayRequest();
  *error = std::move(message);
  return GatewayParse::kMalformed;
}

}  // namespace

GatewayParse ParseGatewayRequest(absl::string_view bytes, absl::string_view domain,
                                 GatewayRequest* request, std::string* error) {
  *request = GatewayRequest();
  error->clear();
  absl::string_view rest = bytes.substr(0, kMaxGatewayHeadBytes);
  GatewayRequest r;
  int hosts = 0, session_headers = 0, port_headers = 0;
  std::string session_header, port_header;
  bool first = true;
  for (;;) {
    size_t newline = rest.find('\n');
    if (newline == absl::string_view::npos) {
      if (bytes.size() >= kMaxGatewayHeadBytes) {
        return Malformed(
            error, request,
            absl::StrCat("the request head is longer than ", kMaxGatewayHeadBytes, " bytes"));
      }
      return GatewayParse::kNeedMore;
    }
    absl::string_view line = rest.substr(0, newline);
    rest.remove_prefix(newline + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    for (char c : line) {
      if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7f) {
        return Malformed(error, request, "the request head holds a control character");
      }
    }
    if (first) {
      first = false;
      std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
      if (parts.size() != 3 || !IsToken(parts[0]) || parts[1].empty() ||
          (parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0")) {
        return Malformed(error, request,
                         "not an HTTP/1.x request line (\"METHOD TARGET HTTP/1.1\")");
      }
      for (char c : parts[1]) {
        if (c == '\t' || static_cast<unsigned char>(c) >= 0x80) {
          return Malformed(error, request, "the request target holds a byte it may not");
        }
      }
      r.method = std::string(parts[0]);
      r.target = std::string(parts[1]);
      continue;
    }
    if (line.empty()) break;
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos || !IsToken(line.substr(0, colon))) {
      return Malformed(error, request, "a header line is not \"Name: value\"");
    }
    std::string name = absl::AsciiStrToLower(line.substr(0, colon));
    absl::string_view value = TrimSpaces(line.substr(colon + 1));
    r.headers.emplace_back(name, std::string(value));
    if (name == "host") {
      ++hosts;
      r.host = std::string(value);
    } else if (name == "x-airlock-session") {
      ++session_headers;
      session_header = std::string(value);
    } else if (name == "x-airlock-port") {
      ++port_headers;
      port_header = std::string(value);
    } else if (name == "x-airlock-token") {
      r.tokens.insert(r.tokens.begin(), std::string(value));
    } else if (name == "cookie") {
      for (absl::string_view cookie : absl::StrSplit(value, ';')) {
        cookie = TrimSpaces(cookie);
        size_t eq = cookie.find('=');
        if (eq != absl::string_view::npos && cookie.substr(0, eq) == kTokenCookie) {
          r.tokens.push_back(std::string(cookie.substr(eq + 1)));
        }
      }
    } else if (name == "upgrade") {
      for (absl::string_view protocol : absl::StrSplit(value, ',')) {
        if (absl::EqualsIgnoreCase(TrimSpaces(protocol), "websocket")) r.websocket = true;
      }
    }
  }
  r.head_bytes = static_cast<size_t>(rest.data() - bytes.data());
  if (hosts != 1) {
    return Malformed(error, request, "a request must carry exactly one Host header");
  }
  if (session_headers > 1 || port_headers > 1) {
    return Malformed(error, request, "X-Airlock-Session and X-Airlock-Port may each be given once");
  }
  if (RouteFromHost(r.host, domain, &r.session_id, &r.port)) {
    // Named by its host: the headers, if any, are the application's business.
  } else if (session_headers + port_headers > 0) {
    if (session_headers != 1 || port_headers != 1) {
      return Malformed(error, request,
                       "routing by header takes both X-Airlock-Session (the session id) and "
                       "X-Airlock-Port (the guest's port)");
    }
    if (!IsSessionId(session_header)) {
      return Malformed(error, request,
                       "X-Airlock-Session is not a session id (12 lowercase hex digits)");
    }
    if (!ParsePort(port_header, &r.port)) {
      return Malformed(error, request, "X-Airlock-Port is not a TCP port (1 to 65535)");
    }
    r.session_id = session_header;
    r.by_header = true;
  }
  TakeQueryToken(r.target, &r.query_token, &r.target_without_token);
  *request = std::move(r);
  return GatewayParse::kDone;
}

GatewayParse DecodeChunked(absl::string_view bytes, size_t max, std::string* body,
                           std::string* error) {
  body->clear();
  error->clear();
  auto malformed = [&](std::string why) {
    body->clear();
    *error = std::move(why);
    return GatewayParse::kMalformed;
  };
  for (;;) {
    size_t eol = bytes.find("\r\n");
    if (eol == absl::string_view::npos) {
      return bytes.size() > 1024 ? malformed("a chunk's size line is too long")
                                 : GatewayParse::kNeedMore;
    }
    absl::string_view size_text = bytes.substr(0, eol);
    size_text = size_text.substr(0, size_text.find(';'));  // extensions are dropped
    size_text = TrimSpaces(size_text);
    if (size_text.empty() || size_text.size() > 8 ||
        size_text.find_first_not_of("0123456789abcdefABCDEF") != absl::string_view::npos) {
      return malformed("a chunk's size is not hexadecimal");
    }
    size_t size = 0;
    for (char c : size_text) {
      size = size * 16 + static_cast<size_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
    }
    bytes.remove_prefix(eol + 2);
    if (size == 0) {
      // Trailers, each a line, then an empty line.
      for (;;) {
        size_t end = bytes.find("\r\n");
        if (end == absl::string_view::npos) {
          return bytes.size() > kMaxGatewayHeadBytes ? malformed("the trailers are too long")
                                                     : GatewayParse::kNeedMore;
        }
        if (end == 0) return GatewayParse::kDone;
        bytes.remove_prefix(end + 2);
      }
    }
    if (body->size() + size > max) {
      return malformed(absl::StrCat("the body is larger than ", max, " bytes"));
    }
    if (bytes.size() < size + 2) return GatewayParse::kNeedMore;
    if (bytes.substr(size, 2) != "\r\n") return malformed("a chunk does not end with CRLF");
    body->append(bytes.data(), size);
    bytes.remove_prefix(size + 2);
  }
}

GatewayParse ChunkedDecoder::Add(absl::string_view bytes, std::string* data, std::string* error) {
  auto malformed = [&](std::string why) {
    state_ = State::kMalformed;
    pending_.clear();
    *error = std::move(why);
    return GatewayParse::kMalformed;
  };
  if (state_ == State::kDone) return GatewayParse::kDone;
  if (state_ == State::kMalformed) return malformed("the body is malformed");
  pending_.append(bytes.data(), bytes.size());
  absl::string_view rest = pending_;
  GatewayParse verdict = GatewayParse::kNeedMore;
  for (bool going = true; going;) {
    switch (state_) {
      case State::kSize: {
        size_t eol = rest.find("\r\n");
        if (eol == absl::string_view::npos) {
          if (rest.size() > 1024) return malformed("a chunk's size line is too long");
          going = false;
          break;
        }
        absl::string_view size_text = TrimSpaces(rest.substr(0, eol).substr(0, rest.find(';')));
        if (size_text.empty() || size_text.size() > 8 ||
            size_text.find_first_not_of("0123456789abcdefABCDEF") != absl::string_view::npos) {
          return malformed("a chunk's size is not hexadecimal");
        }
        left_ = 0;
        for (char c : size_text) {
          left_ = left_ * 16 + static_cast<size_t>(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
        }
        rest.remove_prefix(eol + 2);
        state_ = left_ == 0 ? State::kTrailers : State::kData;
        break;
      }
      case State::kData: {
        size_t n = std::min(left_, rest.size());
        data->append(rest.data(), n);
        rest.remove_prefix(n);
        left_ -= n;
        if (left_ > 0) {
          going = false;
        } else {
          state_ = State::kDataEnd;
        }
        break;
      }
      case State::kDataEnd:
        if (rest.size() < 2) {
          going = false;
        } else if (rest.substr(0, 2) != "\r\n") {
          return malformed("a chunk does not end with CRLF");
        } else {
          rest.remove_prefix(2);
          state_ = State::kSize;
        }
        break;
      case State::kTrailers: {
        size_t end = rest.find("\r\n");
        if (end == absl::string_view::npos) {
          if (rest.size() > kMaxGatewayHeadBytes) return malformed("the trailers are too long");
          going = false;
        } else if (end == 0) {
          state_ = State::kDone;
          rest = {};
          verdict = GatewayParse::kDone;
          going = false;
        } else {
          rest.remove_prefix(end + 2);
        }
        break;
      }
      case State::kDone:
      case State::kMalformed:
        going = false;
        break;
    }
  }
  pending_ = std::string(rest);
  return verdict;
}

std::string ExposureHost(uint16_t port, absl::string_view session_id, absl::string_view domain) {
  return absl::StrCat(port, "-", session_id, ".", domain);
}

}  // namespace airlock::gateway
