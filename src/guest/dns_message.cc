#include "src/guest/dns_message.h"

#include <algorithm>
#include <utility>

namespace airlock::guest {
namespace {

// A name has at most 127 labels, so no honest compression needs more jumps than that. The
// strictly-backwards rule already ends every chain; this bounds the work of a long one.
constexpr int kMaxPointerHops = 127;
// A query's additional section holds its OPT and perhaps a TSIG; more is not a real client.
constexpr uint16_t kMaxQueryAdditional = 4;

constexpr uint16_t kOpcodeMask = 0x7800;
constexpr uint16_t kRcodeMask = 0x000f;
// Where the question's name starts, for compression pointers to it.
constexpr uint16_t kQuestionNamePointer = 0xc000 | kDnsHeaderSize;

// The SOA of negative answers: its server and mailbox, and timers no client of ours uses.
constexpr std::string_view kSoaMname = "ns.airlock.internal";
constexpr std::string_view kSoaRname = "hostmaster.airlock.internal";
constexpr uint32_t kSoaSerial = 1;
constexpr uint32_t kSoaRefresh = 3600;
constexpr uint32_t kSoaRetry = 600;
constexpr uint32_t kSoaExpire = 86400;
// TTLs with the top bit set are read as 0 by some resolvers (RFC 2181 8).
constexpr uint32_t kMaxTtl = 0x7fffffff;

// Sizes of the records the builder writes: owner, type, class, TTL, RDLENGTH, RDATA.
constexpr size_t kRecordFixedBytes = 10;
constexpr size_t kARecordBytes = 2 + kRecordFixedBytes + 4;  // owner: pointer to the question
constexpr size_t kOptRecordBytes = 1 + kRecordFixedBytes;    // owner: root; no options
// Owner: a pointer or the root. A dotted name of n bytes is n + 2 bytes on the wire.
constexpr size_t kSoaRecordBytes =
    2 + kRecordFixedBytes + (kSoaMname.size() + 2) + (kSoaRname.size() + 2) + 5 * 4;
// So a reply without answers always fits in the smallest UDP limit, and only A records are ever
// left out for size.
static_assert(kDnsHeaderSize + kDnsMaxNameWireBytes + 4 + kSoaRecordBytes + kOptRecordBytes <=
              kDnsMaxUdpWithoutEdns);

uint16_t GetU16(std::string_view s, size_t at) {
  return static_cast<uint16_t>((static_cast<uint8_t>(s[at]) << 8) |
                               static_cast<uint8_t>(s[at + 1]));
}

void PutU16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v & 0xff));
}

void PutU32(std::string* out, uint32_t v) {
  PutU16(out, static_cast<uint16_t>(v >> 16));
  PutU16(out, static_cast<uint16_t>(v & 0xffff));
}

char LowerAscii(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

bool EqualsIgnoringAsciiCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (LowerAscii(a[i]) != LowerAscii(b[i])) return false;
  }
  return true;
}

// Reads big-endian fields, names and records from a message. Every read checks its bounds
// first; after one fails, all later ones fail and error() keeps the first message.
class WireReader {
 public:
  explicit WireReader(std::string_view packet) : packet_(packet) {}

  size_t remaining() const { return packet_.size() - pos_; }
  const std::string& error() const { return error_; }

  bool U16(uint16_t* v) {
    if (!Need(2)) return false;
    *v = GetU16(packet_, pos_);
    pos_ += 2;
    return true;
  }

  bool U32(uint32_t* v) {
    uint16_t high, low;
    if (!U16(&high) || !U16(&low)) return false;
    *v = (static_cast<uint32_t>(high) << 16) | low;
    return true;
  }

  bool Bytes(size_t n, std::string* out) {
    if (!Need(n)) return false;
    out->assign(packet_.substr(pos_, n));
    pos_ += n;
    return true;
  }

