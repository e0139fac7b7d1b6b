#include "src/vm/snapshot_manifest.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/sha256.h"
#include "src/common/unique_fd.h"
#include "src/vm/snapshot_pack.h"

namespace airlock {
namespace {

bool PlainName(const std::string& name) {
  if (name.empty() || name.size() > 64 || name[0] == '.') return false;
  for (char c : name) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool Hex64(const std::string& s) {
  return s.size() == 64 && s.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// Everything but the HMAC, in a fixed order (nlohmann's object keys are sorted).
nlohmann::json Body(const SnapshotManifest& m) {
  nlohmann::json files = nlohmann::json::array();
  for (const SnapshotFile& f : m.files) {
    files.push_back({{"name", f.name}, {"size", f.size}, {"sha256", f.sha256}});
  }
  return {{"version", m.version},
          {"session_id", m.session_id},
          {"image_digest", m.image_digest},
          {"kernel_release", m.kernel_release},
          {"qemu_version", m.qemu_version},
          {"accelerator", m.accelerator},
          {"vcpus", m.vcpus},
          {"memory_bytes", m.memory_bytes},
          {"created_unix_ms", m.created_unix_ms},
          {"files", files}};
}

// Typed field access that never throws, whatever the JSON holds.
template <typename T>
bool Get(const nlohmann::json& j, const char* key, T* out) {
  auto it = j.find(key);
  if (it == j.end()) return false;
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return false;
  } else {
    if (!it->is_number_unsigned() && !(it->is_number_integer() && std::is_signed_v<T>)) {
      return false;
    }
  }
  *out = it->template get<T>();
  return true;
}

}  // namespace

absl::StatusOr<std::string> LoadOrCreateHostKey(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if ((st.st_mode & 077) != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("the snapshot key ", path,
                       " is readable by others; chmod 600 it (or delete it to "
                       "make a new one, which invalidates existing snapshots)"));
    }
    absl::StatusOr<std::string> key = ReadFileToString(path, 4096);
    if (!key.ok()) return key.status();
    if (key->size() != kHostKeyBytes) {
      return absl::DataLossError(absl::StrCat("the snapshot key ", path, " is damaged"));
    }
    return key;
  }
  std::string key(kHostKeyBytes, '\0');
  if (getrandom(key.data(), key.size(), 0) != static_cast<ssize_t>(key.size())) {
    return ErrnoStatus("getrandom");
  }
  if (absl::Status s = MakeDirectories(DirName(path), 0700); !s.ok()) return s;
  if (absl::Status s = WriteFileAtomically(path, key, 0600); !s.ok()) return s;
  // Another process may have won a race to create it: use whichever is on disk.
  return ReadFileToString(path, 4096);
}

std::string SignManifest(const SnapshotManifest& manifest, const std::string& key) {
  nlohmann::json body = Body(manifest);
  nlohmann::json signed_manifest = body;
  signed_manifest["hmac"] = HmacSha256Hex(key, body.dump());
  return signed_manifest.dump(2) + "\n";
}

