#include "src/net/tls_client_hello.h"

#include <algorithm>
#include <cstdio>
#include <utility>

namespace airlock::net {
namespace {

constexpr uint8_t kRecordHandshake = 22;
constexpr size_t kRecordHeaderSize = 5;
constexpr size_t kMaxRecordLength = size_t{1} << 14;  // RFC 8446 5.1: TLSPlaintext.length
constexpr uint8_t kHandshakeClientHello = 1;
constexpr size_t kHandshakeHeaderSize = 4;
constexpr size_t kRandomSize = 32;
constexpr size_t kMaxSessionIdSize = 32;
constexpr uint16_t kExtensionServerName = 0;
constexpr uint16_t kExtensionAlpn = 16;
constexpr uint16_t kExtensionEncryptedClientHello = 0xfe0d;  // draft-ietf-tls-esni
constexpr uint8_t kNameTypeHostName = 0;

std::string Hex(unsigned value, int digits) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "0x%0*x", digits, value);
  return buf;
}

// A cursor over a span. Every read checks its length against what is left first, so a read
// never leaves the span; a failed read leaves the cursor where it was.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> in) : in_(in) {}

  bool empty() const { return in_.empty(); }
  size_t remaining() const { return in_.size(); }

  bool Bytes(size_t n, std::span<const uint8_t>* out) {
    if (n > in_.size()) return false;
    *out = in_.first(n);
    in_ = in_.subspan(n);
    return true;
  }

  bool U8(uint8_t* v) {
    std::span<const uint8_t> b;
    if (!Bytes(1, &b)) return false;
    *v = b[0];
    return true;
  }

  bool U16(uint16_t* v) {
    std::span<const uint8_t> b;
    if (!Bytes(2, &b)) return false;
    *v = static_cast<uint16_t>((b[0] << 8) | b[1]);
    return true;
  }

  // A vector with a one-byte length prefix (TLS's opaque<0..2^8-1>).
  bool Vector8(std::span<const uint8_t>* out) {
    Reader saved = *this;
    uint8_t n;
    if (U8(&n) && Bytes(n, out)) return true;
    *this = saved;
    return false;
  }

  // A vector with a two-byte length prefix (TLS's opaque<0..2^16-1>).
  bool Vector16(std::span<const uint8_t>* out) {
    Reader saved = *this;
    uint16_t n;
    if (U16(&n) && Bytes(n, out)) return true;
    *this = saved;
    return false;
  }

 private:
  std::span<const uint8_t> in_;
};

// Why a ClientHello was refused; empty while it is acceptable.
using Why = std::string;

Why ParseServerName(std::span<const uint8_t> data, std::string* sni) {
  Reader ext(data);
  std::span<const uint8_t> list;
  if (!ext.Vector16(&list) || !ext.empty()) {
    return "ClientHello's server_name extension does not hold exactly its name list";
  }
  if (list.empty()) return "ClientHello's server_name list is empty";
  Reader entries(list);
  uint8_t type;
  std::span<const uint8_t> name;
  if (!entries.U8(&type) || !entries.Vector16(&name)) {
    return "ClientHello's server_name entry runs past the end of its list";
  }
  if (type != kNameTypeHostName) {
    return "ClientHello's server_name entry has unknown type " + std::to_string(type);
  }
  // RFC 6066 allows one name of each type, and host_name is the only type: a second entry is
  // either a second host_name or one no server understands. Refuse both rather than guess which
  // name the server would use.
  if (!entries.empty()) return "ClientHello's server_name list holds more than one name";
  if (name.empty()) return "ClientHello's server name is empty";
  if (name.size() > kMaxServerNameBytes) {
    return "ClientHello's server name of " + std::to_string(name.size()) +
           " bytes is longer than " + std::to_string(kMaxServerNameBytes);
  }
  std::string lowered;
  lowered.reserve(name.size());
  for (uint8_t c : name) {
    if (c < 0x21 || c > 0x7e) {
      return "ClientHello's server name contains byte " + Hex(c, 2) +
             ", which is not printable ASCII";
    }
    lowered.push_back(c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a')
                                           : static_cast<char>(c));
  }
  *sni = std::move(lowered);
  return {};
}