  // Reads a name into its dotted form (case kept), expanding compression pointers. A pointer
  // must land in the message after the header and strictly before where the labels it
  // continues began, so every chain ends; the hop and length caps bound the work.
  bool Name(std::string* dotted) {
    if (!error_.empty()) return false;
    dotted->clear();
    size_t p = pos_;
    size_t segment_start = pos_;  // a pointer must point before this
    size_t resume = 0;            // where reading goes on after a compressed name
    size_t wire_bytes = 1;        // the final zero
    int hops = 0;
    for (;;) {
      if (p >= packet_.size()) return Fail("name runs past the end of the message");
      const uint8_t length = static_cast<uint8_t>(packet_[p]);
      if ((length & 0xc0) == 0xc0) {
        if (p + 1 >= packet_.size()) return Fail("name runs past the end of the message");
        const size_t target = static_cast<size_t>(GetU16(packet_, p) & 0x3fff);
        if (target < kDnsHeaderSize || target >= segment_start) {
          return Fail("compression pointer at offset " + std::to_string(p) + " to offset " +
                      std::to_string(target) + " does not point backwards into the message");
        }
        if (++hops > kMaxPointerHops) return Fail("name has too many compression pointers");
        if (resume == 0) resume = p + 2;
        p = segment_start = target;
        continue;
      }
      if ((length & 0xc0) != 0) {
        return Fail("label at offset " + std::to_string(p) + " has a reserved type or is over " +
                    std::to_string(kDnsMaxLabelBytes) + " bytes");
      }
      if (length == 0) break;
      wire_bytes += 1 + length;
      if (wire_bytes > kDnsMaxNameWireBytes) {
        return Fail("name is longer than " + std::to_string(kDnsMaxNameWireBytes) + " bytes");
      }
      if (length > packet_.size() - p - 1) return Fail("name runs past the end of the message");
      const std::string_view label = packet_.substr(p + 1, length);
      if (label.find_first_of(std::string_view("\0.", 2)) != std::string_view::npos) {
        return Fail("label at offset " + std::to_string(p) + " contains a '.' or NUL byte");
      }
      if (!dotted->empty()) dotted->push_back('.');  // labels are never empty
      dotted->append(label);
      p += 1 + length;
    }
    pos_ = resume != 0 ? resume : p + 1;
    return true;
  }

  bool Record(DnsRecord* record) {
    uint16_t rdlength;
    return Name(&record->name) && U16(&record->type) && U16(&record->rclass) && U32(&record->ttl) &&
           U16(&rdlength) && Bytes(rdlength, &record->rdata);
  }

 private:
  bool Need(size_t n) {
    if (!error_.empty()) return false;
    if (n > remaining()) {
      return Fail("message ends early, at " + std::to_string(packet_.size()) + " bytes");
    }
    return true;
  }

  bool Fail(std::string message) {
    if (error_.empty()) error_ = std::move(message);
    return false;
  }

  std::string_view packet_;
  size_t pos_ = 0;
  std::string error_;
};

// Appends the wire form of a dotted name. False if it has an empty label, a label over 63
// bytes or with a NUL, or is over 255 bytes in all (*out is then partly written).
bool EncodeName(std::string_view dotted, std::string* out) {
  const size_t start = out->size();
  while (!dotted.empty()) {
    const size_t dot = dotted.find('.');
    const std::string_view label = dotted.substr(0, dot);
    if (label.empty() || label.size() > kDnsMaxLabelBytes ||
        label.find('\0') != std::string_view::npos) {
      return false;
    }
    out->push_back(static_cast<char>(label.size()));
    out->append(label);
    if (dot == std::string_view::npos) break;
    dotted.remove_prefix(dot + 1);
    if (dotted.empty()) return false;  // a trailing dot
  }
  out->push_back('\0');
  return out->size() - start <= kDnsMaxNameWireBytes;
}

void PutHeader(std::string* out, uint16_t id, uint16_t flags, uint16_t questions, uint16_t answers,
               uint16_t authority, uint16_t additional) {
  PutU16(out, id);
  PutU16(out, flags);
  PutU16(out, questions);
  PutU16(out, answers);
  PutU16(out, authority);
  PutU16(out, additional);
}