absl::StatusOr<SnapshotManifest> VerifyManifest(const std::string& text, const std::string& key) {
  auto refuse = [](const std::string& why) {
    return absl::DataLossError(absl::StrCat("snapshot refused: ", why));
  };
  if (text.size() > kMaxManifestBytes) return refuse("the manifest is too large");
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return refuse("the manifest is not JSON");
  SnapshotManifest m;
  std::string hmac;
  nlohmann::json files;
  if (!Get(j, "version", &m.version) || !Get(j, "session_id", &m.session_id) ||
      !Get(j, "image_digest", &m.image_digest) || !Get(j, "kernel_release", &m.kernel_release) ||
      !Get(j, "qemu_version", &m.qemu_version) || !Get(j, "accelerator", &m.accelerator) ||
      !Get(j, "vcpus", &m.vcpus) || !Get(j, "memory_bytes", &m.memory_bytes) ||
      !Get(j, "created_unix_ms", &m.created_unix_ms) || !Get(j, "hmac", &hmac) ||
      !j.contains("files") || !j["files"].is_array() || j.size() != 11) {
    return refuse("the manifest is missing fields or has unknown ones");
  }
  if (m.version != kSnapshotFormatVersion) {
    return refuse(absl::StrCat("format version ", m.version, " is not ", kSnapshotFormatVersion));
  }
  if (j["files"].size() > kMaxSnapshotFiles) return refuse("too many files");
  for (const nlohmann::json& f : j["files"]) {
    SnapshotFile file;
    if (!f.is_object() || f.size() != 3 || !Get(f, "name", &file.name) ||
        !Get(f, "size", &file.size) || !Get(f, "sha256", &file.sha256) || !PlainName(file.name) ||
        !Hex64(file.sha256)) {
      return refuse("a file entry is malformed");
    }
    for (const SnapshotFile& seen : m.files) {
      if (seen.name == file.name) return refuse("a file is named twice");
    }
    m.files.push_back(file);
  }
  std::string expected = HmacSha256Hex(key, Body(m).dump());
  if (hmac.size() != expected.size() ||
      CRYPTO_memcmp(hmac.data(), expected.data(), expected.size()) != 0) {
    return refuse("its HMAC does not match (it was changed, or made with another host key)");
  }
  return m;
}

namespace {
std::atomic<uint64_t> bytes_hashed{0};
}  // namespace

uint64_t SnapshotBytesHashed() { return bytes_hashed.load(std::memory_order_relaxed); }

absl::StatusOr<std::string> SparseSha256(int fd) {
  Sha256 sha;
  auto add_u64 = [&](uint64_t v) {
    unsigned char b[8];
    for (int i = 0; i < 8; ++i) b[i] = static_cast<unsigned char>(v >> (8 * i));
    sha.Update(absl::string_view(reinterpret_cast<const char*>(b), sizeof(b)));
  };
  // The regions as MeasurePack finds them: the digest covers exactly the packed form's bytes.
  absl::StatusOr<PackLayout> layout = MeasurePack(fd);
  if (!layout.ok()) return layout.status();
  std::vector<char> buf(1 << 20);
  for (const auto& [offset, length] : layout->regions) {
    off_t data = static_cast<off_t>(offset), hole = static_cast<off_t>(offset + length);
    add_u64(offset);
    add_u64(length);
    for (off_t pos = data; pos < hole;) {
      size_t want =
          static_cast<size_t>(std::min<off_t>(hole - pos, static_cast<off_t>(buf.size())));
      ssize_t n = pread(fd, buf.data(), want, pos);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus("read a snapshot file");
      if (n == 0) return absl::DataLossError("a snapshot file shrank while it was read");
      sha.Update(absl::string_view(buf.data(), static_cast<size_t>(n)));
      bytes_hashed.fetch_add(static_cast<uint64_t>(n), std::memory_order_relaxed);
      pos += n;
    }
  }
  add_u64(layout->size);
  return sha.FinishHex();
}

