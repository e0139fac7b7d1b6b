#include "src/guest/agent_files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "src/guest/user_lookup.h"

namespace airlock::guest {
namespace {

FsResult Failed(int error, const std::string& message) {
  return FsResult{.error = error, .message = message.substr(0, kMaxExitMessageBytes)};
}

FsResult FailedErrno(const std::string& what) {
  int e = errno;
  return Failed(e, what + ": " + strerror(e));
}

// An absolute path without empty or "." components or a trailing slash ("/" stays). ".." is
// kept: what it means depends on symbolic links, which the kernel resolves.
std::string CleanPath(const std::string& path) {
  std::string out;
  size_t start = 0;
  while (start < path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    std::string part = path.substr(start, end - start);
    if (!part.empty() && part != ".") out += "/" + part;
    start = end + 1;
  }
  return out.empty() ? "/" : out;
}

std::string Join(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

// Owners' names, as the guest's files give them.
struct Names {
  std::map<uint32_t, std::string> users, groups;
  static std::string Of(const std::map<uint32_t, std::string>& names, uint32_t id) {
    auto it = names.find(id);
    return it == names.end() ? std::to_string(id) : it->second.substr(0, kMaxFsOwnerBytes);
  }
};

// The user.e2b.* attributes of path (not following a link), sorted; those over the protocol's
// caps are left out.
FileMetadata MetadataOf(const std::string& path) {
  FileMetadata out;
  char names[8192];
  ssize_t n = llistxattr(path.c_str(), names, sizeof(names));
  const size_t prefix = strlen(kMetadataXattrPrefix);
  for (ssize_t at = 0; at < n && out.size() < kMaxFileMetadata;) {
    std::string name(names + at);
    at += static_cast<ssize_t>(name.size()) + 1;
    if (name.compare(0, prefix, kMetadataXattrPrefix) != 0) continue;
    char value[kMaxMetadataValueBytes];
    ssize_t size = lgetxattr(path.c_str(), name.c_str(), value, sizeof(value));
    if (size < 0) continue;
    std::string key = name.substr(prefix), text(value, static_cast<size_t>(size));
    if (ValidMetadataKey(key) && ValidMetadataValue(text)) out.emplace_back(key, text);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// dir_fd/leaf: where the entry is, for readlinkat.
FsEntry EntryOf(const struct stat& st, const std::string& path, int dir_fd, const char* leaf,
                const std::map<uint32_t, std::string>& users,
                const std::map<uint32_t, std::string>& groups) {
  FsEntry e;
  e.path = path;
  e.name = path == "/" ? "/" : path.substr(path.rfind('/') + 1);
  e.type = S_ISREG(st.st_mode)   ? FsType::kFile
           : S_ISDIR(st.st_mode) ? FsType::kDirectory
           : S_ISLNK(st.st_mode) ? FsType::kSymlink
                                 : FsType::kOther;
  e.size = static_cast<uint64_t>(st.st_size);
  e.mode = st.st_mode;
  e.owner = Names::Of(users, st.st_uid);
  e.group = Names::Of(groups, st.st_gid);
  e.mtime_seconds = st.st_mtim.tv_sec;
  e.mtime_nanos = static_cast<uint32_t>(st.st_mtim.tv_nsec);
  e.uid = st.st_uid;
  e.gid = st.st_gid;
  e.atime_seconds = st.st_atim.tv_sec;
  e.atime_nanos = static_cast<uint32_t>(st.st_atim.tv_nsec);
  e.ctime_seconds = st.st_ctim.tv_sec;
  e.ctime_nanos = static_cast<uint32_t>(st.st_ctim.tv_nsec);
  e.metadata = MetadataOf(path);
  if (S_ISLNK(st.st_mode)) {
    char target[kMaxFsPathBytes];
    ssize_t n = readlinkat(dir_fd, leaf, target, sizeof(target));
    if (n > 0) e.symlink_target.assign(target, static_cast<size_t>(n));
  }
  return e;
}

// The entry of an absolute path (not followed if it is a symbolic link), or an errno.
int StatEntry(const std::string& path, const std::map<uint32_t, std::string>& users,
              const std::map<uint32_t, std::string>& groups, FsEntry* entry) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return errno;
  *entry = EntryOf(st, path, AT_FDCWD, path.c_str(), users, groups);
  return 0;
}

// The names in a directory, sorted; dir_fd stays open.
std::vector<std::string> NamesIn(int dir_fd) {
  std::vector<std::string> names;
  int listing = fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
  DIR* d = listing >= 0 ? fdopendir(listing) : nullptr;
  if (d == nullptr) {
    if (listing >= 0) close(listing);
    return names;
  }
  while (dirent* e = readdir(d)) {
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) names.push_back(e->d_name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

struct Lister {
  const Names& names;
  std::string* answer;
  size_t count = 0;

  // Lists dir_fd (whose path is `path`) depth levels down; false once over the caps.
  bool List(int dir_fd, const std::string& path, uint32_t depth) {
    for (const std::string& name : NamesIn(dir_fd)) {
      struct stat st;
      std::string child = Join(path, name);
      if (child.size() > kMaxFsPathBytes ||
          fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
        continue;  // gone meanwhile, or a path no request could name
      }
      if (++count > kMaxFsEntries) return false;
      *answer += EncodeFsEntry(EntryOf(st, child, dir_fd, name.c_str(), names.users, names.groups));
      if (answer->size() > kMaxFsAnswerBytes) return false;
      if (S_ISDIR(st.st_mode) && depth > 1) {
        int sub = openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0) continue;
        bool ok = List(sub, child, depth - 1);
        close(sub);
        if (!ok) return false;
      }
    }
    return true;
  }
};

// Removes name under dir_fd, and everything below it if it is a directory.
int RemoveAt(int dir_fd, const std::string& name) {
  struct stat st;
  if (fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno;
  if (S_ISDIR(st.st_mode)) {
    int sub = openat(dir_fd, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (sub < 0) return errno;
    int error = 0;
    for (const std::string& child : NamesIn(sub)) {
      int e = RemoveAt(sub, child);
      if (e != 0 && e != ENOENT && error == 0) error = e;
    }
    close(sub);
    if (error != 0) return error;
  }
  return unlinkat(dir_fd, name.c_str(), S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0) == 0 ? 0 : errno;
}

// Makes dir and its missing parents, each new one owned by who. 0 or an errno.
int MakeDirs(const std::string& dir, const Identity& who) {
  for (size_t at = 1; at <= dir.size(); ++at) {
    if (at != dir.size() && dir[at] != '/') continue;
    std::string prefix = dir.substr(0, at);
    if (mkdir(prefix.c_str(), 0755) == 0) {
      if ((who.uid != 0 || who.gid != 0) && chown(prefix.c_str(), who.uid, who.gid) != 0) {
        return errno;
      }
    } else if (errno != EEXIST) {
      return errno;
    }
  }
  return 0;
}

// Sets what request.attributes say on path (a symbolic link's own owner, never its target's).
// 0 or an errno, with why.
int SetAttributes(const std::string& path, const FsRequestMessage& request, std::string* why) {
  if ((request.attributes & (kSetUid | kSetGid)) != 0) {
    uid_t uid = (request.attributes & kSetUid) != 0 ? request.uid : static_cast<uid_t>(-1);
    gid_t gid = (request.attributes & kSetGid) != 0 ? request.gid : static_cast<gid_t>(-1);
    if (fchownat(AT_FDCWD, path.c_str(), uid, gid, AT_SYMLINK_NOFOLLOW) != 0) {
      int e = errno;
      *why = "change the owner of " + path + ": " + strerror(e);
      return e;
    }
  }
  if ((request.attributes & kSetMode) != 0) {
    struct stat st;
    if (lstat(path.c_str(), &st) != 0) {
      int e = errno;
      *why = path + ": " + strerror(e);
      return e;
    }
    if (S_ISLNK(st.st_mode)) {
      *why = path + " is a symbolic link, which has no mode of its own";
      return EINVAL;
    }
    if (chmod(path.c_str(), request.mode) != 0) {
      int e = errno;
      *why = "change the mode of " + path + ": " + strerror(e);
      return e;
    }
  }
  return 0;
}

}  // namespace

FsResult DoFsRequest(const FsRequestMessage& request, const GuestAccounts& accounts,
                     std::string* answer) {
  if (request.path.empty() || request.path[0] != '/' ||
      (request.op == FsOp::kMove && (request.target.empty() || request.target[0] != '/'))) {
    return Failed(EINVAL, "paths must be absolute");
  }
  Names names{IdNames(accounts.passwd), IdNames(accounts.group)};
  std::string path = CleanPath(request.path);
  FsEntry entry;
  switch (request.op) {
    case FsOp::kStat: {
      if (int e = StatEntry(path, names.users, names.groups, &entry); e != 0) {
        return Failed(e, path + ": " + strerror(e));
      }
      *answer += EncodeFsEntry(entry);
      return {};
    }
    case FsOp::kList: {
      if (request.depth < 1) return Failed(EINVAL, "a listing goes at least 1 level deep");
      int dir = open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dir < 0) return FailedErrno(path);
      Lister lister{.names = names, .answer = answer};
      bool ok = lister.List(dir, path, request.depth);
      close(dir);
      if (!ok) {
        answer->clear();
        return Failed(E2BIG, path + " has more than " + std::to_string(kMaxFsEntries) +
                                 " entries (or " + std::to_string(kMaxFsAnswerBytes >> 20) +
                                 " MiB of them) that deep: list it with less depth");
      }
      return {};
    }
    case FsOp::kMakeDir:
    case FsOp::kMove: {
      Identity who;
      std::string why;
      if (!ResolveUser(request.user, accounts.passwd, accounts.group, &who, &why)) {
        return Failed(EINVAL, why);
      }
      if (request.op == FsOp::kMakeDir) {
        struct stat st;
        if (lstat(path.c_str(), &st) == 0) {
          return S_ISDIR(st.st_mode) ? Failed(EEXIST, path + " already exists")
                                     : Failed(ENOTDIR, path + " exists and is not a directory");
        }
        if (int e = MakeDirs(path, who); e != 0) return Failed(e, path + ": " + strerror(e));
        std::string why;
        if (int e = SetAttributes(path, request, &why); e != 0) return Failed(e, why);
      } else {
        std::string target = CleanPath(request.target);
        struct stat st;
        if (lstat(path.c_str(), &st) != 0) return FailedErrno(path);
        if (target != "/") {
          if (int e = MakeDirs(target.substr(0, std::max<size_t>(1, target.rfind('/'))), who);
              e != 0) {
            return Failed(e, target + ": " + strerror(e));
          }
        }
        if (rename(path.c_str(), target.c_str()) != 0) {
          int e = errno;
          if (e == EXDEV) {
            return Failed(e, path +
                                 " is a directory of the image, which its filesystem cannot "
                                 "move: copy it (cp -a) and remove the original instead");
          }
          return Failed(e, "move " + path + " to " + target + ": " + strerror(e));
        }
        path = target;
      }
      if (int e = StatEntry(path, names.users, names.groups, &entry); e != 0) {
        return Failed(e, path + ": " + strerror(e));
      }
      *answer += EncodeFsEntry(entry);
      return {};
    }
    case FsOp::kSetAttributes: {
      std::string why;
      if (int e = SetAttributes(path, request, &why); e != 0) return Failed(e, why);
      if (int e = StatEntry(path, names.users, names.groups, &entry); e != 0) {
        return Failed(e, path + ": " + strerror(e));
      }
      *answer += EncodeFsEntry(entry);
      return {};
    }
    case FsOp::kRemove: {
      if (path == "/") return Failed(EBUSY, "the root directory cannot be removed");
      size_t slash = path.rfind('/');
      std::string parent = slash == 0 ? "/" : path.substr(0, slash);
      int dir = open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
      if (dir < 0) return errno == ENOENT ? FsResult{} : FailedErrno(parent);
      int e = RemoveAt(dir, path.substr(slash + 1));
      close(dir);
      // Like rm -rf: what is not there is removed already.
      if (e != 0 && e != ENOENT) return Failed(e, "remove " + path + ": " + strerror(e));
      return {};
    }
  }
  return Failed(EINVAL, "unknown operation");
}

std::string WriteTempName(const std::string& name) { return "." + name + ".airlock-XXXXXX"; }

bool IsWriteTempName(const std::string& name) {
  static constexpr std::string_view kMark = ".airlock-";
  size_t base = name.rfind('/') + 1;  // npos + 1 == 0
  return name.size() > base + kMark.size() + 7 && name[base] == '.' &&
         name.compare(name.size() - 6 - kMark.size(), kMark.size(), kMark) == 0;
}

namespace {

constexpr uint32_t kWatchMask = IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO |
                                IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR;

}  // namespace

std::unique_ptr<DirWatch> DirWatch::Start(const WatchDirMessage& request,
                                          const GuestAccounts& accounts, FsResult* result) {
  if (request.path.empty() || request.path[0] != '/') {
    *result = Failed(EINVAL, "paths must be absolute");
    return nullptr;
  }
  std::unique_ptr<DirWatch> watch(new DirWatch());
  watch->root_ = CleanPath(request.path);
  watch->recursive_ = (request.flags & kWatchRecursive) != 0;
  watch->include_entry_ = (request.flags & kWatchIncludeEntry) != 0;
  if (watch->include_entry_) {
    watch->users_ = IdNames(accounts.passwd);
    watch->groups_ = IdNames(accounts.group);
  }
  struct stat st;
  if (stat(watch->root_.c_str(), &st) != 0) {
    *result = FailedErrno(watch->root_);
    return nullptr;
  }
  if (!S_ISDIR(st.st_mode)) {
    *result = Failed(ENOTDIR, watch->root_ + " is not a directory");
    return nullptr;
  }
  watch->fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (watch->fd_ < 0) {
    *result = FailedErrno("inotify");
    return nullptr;
  }
  if (!watch->Add("", result)) return nullptr;
  return watch;
}

DirWatch::~DirWatch() {
  if (fd_ >= 0) close(fd_);
}

bool DirWatch::Add(const std::string& relative, FsResult* result) {
  if (dirs_.size() >= kMaxWatchedDirs) {
    *result = Failed(ENOSPC, root_ + " has more than " + std::to_string(kMaxWatchedDirs) +
                                 " directories: watch a smaller tree, or not recursively");
    return false;
  }
  std::string path = relative.empty() ? root_ : Join(root_, relative);
  // The root may be a symbolic link to the directory; below it, nothing is followed.
  int wd =
      inotify_add_watch(fd_, path.c_str(), kWatchMask | (relative.empty() ? 0 : IN_DONT_FOLLOW));
  if (wd < 0) {
    if (!relative.empty() && (errno == ENOENT || errno == ENOTDIR)) return true;  // gone again
    *result = errno == ENOSPC ? Failed(ENOSPC, "the guest's kernel watches too much already")
                              : FailedErrno("watch " + path);
    return false;
  }
  dirs_[wd] = relative;
  if (relative.empty()) root_wd_ = wd;
  if (!recursive_) return true;
  int dir =
      open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | (relative.empty() ? 0 : O_NOFOLLOW));
  if (dir < 0) return true;
  bool ok = true;
  for (const std::string& name : NamesIn(dir)) {
    struct stat st;
    if (fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) {
      continue;
    }
    std::string child = relative.empty() ? name : relative + "/" + name;
    if (child.size() > kMaxFsPathBytes) continue;
    if (!(ok = Add(child, result))) break;
  }
  close(dir);
  return ok;
}

bool DirWatch::Read(std::deque<std::string>* records, FsResult* result) {
  alignas(inotify_event) char buf[64 * 1024];
  for (;;) {
    ssize_t n = read(fd_, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return true;  // EAGAIN: all read
    for (char* p = buf; p < buf + n;) {
      const auto* event = reinterpret_cast<const inotify_event*>(p);
      p += sizeof(inotify_event) + event->len;
      if (event->mask & IN_Q_OVERFLOW) {
        *result = Failed(EOVERFLOW, "the guest's kernel dropped events under " + root_ +
                                        ": watch it again, and list it to catch up");
        return false;
      }
      if (event->wd == root_wd_ && (event->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED))) {
        *result = Failed(0, root_ + " was removed or moved");
        return false;
      }
      auto dir = dirs_.find(event->wd);
      if (dir == dirs_.end()) continue;
      if (event->mask & IN_IGNORED) {
        dirs_.erase(dir);
        continue;
      }
      if (event->len == 0 || event->name[0] == '\0') continue;  // the directory itself
      std::string name =
          dir->second.empty() ? event->name : dir->second + "/" + std::string(event->name);
      if (name.size() > kMaxFsPathBytes) continue;
      WatchRecord record;
      uint32_t mask = event->mask;
      record.kind = mask & (IN_CREATE | IN_MOVED_TO) ? WatchEventKind::kCreate
                    : mask & IN_MODIFY               ? WatchEventKind::kWrite
                    : mask & IN_DELETE               ? WatchEventKind::kRemove
                    : mask & IN_MOVED_FROM           ? WatchEventKind::kRename
                    : mask & IN_ATTRIB               ? WatchEventKind::kChmod
                                                     : WatchEventKind::kStarted;
      if (record.kind == WatchEventKind::kStarted) continue;
      // A write through the host: what happens to its temporary file is not news; its
      // rename over the file's name is the file's creation and a write.
      bool completes_write = false;
      if (!(mask & IN_ISDIR) && IsWriteTempName(name)) {
        if (mask & IN_MOVED_FROM) write_cookie_ = event->cookie;
        continue;
      }
      if ((mask & IN_MOVED_TO) && event->cookie != 0 && event->cookie == write_cookie_) {
        completes_write = true;
        write_cookie_ = 0;
      }
      record.name = name;
      if (recursive_ && (mask & IN_ISDIR)) {
        if (mask & (IN_MOVED_FROM | IN_DELETE)) {
          // What was below it is watched under a name it no longer has.
          for (auto it = dirs_.begin(); it != dirs_.end();) {
            if (it->second == name || it->second.starts_with(name + "/")) {
              inotify_rm_watch(fd_, it->first);
              it = dirs_.erase(it);
            } else {
              ++it;
            }
          }
        } else if ((mask & (IN_CREATE | IN_MOVED_TO)) && !Add(name, result)) {
          return false;
        }
      }
      if (include_entry_ && record.kind != WatchEventKind::kRemove &&
          record.kind != WatchEventKind::kRename) {
        record.has_entry = StatEntry(Join(root_, name), users_, groups_, &record.entry) == 0;
      }
      records->push_back(EncodeWatchRecord(record));
      if (completes_write) {
        record.kind = WatchEventKind::kWrite;
        records->push_back(EncodeWatchRecord(record));
      }
    }
  }
}

}  // namespace airlock::guest