// The header's 4 rcode bits. An extended rcode needs OPT for its upper bits; without one the
// client is told SERVFAIL instead of something it would misread.
uint16_t HeaderRcode(DnsRcode rcode, bool has_opt) {
  const uint8_t value = static_cast<uint8_t>(rcode);
  if (value > kRcodeMask && !has_opt) return static_cast<uint16_t>(DnsRcode::kServFail);
  return value & kRcodeMask;
}

std::string HeaderOnlyReply(uint16_t id, uint16_t query_flags, DnsRcode rcode) {
  std::string out;
  PutHeader(&out, id,
            kDnsFlagQr | (query_flags & kOpcodeMask) | (query_flags & kDnsFlagRd) | kDnsFlagRa |
                HeaderRcode(rcode, /*has_opt=*/false),
            0, 0, 0, 0);
  return out;
}

// The SOA of a negative answer, owned by the parent of q's name: a pointer into the question
// (whose name starts at the header's end), or the root for a single label or the root itself.
void PutSoaRecord(std::string_view name, uint32_t negative_ttl, std::string* out) {
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos) {
    out->push_back('\0');
  } else {
    PutU16(out, static_cast<uint16_t>(kQuestionNamePointer + 1 + dot));
  }
  PutU16(out, kDnsTypeSoa);
  PutU16(out, kDnsClassIn);
  PutU32(out, negative_ttl);
  std::string rdata;
  EncodeName(kSoaMname, &rdata);
  EncodeName(kSoaRname, &rdata);
  PutU32(&rdata, kSoaSerial);
  PutU32(&rdata, kSoaRefresh);
  PutU32(&rdata, kSoaRetry);
  PutU32(&rdata, kSoaExpire);
  PutU32(&rdata, negative_ttl);  // MINIMUM: how long resolvers cache the negative answer
  PutU16(out, static_cast<uint16_t>(rdata.size()));
  out->append(rdata);
}

// An OPT's RDATA is a list of options, each u16 code, u16 length, data; they must fill it.
bool OptionsWellFormed(std::string_view rdata) {
  while (!rdata.empty()) {
    if (rdata.size() < 4) return false;
    const size_t length = GetU16(rdata, 2);
    if (length > rdata.size() - 4) return false;
    rdata.remove_prefix(4 + length);
  }
  return true;
}

}  // namespace

bool ParseDnsMessage(std::string_view packet, DnsMessage* message, std::string* error) {
  if (packet.size() < kDnsHeaderSize || packet.size() > kDnsMaxMessage) {
    *error = "a " + std::to_string(packet.size()) + "-byte message is not between " +
             std::to_string(kDnsHeaderSize) + " and " + std::to_string(kDnsMaxMessage) + " bytes";
    return false;
  }
  WireReader reader(packet);
  uint16_t counts[4];
  if (!reader.U16(&message->id) || !reader.U16(&message->flags) || !reader.U16(&counts[0]) ||
      !reader.U16(&counts[1]) || !reader.U16(&counts[2]) || !reader.U16(&counts[3])) {
    *error = reader.error();
    return false;
  }
  // The counts are not trusted to size anything: each entry read takes at least 5 bytes of the
  // packet, so the vectors grow only as far as the bytes go.
  message->questions.clear();
  for (uint16_t i = 0; i < counts[0]; ++i) {
    DnsMessage::Question& question = message->questions.emplace_back();
    if (!reader.Name(&question.name) || !reader.U16(&question.qtype) ||
        !reader.U16(&question.qclass)) {
      *error = "question " + std::to_string(i + 1) + ": " + reader.error();
      return false;
    }
  }
  struct Section {
    const char* what;
    std::vector<DnsRecord>* records;
    uint16_t count;
  };
  for (const Section& section : {Section{"answer", &message->answers, counts[1]},
                                 Section{"authority", &message->authority, counts[2]},
                                 Section{"additional", &message->additional, counts[3]}}) {
    section.records->clear();
    for (uint16_t i = 0; i < section.count; ++i) {
      if (!reader.Record(&section.records->emplace_back())) {
        *error =
            std::string(section.what) + " record " + std::to_string(i + 1) + ": " + reader.error();
        return false;
      }
    }
  }
  if (reader.remaining() != 0) {
    *error = std::to_string(reader.remaining()) + " bytes follow the last record";
    return false;
  }
  return true;
}