Why ParseAlpn(std::span<const uint8_t> data, std::vector<std::string>* alpn) {
  Reader ext(data);
  std::span<const uint8_t> list;
  if (!ext.Vector16(&list) || !ext.empty()) {
    return "ClientHello's ALPN extension does not hold exactly its protocol list";
  }
  if (list.empty()) return "ClientHello's ALPN protocol list is empty";
  Reader names(list);
  while (!names.empty()) {
    std::span<const uint8_t> name;
    if (!names.Vector8(&name)) return "ClientHello's ALPN protocol name runs past its list";
    if (name.empty()) return "ClientHello's ALPN list holds an empty protocol name";
    alpn->emplace_back(name.begin(), name.end());
  }
  return {};
}

// Parses a complete ClientHello body (after the handshake header), exactly body.size() bytes.
Why ParseClientHelloBody(std::span<const uint8_t> body, ClientHelloInfo* info) {
  Reader r(body);
  uint16_t version;
  std::span<const uint8_t> random, session_id, cipher_suites, compression;
  if (!r.U16(&version)) return "ClientHello is too short to hold its version";
  if ((version >> 8) != 3) return "ClientHello has unknown version " + Hex(version, 4);
  if (!r.Bytes(kRandomSize, &random)) return "ClientHello is too short to hold its random";
  if (!r.Vector8(&session_id)) return "ClientHello's session id runs past its end";
  if (session_id.size() > kMaxSessionIdSize) {
    return "ClientHello's session id of " + std::to_string(session_id.size()) +
           " bytes is longer than " + std::to_string(kMaxSessionIdSize);
  }
  if (!r.Vector16(&cipher_suites)) return "ClientHello's cipher suites run past its end";
  if (cipher_suites.empty() || cipher_suites.size() % 2 != 0) {
    return "ClientHello's cipher suite list has a bad length of " +
           std::to_string(cipher_suites.size()) + " bytes";
  }
  if (!r.Vector8(&compression)) return "ClientHello's compression methods run past its end";
  if (compression.empty()) return "ClientHello lists no compression method";
  if (r.empty()) return {};  // a ClientHello without extensions, so without a server name

  std::span<const uint8_t> extensions;
  if (!r.Vector16(&extensions)) return "ClientHello's extension list runs past its end";
  if (!r.empty()) {
    return "ClientHello has " + std::to_string(r.remaining()) + " bytes after its extension list";
  }
  Reader ext(extensions);
  std::vector<uint16_t> types;
  while (!ext.empty()) {
    uint16_t type;
    std::span<const uint8_t> data;
    if (!ext.U16(&type) || !ext.Vector16(&data)) {
      return "ClientHello's extension runs past the end of its extension list";
    }
    types.push_back(type);
    Why why;
    if (type == kExtensionServerName) {
      why = ParseServerName(data, &info->sni);
    } else if (type == kExtensionAlpn) {
      why = ParseAlpn(data, &info->alpn);
    } else if (type == kExtensionEncryptedClientHello) {
      info->encrypted_client_hello = true;
    }
    if (!why.empty()) return why;
  }
  // RFC 8446 4.2: no extension type twice. A second server_name is how a client would show the
  // proxy one name and the server another.
  std::sort(types.begin(), types.end());
  auto twice = std::adjacent_find(types.begin(), types.end());
  if (twice != types.end()) return "ClientHello has extension " + std::to_string(*twice) + " twice";
  return {};
}

}  // namespace