namespace {

// Files this process has hashed and found as their manifest says, by identity. A file that
// changes gets a new ctime (which no one can set back without changing the clock), so it is
// hashed again; files changed in the last two seconds are always hashed.
struct VerifiedFile {
  dev_t dev;
  ino_t ino;
  off_t size;
  timespec mtime;
  timespec ctime;
  std::string digest;
};
ABSL_CONST_INIT absl::Mutex verified_mu(absl::kConstInit);
std::map<std::string, VerifiedFile>* verified ABSL_PT_GUARDED_BY(verified_mu) =
    new std::map<std::string, VerifiedFile>;
// Files hashed while a process that could write them still ran: verified once it has ended
// (WritersEnded), if they kept their identity until then.
std::map<std::string, VerifiedFile>* pending ABSL_PT_GUARDED_BY(verified_mu) =
    new std::map<std::string, VerifiedFile>;

bool SameTime(const timespec& a, const timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

// Whether every write to the file changes its mtime, through a shared mapping too (the first
// write to a clean page faults into the filesystem's page_mkwrite, which updates it): ext4, XFS
// and Btrfs do; tmpfs does not.
bool WritesShowInMtime(int fd) {
  struct statfs fs;
  if (fstatfs(fd, &fs) != 0) return false;
  constexpr long kExt4 = 0xEF53, kXfs = 0x58465342, kBtrfs = 0x9123683E;
  return fs.f_type == kExt4 || fs.f_type == kXfs || fs.f_type == kBtrfs;
}

bool SameIdentity(const VerifiedFile& f, const struct stat& st) {
  return f.dev == st.st_dev && f.ino == st.st_ino && f.size == st.st_size &&
         SameTime(f.mtime, st.st_mtim) && SameTime(f.ctime, st.st_ctim);
}

bool KnownGood(const std::string& path, const struct stat& st, const std::string& digest) {
  absl::MutexLock lock(&verified_mu);
  auto it = verified->find(path);
  return it != verified->end() && SameIdentity(it->second, st) && it->second.digest == digest;
}

// any_age: the file's writers have ended, so no write can follow the hash in its clock tick.
void RememberGood(const std::string& path, const struct stat& st, const std::string& digest,
                  bool any_age = false) {
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  if (!any_age && now.tv_sec - st.st_ctim.tv_sec < 2) return;
  absl::MutexLock lock(&verified_mu);
  if (verified->size() >= 4096) verified->clear();
  (*verified)[path] = {st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim, digest};
}

// Waits (at most a few clock ticks) until the coarse clock that file times come from has left
// the tick of `changed` (a file's mtime): from then on, a write gives the file a later mtime.
bool WaitPastTick(const timespec& changed) {
  for (int i = 0; i < 100; ++i) {
    timespec now;
    clock_gettime(CLOCK_REALTIME_COARSE, &now);
    if (now.tv_sec > changed.tv_sec ||
        (now.tv_sec == changed.tv_sec && now.tv_nsec > changed.tv_nsec)) {
      return true;
    }
    usleep(1000);
  }
  return false;  // the clock went back
}

// Moves the entries under from/ of `files` to to/.
void MoveEntries(std::map<std::string, VerifiedFile>* files, const std::string& from,
                 const std::string& to) {
  std::string prefix = from + "/";
  std::vector<std::pair<std::string, VerifiedFile>> moved;
  for (auto it = files->lower_bound(prefix);
       it != files->end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    moved.emplace_back(absl::StrCat(to, "/", it->first.substr(prefix.size())), it->second);
    it = files->erase(it);
  }
  for (auto& [path, file] : moved) (*files)[path] = std::move(file);
}

}  // namespace

absl::StatusOr<SnapshotFile> DescribeFile(const std::string& dir, const std::string& name,
                                          bool writers_ended) {
  if (!PlainName(name)) return absl::InvalidArgumentError(absl::StrCat("bad file name ", name));
  std::string path = absl::StrCat(dir, "/", name);
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid()) return ErrnoStatus("open", path);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return ErrnoStatus("stat", path);
  if (!S_ISREG(st.st_mode)) return absl::DataLossError(absl::StrCat(path, " is not a file"));
  // A writer that goes on may write in the tick of the last change, which leaves the times as
  // they were: the hash starts after that tick, so that what it reads includes such a write.
  bool past_tick = !writers_ended && WritesShowInMtime(fd.get()) && WaitPastTick(st.st_mtim);
  absl::StatusOr<std::string> digest = SparseSha256(fd.get());
  if (!digest.ok()) return digest.status();
  struct stat after;
  if (writers_ended && fstat(fd.get(), &after) == 0 && SameTime(after.st_ctim, st.st_ctim)) {
    RememberGood(path, st, *digest, /*any_age=*/true);
  } else if (past_tick) {
    absl::MutexLock lock(&verified_mu);
    if (pending->size() >= 4096) pending->clear();
    (*pending)[path] = {st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim, *digest};
  }
  return SnapshotFile{name, static_cast<uint64_t>(st.st_size), *digest};
}