DnsParse ParseDnsQuery(std::string_view packet, DnsQuestion* q, std::string* error) {
  if (packet.size() < kDnsHeaderSize) {
    *error = "a " + std::to_string(packet.size()) + "-byte packet is shorter than a DNS header";
    return DnsParse::kMalformed;
  }
  const uint16_t flags = GetU16(packet, 2);
  if ((flags & kDnsFlagQr) != 0) {
    *error = "the packet is a response (QR set), not a query";
    return DnsParse::kNotQuery;
  }
  if (DnsOpcode(flags) != 0) {
    *error = "opcode " + std::to_string(DnsOpcode(flags)) + " is not supported, only QUERY (0)";
    return DnsParse::kNotQuery;
  }
  // Checked before decoding, so that a query cannot make the decoder expand thousands of
  // compressed names.
  const uint16_t questions = GetU16(packet, 4);
  const uint16_t answers = GetU16(packet, 6);
  const uint16_t authority = GetU16(packet, 8);
  const uint16_t additional = GetU16(packet, 10);
  if (questions != 1) {
    *error = "a query has exactly one question, not " + std::to_string(questions);
    return DnsParse::kMalformed;
  }
  if (answers != 0 || authority != 0 || additional > kMaxQueryAdditional) {
    *error = "a query has no answer or authority records and at most " +
             std::to_string(kMaxQueryAdditional) + " additional ones, not " +
             std::to_string(answers) + ", " + std::to_string(authority) + " and " +
             std::to_string(additional);
    return DnsParse::kMalformed;
  }
  DnsMessage message;
  if (!ParseDnsMessage(packet, &message, error)) return DnsParse::kMalformed;

  DnsQuestion parsed;
  for (const DnsRecord& record : message.additional) {
    if (record.type != kDnsTypeOpt) continue;
    if (parsed.has_edns) {
      *error = "a query has at most one OPT record";
      return DnsParse::kMalformed;
    }
    if (!record.name.empty()) {
      *error = "the OPT record is owned by \"" + record.name + "\", not the root";
      return DnsParse::kMalformed;
    }
    if (!OptionsWellFormed(record.rdata)) {
      *error = "the OPT record's options do not fill its data";
      return DnsParse::kMalformed;
    }
    parsed.has_edns = true;
    parsed.edns_udp_size = record.rclass;
    parsed.edns_version = static_cast<uint8_t>(record.ttl >> 16);
  }
  parsed.id = message.id;
  parsed.recursion_desired = (flags & kDnsFlagRd) != 0;
  parsed.name_as_sent = std::move(message.questions[0].name);
  parsed.name = parsed.name_as_sent;
  for (char& c : parsed.name) c = LowerAscii(c);
  parsed.qtype = message.questions[0].qtype;
  parsed.qclass = message.questions[0].qclass;
  *q = std::move(parsed);
  return DnsParse::kOk;
}

