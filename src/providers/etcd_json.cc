#include "src/providers/etcd_json.h"

#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"

namespace airlock::providers {
namespace {

using nlohmann::json;

// etcd's answers nest four deep (txn: responses[i].response_range.kvs[j]); more is not etcd.
constexpr int kMaxDepth = 8;

absl::Status Bad(absl::string_view what, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("etcd's answer to ", what, " is not what etcd sends: ", why));
}

// The body as a JSON object; InvalidArgument (naming `what`) if it is too large, too deep, not
// JSON or not an object.
absl::StatusOr<json> ParseObject(absl::string_view body, absl::string_view what) {
  if (body.size() > kMaxEtcdResponseBody) {
    return Bad(what, absl::StrCat("it is larger than ", kMaxEtcdResponseBody, " bytes"));
  }
  bool too_deep = false;
  json::parser_callback_t limit_depth = [&](int depth, json::parse_event_t event, json&) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= kMaxDepth) {
      too_deep = true;
      return false;  // discarded: nothing below it is kept
    }
    return true;
  };
  json doc = json::parse(body.begin(), body.end(), limit_depth, /*allow_exceptions=*/false);
  if (too_deep) return Bad(what, "it is nested too deep");
  if (doc.is_discarded()) return Bad(what, "it is not JSON");
  if (!doc.is_object()) return Bad(what, "it is not a JSON object");
  return doc;
}

// Proto3's int64: a string of digits (what etcd sends), or a JSON integer. Absent: 0.
absl::Status ReadInt64(const json& object, const char* name, absl::string_view what, int64_t* out) {
  *out = 0;
  auto it = object.find(name);
  if (it == object.end()) return absl::OkStatus();
  if (it->is_number_integer() && !it->is_number_unsigned()) {
    *out = it->get<int64_t>();
    return absl::OkStatus();
  }
  if (it->is_number_unsigned() &&
      it->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    *out = static_cast<int64_t>(it->get<uint64_t>());
    return absl::OkStatus();
  }
  if (it->is_string()) {
    const std::string& text = it->get_ref<const std::string&>();
    bool digits = !text.empty() && text.size() <= 20;
    for (size_t i = 0; i < text.size() && digits; ++i) {
      digits = absl::ascii_isdigit(text[i]) || (i == 0 && text[i] == '-' && text.size() > 1);
    }
    if (digits && absl::SimpleAtoi(text, out)) return absl::OkStatus();
  }
  return Bad(what, absl::StrCat("\"", name, "\" is not a 64-bit integer"));
}

// As ReadInt64, and not negative (revisions, counts, lease ids).
absl::Status ReadCount(const json& object, const char* name, absl::string_view what, int64_t* out) {
  if (absl::Status read = ReadInt64(object, name, what, out); !read.ok()) return read;
  if (*out < 0) return Bad(what, absl::StrCat("\"", name, "\" is negative"));
  return absl::OkStatus();
}

absl::Status ReadBool(const json& object, const char* name, absl::string_view what, bool* out) {
  *out = false;
  auto it = object.find(name);
  if (it == object.end()) return absl::OkStatus();
  if (!it->is_boolean()) return Bad(what, absl::StrCat("\"", name, "\" is not true or false"));
  *out = it->get<bool>();
  return absl::OkStatus();
}

// Proto3's bytes: base64, at most max bytes once decoded. Absent: empty.
absl::Status ReadBytes(const json& object, const char* name, size_t max, absl::string_view what,
                       std::string* out) {
  out->clear();
  auto it = object.find(name);
  if (it == object.end()) return absl::OkStatus();
  if (!it->is_string()) return Bad(what, absl::StrCat("\"", name, "\" is not a string"));
  const std::string& text = it->get_ref<const std::string&>();
  if (text.size() > (max + 2) / 3 * 4) {
    return Bad(what, absl::StrCat("\"", name, "\" is longer than ", max, " bytes"));
  }
  if (!absl::Base64Unescape(text, out) || out->size() > max) {
    return Bad(what, absl::StrCat("\"", name, "\" is not base64"));
  }
  return absl::OkStatus();
}