void MoveVerifiedFiles(const std::string& from, const std::string& to) {
  absl::MutexLock lock(&verified_mu);
  MoveEntries(verified, from, to);
  MoveEntries(pending, from, to);
}

void WritersEnded(const std::string& dir) {
  std::string prefix = dir + "/";
  absl::MutexLock lock(&verified_mu);
  for (auto it = pending->lower_bound(prefix);
       it != pending->end() && it->first.compare(0, prefix.size(), prefix) == 0;) {
    // Unwritten since its hash began: a write after that tick would have changed its mtime (a
    // write through a mapping too: the fsync before the hash made every page fault on its next
    // write). Its ctime may have changed by a link's removal, which changes no byte.
    struct stat st;
    const VerifiedFile& hashed = it->second;
    if (stat(it->first.c_str(), &st) == 0 && hashed.dev == st.st_dev && hashed.ino == st.st_ino &&
        hashed.size == st.st_size && SameTime(hashed.mtime, st.st_mtim)) {
      if (verified->size() >= 4096) verified->clear();
      VerifiedFile now = hashed;
      now.ctime = st.st_ctim;
      (*verified)[it->first] = now;
    }
    it = pending->erase(it);
  }
}

absl::StatusOr<UniqueFd> OpenSnapshotFile(const std::string& dir, const SnapshotFile& expected,
                                          struct stat* st) {
  if (!PlainName(expected.name)) {
    return absl::DataLossError(absl::StrCat("snapshot refused: bad file name ", expected.name));
  }
  std::string path = absl::StrCat(dir, "/", expected.name);
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd.valid() || fstat(fd.get(), st) != 0 || !S_ISREG(st->st_mode)) {
    return absl::DataLossError(
        absl::StrCat("snapshot refused: ", expected.name, " is missing or not a file"));
  }
  if (static_cast<uint64_t>(st->st_size) != expected.size) {
    return absl::DataLossError(absl::StrCat("snapshot refused: ", expected.name, " has ",
                                            st->st_size, " bytes, the manifest says ",
                                            expected.size, " (truncated?)"));
  }
  return fd;
}

absl::Status VerifySnapshotFiles(const std::string& dir, const SnapshotManifest& manifest,
                                 std::map<std::string, UniqueFd>* opened) {
  for (const SnapshotFile& f : manifest.files) {
    struct stat st;
    absl::StatusOr<UniqueFd> file = OpenSnapshotFile(dir, f, &st);
    if (!file.ok()) return file.status();
    UniqueFd fd = *std::move(file);
    std::string path = absl::StrCat(dir, "/", f.name);
    if (!KnownGood(path, st, f.sha256)) {
      absl::StatusOr<std::string> digest = SparseSha256(fd.get());
      if (!digest.ok()) return digest.status();
      if (*digest != f.sha256) {
        return absl::DataLossError(absl::StrCat("snapshot refused: ", f.name,
                                                " does not match its hash (it was changed)"));
      }
      // The identity after the read: a change during it gives the file a new ctime.
      struct stat after;
      if (fstat(fd.get(), &after) == 0 && SameTime(after.st_ctim, st.st_ctim)) {
        RememberGood(path, st, f.sha256);
      }
    }
    if (opened != nullptr) {
      if (lseek(fd.get(), 0, SEEK_SET) != 0) return ErrnoStatus("seek", path);
      (*opened)[f.name] = std::move(fd);
    }
  }
  return absl::OkStatus();
}

}  // namespace airlock
