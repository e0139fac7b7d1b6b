// Fuzz target: the agent's DNS server, fed queries as a hostile program in the guest would send
// them. Whatever parses must get a reply that is itself a well-formed message, answers the
// question asked, and fits the client's limit; whatever does not gets at most a bare header.
// The same bytes also go through the TCP splitter, cut at an arbitrary point.
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/guest/dns_message.h"

namespace {

using airlock::guest::BuildDnsError;
using airlock::guest::BuildDnsResponse;
using airlock::guest::DnsMessage;
using airlock::guest::DnsParse;
using airlock::guest::DnsQuestion;
using airlock::guest::DnsRcode;
using airlock::guest::DnsTransport;

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

bool SameIgnoringAsciiCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c + 32) : c; };
           return lower(x) == lower(y);
         });
}

void CheckReply(const DnsQuestion& q, const std::string& reply, DnsRcode rcode, size_t addresses,
                DnsTransport transport) {
  size_t limit = airlock::guest::kDnsMaxMessage;
  if (transport == DnsTransport::kUdp) {
    limit = q.has_edns ? std::clamp<size_t>(q.edns_udp_size, airlock::guest::kDnsMaxUdpWithoutEdns,
                                            airlock::guest::kDnsMaxUdpWithEdns)
                       : airlock::guest::kDnsMaxUdpWithoutEdns;
  }
  Check(reply.size() <= limit);
  DnsMessage m;
  std::string error;
  Check(airlock::guest::ParseDnsMessage(reply, &m, &error));
  Check(m.id == q.id);
  Check((m.flags & airlock::guest::kDnsFlagQr) != 0);
  Check(((m.flags & airlock::guest::kDnsFlagRd) != 0) == q.recursion_desired);
  Check(m.questions.size() == 1);
  Check(SameIgnoringAsciiCase(m.questions[0].name, q.name));
  Check(m.questions[0].qtype == q.qtype && m.questions[0].qclass == q.qclass);
  Check(m.additional.size() == (q.has_edns ? 1u : 0u));
  const bool truncated = (m.flags & airlock::guest::kDnsFlagTc) != 0;
  if (rcode == DnsRcode::kNoError) {
    Check(m.answers.size() <= addresses);
    Check(truncated == (m.answers.size() < addresses));
    for (const airlock::guest::DnsRecord& answer : m.answers) {
      Check(answer.name == m.questions[0].name && answer.rdata.size() == 4);
    }
  } else {
    Check(m.answers.empty() && !truncated);
  }
  // A reply is never taken for a query, so two agents cannot loop.
  DnsQuestion again;
  Check(airlock::guest::ParseDnsQuery(reply, &again, &error) == DnsParse::kNotQuery);
  Check(BuildDnsError(reply, DnsRcode::kFormErr).empty());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view packet(reinterpret_cast<const char*>(data), size);
  DnsQuestion q;
  std::string error;
  const DnsParse result = airlock::guest::ParseDnsQuery(packet, &q, &error);
  if (result == DnsParse::kOk) {
    Check(q.name.size() <= 253);
    // The address count comes from the packet too, so some replies truncate.
    const size_t count = size > 0 ? data[size - 1] : 0;
    std::vector<std::array<uint8_t, 4>> addresses(count, {198, 18, 0, 5});
    for (DnsTransport transport : {DnsTransport::kUdp, DnsTransport::kTcp}) {
      CheckReply(q, BuildDnsResponse(q, DnsRcode::kNoError, addresses, 30, 5, transport),
                 DnsRcode::kNoError, count, transport);
      CheckReply(q, BuildDnsResponse(q, DnsRcode::kNoError, {}, 30, 5, transport),
                 DnsRcode::kNoError, 0, transport);
      CheckReply(q, BuildDnsResponse(q, DnsRcode::kNxDomain, addresses, 30, 5, transport),
                 DnsRcode::kNxDomain, 0, transport);
    }
  } else {
    Check(!error.empty());
    const std::string reply = BuildDnsError(
        packet, result == DnsParse::kNotQuery ? DnsRcode::kNotImp : DnsRcode::kFormErr);
    Check(reply.empty() || reply.size() == airlock::guest::kDnsHeaderSize);
    if (!reply.empty()) {
      DnsMessage m;
      Check(airlock::guest::ParseDnsMessage(reply, &m, &error));
    }
  }

  // The same bytes as a TCP stream, in two pieces: every message is within the stream's bytes.
  airlock::guest::DnsTcpSplitter splitter;
  const size_t split = size > 0 ? data[0] % (size + 1) : 0;
  size_t total = 0;
  std::string message;
  for (std::string_view piece : {packet.substr(0, split), packet.substr(split)}) {
    while (splitter.Next(&piece, &message)) total += 2 + message.size();
    Check(piece.empty());
  }
  Check(total <= size);
  return 0;
}
