#include "src/common/channel_messages.h"

#include <algorithm>

#include "src/common/workspace_change.h"  // IsCleanRelativePath

namespace airlock {
namespace {

std::string_view Cut(std::string_view s, size_t cap) { return s.substr(0, cap); }

bool ValidPort(uint32_t port) { return port >= 1 && port <= 65535; }

bool ValidTerminal(uint32_t rows, uint32_t cols) {
  return rows >= 1 && cols >= 1 && rows <= kMaxTerminalSide && cols <= kMaxTerminalSide;
}

// At most kMaxRulePorts of them.
PayloadWriter& Ports(PayloadWriter& w, const std::vector<uint16_t>& ports) {
  size_t count = std::min<size_t>(ports.size(), kMaxRulePorts);
  w.U32(static_cast<uint32_t>(count));
  for (size_t i = 0; i < count; ++i) w.U32(ports[i]);
  return w;
}

bool ReadPorts(PayloadReader& r, std::vector<uint16_t>* ports) {
  uint32_t count;
  if (!r.U32(&count) || count > kMaxRulePorts) return false;
  ports->clear();
  for (uint32_t i = 0; i < count; ++i) {
    uint32_t port;
    if (!r.U32(&port) || !ValidPort(port)) return false;
    ports->push_back(static_cast<uint16_t>(port));
  }
  return true;
}

}  // namespace

bool IsVolumeMountPoint(std::string_view path) {
  if (path.size() < 2 || path.size() > 255 || path.front() != '/') return false;
  for (char c : path) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  std::string_view relative = path.substr(1);
  if (!IsCleanRelativePath(relative)) return false;
  std::string_view top = relative.substr(0, relative.find('/'));
  for (std::string_view kept : {"proc", "sys", "dev", "run", "workspace"}) {
    if (top == kept) return false;
  }
  if (top != relative) return true;
  for (std::string_view system : {"bin", "boot", "etc", "home", "lib", "lib32", "lib64", "libx32",
                                  "media", "opt", "root", "sbin", "srv", "tmp", "usr", "var"}) {
    if (top == system) return false;
  }
  return true;
}

std::string EncodePayload(const SyncMessage& m) {
  PayloadWriter w;
  w.I64(m.seconds).U32(m.nanoseconds).Str(m.entropy).U32(m.pids_max).Str(m.hostname).U32(m.flags);
  size_t count = std::min<size_t>(m.volumes.size(), kVolumeSlots);
  w.U32(static_cast<uint32_t>(count));
  for (size_t i = 0; i < count; ++i) {
    w.U32(m.volumes[i].slot).U32(m.volumes[i].flags).Str(m.volumes[i].path);
  }
  return w.bytes();
}

bool DecodePayload(std::string_view payload, SyncMessage* m) {
  PayloadReader r(payload);
  uint32_t count;
  if (!r.I64(&m->seconds) || !r.U32(&m->nanoseconds) || !r.Str(&m->entropy) ||
      !r.U32(&m->pids_max) || !r.Str(&m->hostname) || !r.U32(&m->flags) || !r.U32(&count) ||
      count > kVolumeSlots) {
    return false;
  }
  m->volumes.clear();
  uint32_t slots_seen = 0;
  for (uint32_t i = 0; i < count; ++i) {
    VolumeMount v;
    if (!r.U32(&v.slot) || !r.U32(&v.flags) || !r.Str(&v.path) || v.slot >= kVolumeSlots ||
        (slots_seen & (1u << v.slot)) != 0 || (v.flags & ~kVolumeReadOnly) != 0 ||
        !IsVolumeMountPoint(v.path)) {
      return false;
    }
    slots_seen |= 1u << v.slot;
    m->volumes.push_back(std::move(v));
  }
  return r.AtEnd() && m->nanoseconds < 1000000000 && m->entropy.size() <= kMaxSyncEntropy &&
         m->hostname.size() <= kMaxHostnameBytes;
}

std::string EncodePayload(const ReadyMessage& m) {
  PayloadWriter w;
  w.U32(m.highest_stream).U32(m.highest_guest_stream).Str(Cut(m.problem, kMaxReasonBytes));
  return w.bytes();
}

bool DecodePayload(std::string_view payload, ReadyMessage* m) {
  PayloadReader r(payload);
  return r.U32(&m->highest_stream) && r.U32(&m->highest_guest_stream) && r.Str(&m->problem) &&
         r.AtEnd() && m->highest_stream < (1u << 31) && m->highest_guest_stream < (1u << 31) &&
         m->highest_guest_stream % 2 == 0 && m->problem.size() <= kMaxReasonBytes;
}

std::string EncodePayload(const ExecStartMessage& m) {
  PayloadWriter w;
  w.StrList(m.argv).StrList(m.env).Str(m.cwd).U32(m.flags).Str(m.user).U32(m.rows).U32(m.cols);
  w.U64(m.exec_id);
  return w.bytes();
}

bool DecodePayload(std::string_view payload, ExecStartMessage* m) {
  PayloadReader r(payload);
  return r.StrList(&m->argv) && r.StrList(&m->env) && r.Str(&m->cwd) && r.U32(&m->flags) &&
         r.Str(&m->user) && r.U32(&m->rows) && r.U32(&m->cols) && r.U64(&m->exec_id) && r.AtEnd() &&
         !m->argv.empty() && m->argv.size() + m->env.size() <= kMaxListItems &&
         ((m->flags & kExecFlagTty) == 0 || ValidTerminal(m->rows, m->cols)) &&
         ((m->flags & kExecFlagDetach) == 0 || (m->flags & (kExecFlagTty | kExecFlagStdin)) == 0);
}

std::string EncodePayload(const ExitMessage& m) {
  PayloadWriter w;
  w.U32(static_cast<uint32_t>(m.kind)).I32(m.code).Str(Cut(m.message, kMaxExitMessageBytes));
  return w.bytes();
}

bool DecodePayload(std::string_view payload, ExitMessage* m) {
  PayloadReader r(payload);
  uint32_t kind;
  if (!(r.U32(&kind) && r.I32(&m->code) && r.Str(&m->message) && r.AtEnd()) ||
      kind > static_cast<uint32_t>(ExitKind::kFailed) || m->message.size() > kMaxExitMessageBytes) {
    return false;
  }
  m->kind = static_cast<ExitKind>(kind);
  // Anything else is a peer making numbers up (and 128 + code would overflow).
  switch (m->kind) {
    case ExitKind::kExited:
      return m->code >= 0 && m->code <= 255;
    case ExitKind::kSignaled:
      return m->code >= 1 && m->code <= kMaxSignal;
    default:
      return m->code >= 0 && m->code < 4096;
  }
}

std::string EncodePayload(const SignalMessage& m) { return PayloadWriter().I32(m.signal).bytes(); }

bool DecodePayload(std::string_view payload, SignalMessage* m) {
  PayloadReader r(payload);
  return r.I32(&m->signal) && r.AtEnd() && m->signal >= 1 && m->signal <= kMaxSignal;
}

std::string EncodePayload(const WindowMessage& m) { return PayloadWriter().U32(m.bytes).bytes(); }

bool DecodePayload(std::string_view payload, WindowMessage* m) {
  PayloadReader r(payload);
  return r.U32(&m->bytes) && r.AtEnd();
}

std::string EncodePayload(const ResizeMessage& m) {
  return PayloadWriter().U32(m.rows).U32(m.cols).bytes();
}

bool DecodePayload(std::string_view payload, ResizeMessage* m) {
  PayloadReader r(payload);
  return r.U32(&m->rows) && r.U32(&m->cols) && r.AtEnd() && ValidTerminal(m->rows, m->cols);
}

bool ValidMetadataKey(std::string_view key) {
  static constexpr std::string_view kTokenPunctuation = "!#$%&'*+-.^_`|~";
  if (key.empty() || key.size() > kMaxMetadataKeyBytes) return false;
  for (char c : key) {
    bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (!alnum && kTokenPunctuation.find(c) == std::string_view::npos) return false;
  }
  return true;
}

bool ValidMetadataValue(std::string_view value) {
  if (value.size() > kMaxMetadataValueBytes) return false;
  for (char c : value) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

namespace {

void WriteMetadata(PayloadWriter& w, const FileMetadata& metadata) {
  w.U32(static_cast<uint32_t>(metadata.size()));
  for (const auto& [key, value] : metadata) w.Str(key).Str(value);
}

bool ReadMetadata(PayloadReader& r, FileMetadata* metadata) {
  uint32_t count;
  if (!r.U32(&count) || count > kMaxFileMetadata) return false;
  metadata->clear();
  for (uint32_t i = 0; i < count; ++i) {
    std::string key, value;
    if (!r.Str(&key) || !r.Str(&value) || !ValidMetadataKey(key) || !ValidMetadataValue(value)) {
      return false;
    }
    metadata->emplace_back(std::move(key), std::move(value));
  }
  return true;
}

}  // namespace

std::string EncodePayload(const FileWriteMessage& m) {
  PayloadWriter w;
  w.Str(m.path).U32(m.mode);
  WriteMetadata(w, m.metadata);
  return w.bytes();
}

bool DecodePayload(std::string_view payload, FileWriteMessage* m) {
  PayloadReader r(payload);
  return r.Str(&m->path) && r.U32(&m->mode) && ReadMetadata(r, &m->metadata) && r.AtEnd();
}

std::string EncodePayload(const FileReadMessage& m) { return PayloadWriter().Str(m.path).bytes(); }

bool DecodePayload(std::string_view payload, FileReadMessage* m) {
  PayloadReader r(payload);
  return r.Str(&m->path) && r.AtEnd();
}

std::string EncodePayload(const TailFilesMessage& m) {
  PayloadWriter w;
  w.Str(m.user).Str(m.dir).Str(m.suffix).U32(m.depth).U32(m.max_bytes);
  w.U32(static_cast<uint32_t>(m.offsets.size()));
  for (const auto& [name, offset] : m.offsets) w.Str(name).U64(offset);
  return w.bytes();
}

bool DecodePayload(std::string_view payload, TailFilesMessage* m) {
  PayloadReader r(payload);
  uint32_t count;
  if (!(r.Str(&m->user) && r.Str(&m->dir) && r.Str(&m->suffix) && r.U32(&m->depth) &&
        r.U32(&m->max_bytes) && r.U32(&count)) ||
      count > kMaxTailFiles || m->depth > kMaxTailDepth || m->max_bytes > kMaxTailBytes ||
      m->suffix.size() > kMaxTailSuffixBytes) {
    return false;
  }
  m->offsets.clear();
  for (uint32_t i = 0; i < count; ++i) {
    std::string name;
    uint64_t offset;
    if (!r.Str(&name) || !r.U64(&offset)) return false;
    m->offsets.emplace_back(std::move(name), offset);
  }
  return r.AtEnd();
}

std::string EncodePayload(const AgentStoreMessage& m) {
  PayloadWriter w;
  w.U32(m.store).Str(m.user).Str(m.path).I64(m.after_ms).Str(m.after_id).U32(m.max_rows);
  w.U32(m.max_bytes);
  return w.bytes();
}

bool DecodePayload(std::string_view payload, AgentStoreMessage* m) {
  PayloadReader r(payload);
  return r.U32(&m->store) && r.Str(&m->user) && r.Str(&m->path) && r.I64(&m->after_ms) &&
         r.Str(&m->after_id) && r.U32(&m->max_rows) && r.U32(&m->max_bytes) && r.AtEnd() &&
         m->store == static_cast<uint32_t>(AgentStore::kOpenCode) && IsCleanRelativePath(m->path) &&
         m->after_id.size() <= kMaxStoreIdBytes && m->max_rows <= kMaxStoreRows &&
         m->max_bytes >= kMaxStoreRowBytes && m->max_bytes <= kMaxStoreBytes;
}

std::string EncodePayload(const FsRequestMessage& m) {
  PayloadWriter w;
  w.U32(static_cast<uint32_t>(m.op)).Str(m.user).Str(m.path).Str(m.target).U32(m.depth);
  w.U32(m.attributes).U32(m.uid).U32(m.gid).U32(m.mode);
  return w.bytes();
}

bool DecodePayload(std::string_view payload, FsRequestMessage* m) {
  PayloadReader r(payload);
  uint32_t op;
  if (!(r.U32(&op) && r.Str(&m->user) && r.Str(&m->path) && r.Str(&m->target) && r.U32(&m->depth) &&
        r.U32(&m->attributes) && r.U32(&m->uid) && r.U32(&m->gid) && r.U32(&m->mode) &&
        r.AtEnd()) ||
      op < static_cast<uint32_t>(FsOp::kStat) || op > static_cast<uint32_t>(FsOp::kSetAttributes) ||
      m->depth > kMaxFsDepth || (m->attributes & ~(kSetUid | kSetGid | kSetMode)) != 0 ||
      m->mode > 07777) {
    return false;
  }
  m->op = static_cast<FsOp>(op);
  return true;
}

std::string EncodePayload(const WatchDirMessage& m) {
  return PayloadWriter().Str(m.user).Str(m.path).U32(m.flags).bytes();
}

bool DecodePayload(std::string_view payload, WatchDirMessage* m) {
  PayloadReader r(payload);
  return r.Str(&m->user) && r.Str(&m->path) && r.U32(&m->flags) && r.AtEnd() &&
         (m->flags & ~(kWatchRecursive | kWatchIncludeEntry)) == 0;
}

std::string EncodePayload(const ProtocolErrorMessage& m) {
  return PayloadWriter().Str(Cut(m.message, kMaxReasonBytes)).bytes();
}

bool DecodePayload(std::string_view payload, ProtocolErrorMessage* m) {
  PayloadReader r(payload);
  return r.Str(&m->message) && r.AtEnd() && m->message.size() <= kMaxReasonBytes;
}

std::string EncodePayload(const DnsQueryMessage& m) {
  return PayloadWriter().Str(m.name).U32(m.qtype).bytes();
}

bool DecodePayload(std::string_view payload, DnsQueryMessage* m) {
  PayloadReader r(payload);
  return r.Str(&m->name) && r.U32(&m->qtype) && r.AtEnd() && !m->name.empty() &&
         m->name.size() <= kMaxDnsNameBytes;
}

std::string EncodePayload(const DnsAnswerMessage& m) {
  PayloadWriter w;
  w.U32(static_cast<uint32_t>(m.verdict));
  Ports(w, m.ports).Str(Cut(m.message, kMaxReasonBytes));
  return w.bytes();
}

bool DecodePayload(std::string_view payload, DnsAnswerMessage* m) {
  PayloadReader r(payload);
  uint32_t verdict;
  if (!r.U32(&verdict) || verdict > static_cast<uint32_t>(DnsVerdict::kFailed)) return false;
  m->verdict = static_cast<DnsVerdict>(verdict);
  return ReadPorts(r, &m->ports) && r.Str(&m->message) && r.AtEnd() &&
         m->message.size() <= kMaxReasonBytes;
}

std::string EncodePayload(const ConnectMessage& m) {
  return PayloadWriter().Str(m.name).Str(m.address).U32(m.port).bytes();
}

bool DecodePayload(std::string_view payload, ConnectMessage* m) {
  PayloadReader r(payload);
  return r.Str(&m->name) && r.Str(&m->address) && r.U32(&m->port) && r.AtEnd() &&
         (m->address.size() == 4 || m->address.size() == 16) && ValidPort(m->port) &&
         m->name.size() <= kMaxDnsNameBytes;
}

std::string EncodePayload(const OpenPortMessage& m) { return PayloadWriter().U32(m.port).bytes(); }

bool DecodePayload(std::string_view payload, OpenPortMessage* m) {
  PayloadReader r(payload);
  return r.U32(&m->port) && r.AtEnd() && ValidPort(m->port);
}

std::string EncodePayload(const ResetMessage& m) {
  return PayloadWriter().U32(m.code).Str(Cut(m.message, kMaxReasonBytes)).bytes();
}

bool DecodePayload(std::string_view payload, ResetMessage* m) {
  PayloadReader r(payload);
  return r.U32(&m->code) && r.Str(&m->message) && r.AtEnd() && m->message.size() <= kMaxReasonBytes;
}

std::string EncodePayload(const NetPolicyMessage& m) {
  PayloadWriter w;
  w.U32(static_cast<uint32_t>(m.rules.size()));
  for (const AddressRuleMessage& rule : m.rules)
    Ports(w.Str(rule.base).U32(rule.prefix), rule.ports);
  return w.bytes();
}

bool DecodePayload(std::string_view payload, NetPolicyMessage* m) {
  PayloadReader r(payload);
  uint32_t count;
  if (!r.U32(&count) || count > kMaxListItems) return false;
  m->rules.clear();
  for (uint32_t i = 0; i < count; ++i) {
    AddressRuleMessage rule;
    if (!r.Str(&rule.base) || rule.base.size() != 4 || !r.U32(&rule.prefix) || rule.prefix > 32 ||
        !ReadPorts(r, &rule.ports)) {
      return false;
    }
    m->rules.push_back(std::move(rule));
  }
  return r.AtEnd();
}

std::string EncodePayload(const GuestMetrics& m) {
  PayloadWriter w;
  w.U64(m.cpu_busy_ticks).U64(m.cpu_total_ticks).U64(m.ticks_per_second).U64(m.vcpus);
  w.U64(m.memory_total_bytes).U64(m.memory_available_bytes).U64(m.processes);
  w.U64(m.disk_total_bytes).U64(m.disk_used_bytes).U64(m.uptime_ms);
  return w.bytes();
}

bool DecodePayload(std::string_view payload, GuestMetrics* m) {
  PayloadReader r(payload);
  r.U64(&m->cpu_busy_ticks) && r.U64(&m->cpu_total_ticks) && r.U64(&m->ticks_per_second) &&
      r.U64(&m->vcpus) && r.U64(&m->memory_total_bytes) && r.U64(&m->memory_available_bytes) &&
      r.U64(&m->processes) && r.U64(&m->disk_total_bytes) && r.U64(&m->disk_used_bytes) &&
      r.U64(&m->uptime_ms);
  return r.AtEnd();
}

std::string EncodeTailRecord(const TailRecord& r) {
  PayloadWriter w;
  w.Str(r.name).U64(r.size).U64(r.offset).Str(r.bytes);
  return w.bytes();
}

bool DecodeTailRecords(std::string_view answer, uint32_t max_bytes, std::vector<TailRecord>* out,
                       std::string* error) {
  out->clear();
  PayloadReader r(answer);
  uint64_t content = 0;
  while (!r.AtEnd()) {
    TailRecord t;
    if (!(r.Str(&t.name) && r.U64(&t.size) && r.U64(&t.offset) && r.Str(&t.bytes))) {
      *error = "a record is cut short";
      return false;
    }
    if (out->size() == kMaxTailFiles) {
      *error = "more files than asked for";
      return false;
    }
    if (!IsCleanRelativePath(t.name)) {
      *error = "a file name is not a clean relative path";
      return false;
    }
    if (t.offset > t.size || t.bytes.size() > t.size - t.offset) {
      *error = "a file's bytes go beyond its size";
      return false;
    }
    content += t.bytes.size();
    if (content > max_bytes) {
      *error = "more content than asked for";
      return false;
    }
    out->push_back(std::move(t));
  }
  return true;
}

namespace {

void WriteFsEntry(PayloadWriter& w, const FsEntry& e) {
  w.Str(e.name).Str(e.path).U32(static_cast<uint32_t>(e.type)).U64(e.size).U32(e.mode);
  w.Str(e.owner).Str(e.group).I64(e.mtime_seconds).U32(e.mtime_nanos).Str(e.symlink_target);
  w.U32(e.uid).U32(e.gid).I64(e.atime_seconds).U32(e.atime_nanos).I64(e.ctime_seconds);
  w.U32(e.ctime_nanos);
  WriteMetadata(w, e.metadata);
}

bool ReadFsEntry(PayloadReader& r, FsEntry* e, std::string* error) {
  uint32_t type;
  if (!(r.Str(&e->name) && r.Str(&e->path) && r.U32(&type) && r.U64(&e->size) && r.U32(&e->mode) &&
        r.Str(&e->owner) && r.Str(&e->group) && r.I64(&e->mtime_seconds) &&
        r.U32(&e->mtime_nanos) && r.Str(&e->symlink_target) && r.U32(&e->uid) && r.U32(&e->gid) &&
        r.I64(&e->atime_seconds) && r.U32(&e->atime_nanos) && r.I64(&e->ctime_seconds) &&
        r.U32(&e->ctime_nanos))) {
    *error = "an entry is cut short";
    return false;
  }
  if (!ReadMetadata(r, &e->metadata)) {
    *error = "an entry's metadata is cut short or over its caps";
    return false;
  }
  if (type > static_cast<uint32_t>(FsType::kSymlink)) {
    *error = "an entry's type is unknown";
    return false;
  }
  e->type = static_cast<FsType>(type);
  bool name_ok =
      e->name == "/" || (!e->name.empty() && e->name.size() <= kMaxFsNameBytes &&
                         e->name.find_first_of(std::string_view("/\0", 2)) == std::string::npos);
  bool path_ok = !e->path.empty() && e->path[0] == '/' && e->path.size() <= kMaxFsPathBytes &&
                 e->path.find('\0') == std::string::npos;
  if (!name_ok || !path_ok) {
    *error = "an entry's name or path is malformed";
    return false;
  }
  if (e->owner.size() > kMaxFsOwnerBytes || e->group.size() > kMaxFsOwnerBytes ||
      e->symlink_target.size() > kMaxFsPathBytes || e->mtime_nanos >= 1000000000 ||
      e->atime_nanos >= 1000000000 || e->ctime_nanos >= 1000000000) {
    *error = "an entry's field is over its cap";
    return false;
  }
  return true;
}

}  // namespace

std::string EncodeFsEntry(const FsEntry& e) {
  PayloadWriter w;
  WriteFsEntry(w, e);
  return w.bytes();
}

bool DecodeFsEntries(std::string_view answer, std::vector<FsEntry>* out, std::string* error) {
  out->clear();
  PayloadReader r(answer);
  while (!r.AtEnd()) {
    if (out->size() == kMaxFsEntries) {
      *error = "more entries than the protocol allows";
      return false;
    }
    FsEntry e;
    if (!ReadFsEntry(r, &e, error)) return false;
    out->push_back(std::move(e));
  }
  return true;
}

std::string EncodeWatchRecord(const WatchRecord& record) {
  PayloadWriter w;
  w.U32(static_cast<uint32_t>(record.kind)).Str(record.name).U32(record.has_entry ? 1 : 0);
  if (record.has_entry) WriteFsEntry(w, record.entry);
  return w.bytes();
}

bool DecodeWatchRecords(std::string_view payload, std::vector<WatchRecord>* out,
                        std::string* error) {
  out->clear();
  PayloadReader r(payload);
  while (!r.AtEnd()) {
    WatchRecord record;
    uint32_t kind, has_entry;
    if (!(r.U32(&kind) && r.Str(&record.name) && r.U32(&has_entry))) {
      *error = "a record is cut short";
      return false;
    }
    if (kind > static_cast<uint32_t>(WatchEventKind::kChmod) || has_entry > 1) {
      *error = "a record's kind is unknown";
      return false;
    }
    record.kind = static_cast<WatchEventKind>(kind);
    if (record.kind == WatchEventKind::kStarted
            ? !record.name.empty()
            : (record.name.size() > kMaxFsPathBytes || !IsCleanRelativePath(record.name))) {
      *error = "a record's name is not a clean relative path";
      return false;
    }
    record.has_entry = has_entry == 1;
    if (record.has_entry && !ReadFsEntry(r, &record.entry, error)) return false;
    out->push_back(std::move(record));
  }
  return true;
}

std::string EncodeActivityRecord(const ActivityRecord& r) {
  PayloadWriter w;
  w.U32(static_cast<uint32_t>(r.kind)).I64(r.unix_ms).U64(r.exec_id).U32(r.pid).U32(r.parent);
  w.I32(r.code).Str(r.process).Str(r.path).Str(r.target).StrList(r.argv);
  return w.bytes();
}

bool DecodeActivityRecords(std::string_view payload, std::vector<ActivityRecord>* out,
                           std::string* error) {
  out->clear();
  PayloadReader r(payload);
  while (!r.AtEnd()) {
    ActivityRecord record;
    uint32_t kind;
    if (!(r.U32(&kind) && r.I64(&record.unix_ms) && r.U64(&record.exec_id) && r.U32(&record.pid) &&
          r.U32(&record.parent) && r.I32(&record.code) && r.Str(&record.process) &&
          r.Str(&record.path) && r.Str(&record.target) && r.StrList(&record.argv))) {
      *error = "an activity record is cut short";
      return false;
    }
    if (kind > kMaxActivityKind) {
      *error = "an activity record's kind is unknown";
      return false;
    }
    record.kind = static_cast<ActivityKind>(kind);
    bool rename = record.kind == ActivityKind::kRename;
    // A file's path is absolute; a program's too, or empty (it was gone before it was read).
    bool absolute = !record.path.empty() && record.path[0] == '/';
    bool path_ok = record.kind == ActivityKind::kLost           ? !record.path.empty()
                   : record.kind == ActivityKind::kProcessExit  ? record.path.empty()
                   : record.kind == ActivityKind::kProcessStart ? record.path.empty() || absolute
                                                                : absolute;
    if (record.path.size() > kMaxFsPathBytes || record.target.size() > kMaxFsPathBytes ||
        !path_ok ||
        (rename ? record.target.empty() || record.target[0] != '/' : !record.target.empty())) {
      *error = "an activity record's path is not what its kind needs, or is too long";
      return false;
    }
    size_t argv_bytes = 0;
    for (const std::string& a : record.argv) argv_bytes += a.size();
    if (record.process.size() > kMaxActivityProcessBytes || record.argv.size() > kMaxActivityArgs ||
        argv_bytes > kMaxActivityArgvBytes ||
        (!record.argv.empty() && record.kind != ActivityKind::kProcessStart)) {
      *error = "an activity record's name or arguments are over their caps";
      return false;
    }
    out->push_back(std::move(record));
  }
  return true;
}

std::string EncodeStoreAnswer(int error, std::string_view what, const std::vector<StoreRow>& rows) {
  PayloadWriter w;
  w.U32(static_cast<uint32_t>(error)).Str(what);
  for (const StoreRow& row : rows) {
    w.Str(row.id).Str(row.message_id).Str(row.session_id).Str(row.role).I64(row.updated_ms);
    w.U64(row.data_size).Str(row.data);
  }
  return w.bytes();
}

bool DecodeStoreAnswer(std::string_view answer, const AgentStoreMessage& request, int* error_number,
                       std::string* what, std::vector<StoreRow>* out, std::string* error) {
  out->clear();
  PayloadReader r(answer);
  uint32_t number = 0;
  if (!r.U32(&number) || !r.Str(what) || what->size() > kMaxReasonBytes || number > 4095) {
    *error = "the answer's status is cut short, too long or no errno";
    return false;
  }
  *error_number = static_cast<int>(number);
  if (*error_number != 0 && !r.AtEnd()) {
    *error = "a failed reading has rows";
    return false;
  }
  uint64_t data = 0;
  int64_t last_ms = request.after_ms;
  std::string last_id = request.after_id;
  while (!r.AtEnd()) {
    StoreRow row;
    if (!(r.Str(&row.id) && r.Str(&row.message_id) && r.Str(&row.session_id) && r.Str(&row.role) &&
          r.I64(&row.updated_ms) && r.U64(&row.data_size) && r.Str(&row.data))) {
      *error = "a row is cut short";
      return false;
    }
    if (out->size() == request.max_rows) {
      *error = "more rows than asked for";
      return false;
    }
    if (row.id.empty() || row.id.size() > kMaxStoreIdBytes ||
        row.message_id.size() > kMaxStoreIdBytes || row.session_id.size() > kMaxStoreIdBytes ||
        row.role.size() > kMaxStoreIdBytes) {
      *error = "an id is empty or too long";
      return false;
    }
    if (!row.data.empty() && row.data.size() != row.data_size) {
      *error = "a row has part of its data";
      return false;
    }
    if (row.updated_ms < last_ms || (row.updated_ms == last_ms && row.id <= last_id)) {
      *error = "rows out of order";
      return false;
    }
    data += row.data.size();
    if (data > request.max_bytes) {
      *error = "more data than asked for";
      return false;
    }
    last_ms = row.updated_ms;
    last_id = row.id;
    out->push_back(std::move(row));
  }
  return true;
}

}  // namespace airlock