// The member `name` as an object, or nullptr when absent; an error when it is something else.
absl::StatusOr<const json*> ReadObject(const json& object, const char* name,
                                       absl::string_view what) {
  auto it = object.find(name);
  if (it == object.end()) return nullptr;
  if (!it->is_object()) return Bad(what, absl::StrCat("\"", name, "\" is not an object"));
  return &*it;
}

absl::Status ReadHeaderRevision(const json& object, absl::string_view what, int64_t* revision) {
  *revision = 0;
  absl::StatusOr<const json*> header = ReadObject(object, "header", what);
  if (!header.ok()) return header.status();
  if (*header == nullptr) return absl::OkStatus();
  return ReadCount(**header, "revision", what, revision);
}

absl::Status ReadKeyValue(const json& kv, absl::string_view what, EtcdKeyValue* out) {
  if (!kv.is_object()) return Bad(what, "an entry of \"kvs\" is not an object");
  for (absl::Status s :
       {ReadBytes(kv, "key", kMaxEtcdKey, what, &out->key),
        ReadBytes(kv, "value", kMaxEtcdValue, what, &out->value),
        ReadCount(kv, "create_revision", what, &out->create_revision),
        ReadCount(kv, "mod_revision", what, &out->mod_revision),
        ReadCount(kv, "version", what, &out->version), ReadCount(kv, "lease", what, &out->lease)}) {
    if (!s.ok()) return s;
  }
  if (out->key.empty()) return Bad(what, "an entry has no key");
  if (out->create_revision == 0 || out->mod_revision < out->create_revision) {
    return Bad(what, "an entry's revisions are not those of a key that exists");
  }
  return absl::OkStatus();
}

std::string Printable(absl::string_view s) {
  std::string out(s.substr(0, kMaxEtcdMessage));
  for (char& c : out) {
    if (c < 0x20 || c > 0x7e) c = '?';
  }
  return out;
}

// A lease's id and TTL in a grant or a keepalive answer.
absl::StatusOr<EtcdLeaseAnswer> ReadLease(const json& object, absl::string_view what) {
  EtcdLeaseAnswer lease;
  if (absl::Status s = ReadCount(object, "ID", what, &lease.id); !s.ok()) return s;
  if (absl::Status s = ReadCount(object, "TTL", what, &lease.ttl); !s.ok()) return s;
  return lease;
}

}  // namespace

std::optional<EtcdError> ParseEtcdError(absl::string_view body) {
  absl::StatusOr<json> doc = ParseObject(absl::StripAsciiWhitespace(body), "a request");
  if (!doc.ok()) return std::nullopt;
  auto error = doc->find("error");
  if (error == doc->end()) return std::nullopt;
  // A stream's error is an object holding the code and message; a unary call's sits beside it.
  const json& fields = error->is_object() ? *error : *doc;
  if (!error->is_object() && !error->is_string()) return std::nullopt;
  int64_t code = 0;
  if (!ReadInt64(fields, error->is_object() ? "grpc_code" : "code", "", &code).ok() || code < 0 ||
      code > 16) {
    return std::nullopt;
  }
  EtcdError out;
  out.code = static_cast<int>(code);
  auto message = fields.find("message");
  if (message != fields.end() && message->is_string()) {
    out.message = Printable(message->get_ref<const std::string&>());
  } else if (error->is_string()) {
    out.message = Printable(error->get_ref<const std::string&>());
  }
  return out;
}

absl::StatusOr<EtcdRangeAnswer> ParseEtcdRange(absl::string_view body) {
  constexpr absl::string_view kWhat = "a range request";
  absl::StatusOr<json> doc = ParseObject(body, kWhat);
  if (!doc.ok()) return doc.status();
  EtcdRangeAnswer answer;
  for (absl::Status s : {ReadHeaderRevision(*doc, kWhat, &answer.revision),
                         ReadBool(*doc, "more", kWhat, &answer.more),
                         ReadCount(*doc, "count", kWhat, &answer.count)}) {
    if (!s.ok()) return s;
  }
  auto kvs = doc->find("kvs");
  if (kvs != doc->end()) {
    if (!kvs->is_array()) return Bad(kWhat, "\"kvs\" is not an array");
    if (kvs->size() > kMaxEtcdEntries) {
      return Bad(kWhat, absl::StrCat("it holds more than ", kMaxEtcdEntries, " entries"));
    }
    answer.kvs.resize(kvs->size());
    for (size_t i = 0; i < kvs->size(); ++i) {
      if (absl::Status s = ReadKeyValue((*kvs)[i], kWhat, &answer.kvs[i]); !s.ok()) return s;
    }
  }
  if (answer.count < static_cast<int64_t>(answer.kvs.size())) {
    return Bad(kWhat, "\"count\" is smaller than the entries it holds");
  }
  return answer;
}

