#include "src/common/channel_frame.h"

#include <cstring>

namespace airlock {
namespace {

void PutLe(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetLe(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

void EncodeFrameHeader(FrameType type, uint32_t stream, uint32_t length,
                       char (&out)[kFrameHeaderSize]) {
  if (length > kMaxPayload) __builtin_trap();  // a caller bug, never peer input
  std::string header;
  PutLe(&header, kProtocolVersion, 1);
  PutLe(&header, static_cast<uint8_t>(type), 1);
  PutLe(&header, 0, 2);
  PutLe(&header, stream, 4);
  PutLe(&header, length, 4);
  memcpy(out, header.data(), kFrameHeaderSize);
}

std::string EncodeFrame(FrameType type, uint32_t stream, std::string_view payload) {
  char header[kFrameHeaderSize];
  EncodeFrameHeader(type, stream, static_cast<uint32_t>(payload.size()), header);
  std::string out;
  out.reserve(kFrameHeaderSize + payload.size());
  out.append(header, kFrameHeaderSize);
  out.append(payload);
  return out;
}

std::string EncodeHello(std::string_view agent_version) {
  PayloadWriter w;
  w.U32(kProtocolVersion).Str(agent_version);
  return std::string(kHelloMagic, sizeof(kHelloMagic)) + w.bytes();
}

bool DecodeHello(std::string_view payload, uint32_t* version, std::string* agent_version) {
  if (payload.substr(0, sizeof(kHelloMagic)) !=
      std::string_view(kHelloMagic, sizeof(kHelloMagic))) {
    return false;
  }
  PayloadReader r(payload.substr(sizeof(kHelloMagic)));
  return r.U32(version) && r.Str(agent_version) && r.AtEnd();
}

size_t FindHelloFrame(std::string_view bytes) {
  std::string_view magic(kHelloMagic, sizeof(kHelloMagic));
  for (size_t at = bytes.find(magic, kFrameHeaderSize); at != std::string_view::npos;
       at = bytes.find(magic, at + 1)) {
    const auto* h = reinterpret_cast<const uint8_t*>(bytes.data() + at - kFrameHeaderSize);
    // Any version byte: a hello of another protocol is refused by name, not skipped.
    if (h[1] == static_cast<uint8_t>(FrameType::kHello) && GetLe(h + 2, 2) == 0 &&
        GetLe(h + 4, 4) == 0) {
      return at - kFrameHeaderSize;
    }
  }
  return std::string_view::npos;
}

FrameParser::Result FrameParser::Fail(std::string message) {
  error_ = std::move(message);
  return Result::kError;
}

FrameParser::Result FrameParser::Next(std::span<const uint8_t>* input, Frame* frame) {
  if (!error_.empty()) return Result::kError;
  if (!have_header_) {
    size_t take = std::min(kFrameHeaderSize - header_have_, input->size());
    if (take > 0) memcpy(header_ + header_have_, input->data(), take);
    header_have_ += take;
    *input = input->subspan(take);
    if (header_have_ < kFrameHeaderSize) return Result::kNeedMore;
    if (header_[0] != kProtocolVersion) {
      return Fail("unsupported protocol version " + std::to_string(header_[0]));
    }
    if (header_[1] == 0 || header_[1] > kMaxFrameType) {
      return Fail("unknown frame type " + std::to_string(header_[1]));
    }
    if (header_[2] != 0 || header_[3] != 0) return Fail("reserved header bits set");
    type_ = static_cast<FrameType>(header_[1]);
    stream_ = static_cast<uint32_t>(GetLe(header_ + 4, 4));
    length_ = static_cast<uint32_t>(GetLe(header_ + 8, 4));
    if (length_ > kMaxPayload) {
      return Fail("frame payload of " + std::to_string(length_) + " bytes exceeds the " +
                  std::to_string(kMaxPayload) + "-byte cap");
    }
    have_header_ = true;
    payload_.clear();
  }
  size_t take = std::min<size_t>(length_ - payload_.size(), input->size());
  if (take > 0) payload_.append(reinterpret_cast<const char*>(input->data()), take);
  *input = input->subspan(take);
  if (payload_.size() < length_) return Result::kNeedMore;
  frame->type = type_;
  frame->stream = stream_;
  frame->payload = std::move(payload_);
  payload_.clear();
  have_header_ = false;
  header_have_ = 0;
  return Result::kFrame;
}

PayloadWriter& PayloadWriter::U32(uint32_t v) {
  PutLe(&out_, v, 4);
  return *this;
}

PayloadWriter& PayloadWriter::U64(uint64_t v) {
  PutLe(&out_, v, 8);
  return *this;
}

PayloadWriter& PayloadWriter::Str(std::string_view s) {
  U32(static_cast<uint32_t>(s.size()));
  out_.append(s);
  return *this;
}

PayloadWriter& PayloadWriter::StrList(const std::vector<std::string>& list) {
  U32(static_cast<uint32_t>(list.size()));
  for (const std::string& s : list) Str(s);
  return *this;
}

bool PayloadReader::Take(size_t n, const char** p) {
  if (!ok_ || in_.size() - pos_ < n) return ok_ = false;
  *p = in_.data() + pos_;
  pos_ += n;
  return true;
}

bool PayloadReader::U32(uint32_t* v) {
  const char* p;
  if (!Take(4, &p)) return false;
  *v = static_cast<uint32_t>(GetLe(reinterpret_cast<const uint8_t*>(p), 4));
  return true;
}

bool PayloadReader::I32(int32_t* v) {
  uint32_t u;
  if (!U32(&u)) return false;
  *v = static_cast<int32_t>(u);
  return true;
}

bool PayloadReader::U64(uint64_t* v) {
  const char* p;
  if (!Take(8, &p)) return false;
  *v = GetLe(reinterpret_cast<const uint8_t*>(p), 8);
  return true;
}

bool PayloadReader::I64(int64_t* v) {
  uint64_t u;
  if (!U64(&u)) return false;
  *v = static_cast<int64_t>(u);
  return true;
}

bool PayloadReader::Str(std::string* s) {
  uint32_t n;
  const char* p;
  if (!U32(&n) || !Take(n, &p)) return false;
  s->assign(p, n);
  return true;
}

bool PayloadReader::StrList(std::vector<std::string>* list) {
  uint32_t n;
  if (!U32(&n)) return false;
  if (n > kMaxListItems || n > (in_.size() - pos_) / 4) return ok_ = false;
  list->clear();
  list->reserve(n);
  for (uint32_t i = 0; i < n; ++i) {
    std::string s;
    if (!Str(&s)) return false;
    list->push_back(std::move(s));
  }
  return true;
}

}  // namespace airlock