std::string BuildDnsResponse(const DnsQuestion& q, DnsRcode rcode,
                             const std::vector<std::array<uint8_t, 4>>& a_records, uint32_t ttl,
                             uint32_t negative_ttl, DnsTransport transport) {
  const uint16_t query_flags = q.recursion_desired ? kDnsFlagRd : 0;
  std::string question;
  const std::string& echo =
      EqualsIgnoringAsciiCase(q.name_as_sent, q.name) ? q.name_as_sent : q.name;
  if (!EncodeName(echo, &question)) {
    return HeaderOnlyReply(q.id, query_flags, DnsRcode::kServFail);
  }
  PutU16(&question, q.qtype);
  PutU16(&question, q.qclass);

  size_t limit = kDnsMaxMessage;
  if (transport == DnsTransport::kUdp) {
    limit = q.has_edns
                ? std::clamp<size_t>(q.edns_udp_size, kDnsMaxUdpWithoutEdns, kDnsMaxUdpWithEdns)
                : kDnsMaxUdpWithoutEdns;
  }
  // The static_assert above: the header, question and OPT always fit, with room for an SOA.
  const size_t fixed = kDnsHeaderSize + question.size() + (q.has_edns ? kOptRecordBytes : 0);
  size_t answers = rcode == DnsRcode::kNoError ? a_records.size() : 0;
  const size_t room = (limit - fixed) / kARecordBytes;
  const bool truncated = answers > room;
  if (truncated) answers = room;
  const bool negative = rcode == DnsRcode::kNxDomain ||
                        (rcode == DnsRcode::kNoError && !truncated && a_records.empty());

  std::string out;
  out.reserve(fixed + answers * kARecordBytes + (negative ? kSoaRecordBytes : 0));
  PutHeader(&out, q.id,
            kDnsFlagQr | query_flags | kDnsFlagRa | (truncated ? kDnsFlagTc : 0) |
                HeaderRcode(rcode, q.has_edns),
            1, static_cast<uint16_t>(answers), negative ? 1 : 0, q.has_edns ? 1 : 0);
  out.append(question);
  for (size_t i = 0; i < answers; ++i) {
    PutU16(&out, kQuestionNamePointer);
    PutU16(&out, kDnsTypeA);
    PutU16(&out, kDnsClassIn);
    PutU32(&out, std::min(ttl, kMaxTtl));
    PutU16(&out, 4);
    out.append(reinterpret_cast<const char*>(a_records[i].data()), 4);
  }
  if (negative) PutSoaRecord(q.name, std::min(negative_ttl, kMaxTtl), &out);
  if (q.has_edns) {
    out.push_back('\0');  // the root
    PutU16(&out, kDnsTypeOpt);
    PutU16(&out, static_cast<uint16_t>(kDnsMaxUdpWithEdns));
    // TTL: the rcode's upper 8 bits, version 0, no DO bit; RDLENGTH 0.
    PutU32(&out, static_cast<uint32_t>(static_cast<uint8_t>(rcode) >> 4) << 24);
    PutU16(&out, 0);
  }
  return out;
}

std::string BuildDnsError(std::string_view packet, DnsRcode rcode) {
  if (packet.size() < kDnsHeaderSize) return "";
  const uint16_t flags = GetU16(packet, 2);
  if ((flags & kDnsFlagQr) != 0) return "";
  return HeaderOnlyReply(GetU16(packet, 0), flags, rcode);
}

std::string FrameDnsTcpMessage(std::string_view message) {
  if (message.size() > kDnsMaxMessage) return "";
  std::string out;
  out.reserve(2 + message.size());
  PutU16(&out, static_cast<uint16_t>(message.size()));
  out.append(message);
  return out;
}

bool DnsTcpSplitter::Next(std::string_view* input, std::string* message) {
  while (prefix_have_ < sizeof(prefix_)) {
    if (input->empty()) return false;
    prefix_[prefix_have_++] = static_cast<uint8_t>(input->front());
    input->remove_prefix(1);
  }
  const size_t length = (static_cast<size_t>(prefix_[0]) << 8) | prefix_[1];
  const size_t take = std::min(length - message_.size(), input->size());
  message_.append(input->substr(0, take));
  input->remove_prefix(take);
  if (message_.size() < length) return false;
  *message = std::move(message_);
  message_.clear();
  prefix_have_ = 0;
  return true;
}

}  // namespace airlock::guest