absl::StatusOr<int64_t> ParseEtcdHeaderRevision(absl::string_view body) {
  constexpr absl::string_view kWhat = "a request";
  absl::StatusOr<json> doc = ParseObject(body, kWhat);
  if (!doc.ok()) return doc.status();
  int64_t revision = 0;
  if (absl::Status s = ReadHeaderRevision(*doc, kWhat, &revision); !s.ok()) return s;
  return revision;
}

absl::StatusOr<int64_t> ParseEtcdDeleteRange(absl::string_view body) {
  constexpr absl::string_view kWhat = "a delete request";
  absl::StatusOr<json> doc = ParseObject(body, kWhat);
  if (!doc.ok()) return doc.status();
  int64_t deleted = 0;
  if (absl::Status s = ReadCount(*doc, "deleted", kWhat, &deleted); !s.ok()) return s;
  return deleted;
}

absl::StatusOr<bool> ParseEtcdTxn(absl::string_view body) {
  constexpr absl::string_view kWhat = "a transaction";
  absl::StatusOr<json> doc = ParseObject(body, kWhat);
  if (!doc.ok()) return doc.status();
  bool succeeded = false;
  if (absl::Status s = ReadBool(*doc, "succeeded", kWhat, &succeeded); !s.ok()) return s;
  // The answers of the branch that ran are not used, only checked to be what etcd sends.
  auto responses = doc->find("responses");
  if (responses != doc->end() && !responses->is_array()) {
    return Bad(kWhat, "\"responses\" is not an array");
  }
  return succeeded;
}

absl::StatusOr<EtcdLeaseAnswer> ParseEtcdLeaseGrant(absl::string_view body) {
  constexpr absl::string_view kWhat = "a lease grant";
  absl::StatusOr<json> doc = ParseObject(body, kWhat);
  if (!doc.ok()) return doc.status();
  // LeaseGrantResponse has an error field of its own besides gRPC's status.
  auto error = doc->find("error");
  if (error != doc->end()) {
    if (!error->is_string()) return Bad(kWhat, "\"error\" is not a string");
    if (!error->get_ref<const std::string&>().empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "etcd refused the lease: ", Printable(error->get_ref<const std::string&>())));
    }
  }
  absl::StatusOr<EtcdLeaseAnswer> lease = ReadLease(*doc, kWhat);
  if (!lease.ok()) return lease.status();
  if (lease->id == 0 || lease->ttl <= 0) return Bad(kWhat, "it grants no lease");
  return lease;
}

absl::StatusOr<EtcdLeaseAnswer> ParseEtcdKeepAlive(absl::string_view body) {
  constexpr absl::string_view kWhat = "a lease keepalive";
  if (body.size() > kMaxEtcdResponseBody) return ParseObject(body, kWhat).status();
  // The stream's answers, one JSON object a line; one request was sent, so one answer is due.
  std::vector<absl::string_view> lines = absl::StrSplit(
      body, '\n', [](absl::string_view line) { return !absl::StripAsciiWhitespace(line).empty(); });
  if (lines.size() != 1) return Bad(kWhat, "it does not hold exactly one answer");
  absl::StatusOr<json> doc = ParseObject(lines[0], kWhat);
  if (!doc.ok()) return doc.status();
  absl::StatusOr<const json*> result = ReadObject(*doc, "result", kWhat);
  if (!result.ok()) return result.status();
  if (*result == nullptr) return Bad(kWhat, "it has no \"result\"");
  return ReadLease(**result, kWhat);
}

}  // namespace airlock::providers
