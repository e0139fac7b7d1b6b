#include "src/common/workspace_change.h"

#include <sys/stat.h>

#include "src/common/channel_frame.h"

namespace airlock {
namespace {

bool ValidMode(uint32_t mode) {
  if (mode & ~static_cast<uint32_t>(S_IFMT | 07777)) return false;
  uint32_t type = mode & S_IFMT;
  return type == S_IFREG || type == S_IFLNK;
}

}  // namespace

std::string EncodeWorkspaceChange(const WorkspaceChange& c) {
  PayloadWriter w;
  w.U32(static_cast<uint32_t>(c.kind)).Str(c.path).U32(c.old_mode).U32(c.new_mode);
  w.U64(c.old_size).U64(c.new_size).Str(c.old_target).Str(c.new_target).U32(c.flags);
  w.Str(c.old_content).Str(c.new_content).Str(c.new_sha256);
  PayloadWriter out;
  out.U32(static_cast<uint32_t>(w.bytes().size()));
  return out.bytes() + w.bytes();
}

bool IsCleanRelativePath(std::string_view path) {
  if (path.empty() || path.size() > kMaxChangePath) return false;
  if (path.find('\0') != std::string_view::npos) return false;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view part = path.substr(start, end - start);
    if (part.empty() || part == "." || part == "..") return false;
    start = end + 1;
  }
  return true;
}

bool WorkspaceChangeParser::ParseRecord(std::string_view payload, WorkspaceChange* c,
                                        std::string* error) {
  PayloadReader r(payload);
  uint32_t kind = 0;
  r.U32(&kind) && r.Str(&c->path) && r.U32(&c->old_mode) && r.U32(&c->new_mode) &&
      r.U64(&c->old_size) && r.U64(&c->new_size) && r.Str(&c->old_target) &&
      r.Str(&c->new_target) && r.U32(&c->flags) && r.Str(&c->old_content) &&
      r.Str(&c->new_content) && r.Str(&c->new_sha256);
  if (!r.AtEnd()) {
    *error = "a workspace change record is malformed";
    return false;
  }
  if (kind > static_cast<uint32_t>(ChangeKind::kDeleted)) {
    *error = "a workspace change record has an unknown kind";
    return false;
  }
  c->kind = static_cast<ChangeKind>(kind);
  if (!IsCleanRelativePath(c->path)) {
    *error = "a workspace change names a path that is not a clean relative path";
    return false;
  }
  bool has_old = c->kind != ChangeKind::kAdded, has_new = c->kind != ChangeKind::kDeleted;
  if ((has_old ? !ValidMode(c->old_mode) : c->old_mode != 0) ||
      (has_new ? !ValidMode(c->new_mode) : c->new_mode != 0)) {
    *error = "a workspace change has a mode that does not fit its kind";
    return false;
  }
  if (c->old_target.size() > kMaxChangePath || c->new_target.size() > kMaxChangePath ||
      c->old_content.size() > kMaxDiffContent || c->new_content.size() > kMaxDiffContent ||
      (c->flags & ~kChangeFlagsMask) != 0 ||
      (!c->new_sha256.empty() && c->new_sha256.size() != 32)) {
    *error = "a workspace change record is over its caps";
    return false;
  }
  if ((!(c->flags & kChangeOldContent) && !c->old_content.empty()) ||
      (!(c->flags & kChangeNewContent) && !c->new_content.empty())) {
    *error = "a workspace change carries content its flags do not announce";
    return false;
  }
  return true;
}

bool WorkspaceChangeParser::Feed(std::string_view bytes, std::vector<WorkspaceChange>* out,
                                 std::string* error) {
  if (failed_) {
    *error = "the workspace change stream failed before";
    return false;
  }
  pending_.append(bytes.data(), bytes.size());
  size_t at = 0;
  while (pending_.size() - at >= 4) {
    uint32_t length = 0;
    PayloadReader(std::string_view(pending_).substr(at, 4)).U32(&length);
    if (length > kMaxChangeRecord) {
      failed_ = true;
      *error = "a workspace change record is over the size cap";
      return false;
    }
    if (pending_.size() - at - 4 < length) break;
    WorkspaceChange change;
    if (!ParseRecord(std::string_view(pending_).substr(at + 4, length), &change, error)) {
      failed_ = true;
      return false;
    }
    out->push_back(std::move(change));
    at += 4 + length;
  }
  pending_.erase(0, at);
  return true;
}

}  // namespace airlock