PeekResult PeekClientHello(std::span<const uint8_t> bytes, ClientHelloInfo* info,
                           std::string* error) {
  *info = {};
  if (error != nullptr) error->clear();
  auto fail = [&](PeekResult result, std::string message) {
    *info = {};
    if (error != nullptr) *error = std::move(message);
    return result;
  };
  // Only the first kMaxClientHelloBytes count, so the answer for a longer buffer is the answer
  // for that prefix; running out of them is final, running out of bytes below them is not.
  const bool capped = bytes.size() >= kMaxClientHelloBytes;
  const std::span<const uint8_t> in = bytes.first(std::min(bytes.size(), kMaxClientHelloBytes));
  auto need_more = [&]() {
    if (!capped) return PeekResult::kNeedMore;
    return fail(PeekResult::kMalformed, "ClientHello larger than 32 KiB");
  };

  // Each field is checked as soon as its bytes are there, in wire order, so a shorter buffer
  // either runs out first (kNeedMore) or fails on the same field as a longer one.
  std::vector<uint8_t> message;  // the handshake message, reassembled from record fragments
  size_t pos = 0;                // start of the current record in `in`
  for (bool first = true;; first = false) {
    const std::span<const uint8_t> record = in.subspan(pos);
    // A first record header that is not TLS's means the connection is not TLS at all; once the
    // ClientHello has begun, it means the ClientHello is broken.
    const PeekResult not_tls = first ? PeekResult::kNotTls : PeekResult::kMalformed;
    if (record.empty()) return need_more();
    if (record[0] != kRecordHandshake) {
      if (first) {
        return fail(PeekResult::kNotTls,
                    "the connection does not start with a TLS handshake record (first byte " +
                        Hex(record[0], 2) + ")");
      }
      return fail(PeekResult::kMalformed, "a TLS record of type " + std::to_string(record[0]) +
                                              " came before the ClientHello was complete");
    }
    if (record.size() < 2) return need_more();
    if (record[1] != 3) {
      return fail(not_tls, "TLS record has unknown major version " + std::to_string(record[1]));
    }
    if (record.size() < 3) return need_more();
    if (record[2] < 1 || record[2] > 4) {
      return fail(PeekResult::kMalformed,
                  "TLS record has unsupported version " + Hex(0x0300u | record[2], 4));
    }
    if (record.size() < kRecordHeaderSize) return need_more();
    const size_t length = (size_t{record[3]} << 8) | record[4];
    if (length == 0 || length > kMaxRecordLength) {
      return fail(PeekResult::kMalformed,
                  "TLS handshake record has a bad length of " + std::to_string(length) + " bytes");
    }
    const size_t have = std::min(length, record.size() - kRecordHeaderSize);
    const std::span<const uint8_t> fragment = record.subspan(kRecordHeaderSize, have);
    message.insert(message.end(), fragment.begin(), fragment.end());

    if (message.empty()) return need_more();
    if (message[0] != kHandshakeClientHello) {
      return fail(PeekResult::kMalformed, "the first TLS handshake message has type " +
                                              std::to_string(message[0]) + ", not ClientHello");
    }
    if (message.size() >= kHandshakeHeaderSize) {
      const size_t body_size =
          (size_t{message[1]} << 16) | (size_t{message[2]} << 8) | size_t{message[3]};
      // Even in a single record it needs a record header besides its own header and body.
      if (body_size > kMaxClientHelloBytes - kRecordHeaderSize - kHandshakeHeaderSize) {
        return fail(PeekResult::kMalformed, "ClientHello larger than 32 KiB");
      }
      if (message.size() - kHandshakeHeaderSize >= body_size) {
        const std::span<const uint8_t> body(message.data() + kHandshakeHeaderSize, body_size);
        Why why = ParseClientHelloBody(body, info);
        if (!why.empty()) return fail(PeekResult::kMalformed, std::move(why));
        return PeekResult::kDone;
      }
    }
    if (have < length) return need_more();
    pos += kRecordHeaderSize + length;
  }
}

}  // namespace airlock::net
