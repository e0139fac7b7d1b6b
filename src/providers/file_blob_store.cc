#include "src/providers/file_blob_store.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/hex.h"
#include "src/common/unique_fd.h"
#include "src/providers/blob_digest.h"
#include "src/providers/blob_io.h"

namespace airlock::providers {
namespace {

constexpr size_t kChunk = 1 << 20;

bool IsHex(const std::string& s, size_t length) {
  return s.size() == length && std::all_of(s.begin(), s.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// mkdir that reports whether it made the directory (and so whether its parent needs an fsync).
absl::StatusOr<bool> MakeDirectory(const std::string& path) {
  if (mkdir(path.c_str(), 0700) == 0) return true;
  if (errno == EEXIST) return false;
  return ErrnoStatus("mkdir", path);
}

}  // namespace

absl::StatusOr<std::unique_ptr<FileBlobStore>> FileBlobStore::Create(const std::string& directory) {
  if (directory.empty() || directory[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("blob store directory \"", directory, "\" must be an absolute path"));
  }
  if (absl::Status made = MakeDirectories(directory + "/sha256", 0700); !made.ok()) return made;
  return std::unique_ptr<FileBlobStore>(new FileBlobStore(directory));
}

std::string FileBlobStore::PathOf(const std::string& hex) const {
  return absl::StrCat(directory_, "/sha256/", hex.substr(0, 2), "/", hex);
}

absl::Status FileBlobStore::Put(const std::string& digest, int fd, uint64_t size) {
  absl::StatusOr<std::string> hex = BlobDigestHex(digest);
  if (!hex.ok()) return hex.status();
  absl::StatusOr<uint64_t> present = Stat(digest);
  if (present.ok() && *present == size) return absl::OkStatus();

  std::string dir = absl::StrCat(directory_, "/sha256/", hex->substr(0, 2));
  absl::StatusOr<bool> made = MakeDirectory(dir);
  if (!made.ok()) return made.status();
  if (*made) {
    if (absl::Status synced = SyncDirectory(directory_ + "/sha256"); !synced.ok()) return synced;
  }
  std::string temp = absl::StrCat(dir, "/.tmp-", RandomHex(8));
  UniqueFd out(open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (!out.valid()) return ErrnoStatus("create", temp);
  absl::Status status = [&]() -> absl::Status {
    std::string buf(static_cast<size_t>(std::min<uint64_t>(size, kChunk)), '\0');
    Sha256 sha;
    for (uint64_t done = 0; done < size;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(size - done, buf.size()));
      if (absl::Status read = ReadExactly(fd, buf.data(), n, done, size); !read.ok()) return read;
      absl::string_view chunk(buf.data(), n);
      sha.Update(chunk);
      if (absl::Status written = WriteAll(out.get(), {chunk.data(), chunk.size()}); !written.ok())
        return written;
      done += n;
    }
    std::string actual = sha.FinishHex();
    if (actual != *hex) return PutDigestMismatch(digest, actual);
    if (fsync(out.get()) != 0) return ErrnoStatus("fsync", temp);
    if (rename(temp.c_str(), PathOf(*hex).c_str()) != 0) return ErrnoStatus("rename", temp);
    return SyncDirectory(dir);
  }();
  if (!status.ok()) unlink(temp.c_str());  // best effort: a leftover .tmp- file is never listed
  return status;
}

absl::Status FileBlobStore::Get(const std::string& digest, int out_fd) {
  absl::StatusOr<std::string> hex = BlobDigestHex(digest);
  if (!hex.ok()) return hex.status();
  std::string path = PathOf(*hex);
  UniqueFd in(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!in.valid() && errno == ENOENT) {
    return absl::NotFoundError(absl::StrCat("blob ", digest, " is not in the store ", directory_));
  }
  if (!in.valid()) return ErrnoStatus("open", path);
  std::string buf(kChunk, '\0');
  Sha256 sha;
  for (;;) {
    ssize_t n = read(in.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read", path);
    if (n == 0) break;
    absl::string_view chunk(buf.data(), static_cast<size_t>(n));
    sha.Update(chunk);
    if (absl::Status written = WriteAll(out_fd, {chunk.data(), chunk.size()}); !written.ok())
      return written;
  }
  if (sha.FinishHex() != *hex) return GetDigestMismatch(digest, path);
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> FileBlobStore::Stat(const std::string& digest) {
  absl::StatusOr<std::string> hex = BlobDigestHex(digest);
  if (!hex.ok()) return hex.status();
  std::string path = PathOf(*hex);
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat("blob ", digest, " is not in the store ", directory_));
    }
    return ErrnoStatus("stat", path);
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::DataLossError(absl::StrCat(path, " is not a regular file: remove it"));
  }
  return static_cast<uint64_t>(st.st_size);
}

absl::Status FileBlobStore::Delete(const std::string& digest) {
  absl::StatusOr<std::string> hex = BlobDigestHex(digest);
  if (!hex.ok()) return hex.status();
  std::string path = PathOf(*hex);
  // No fsync of the directory: a deletion a crash undoes leaves a whole blob, which the next
  // garbage collection removes again.
  if (unlink(path.c_str()) != 0 && errno != ENOENT) return ErrnoStatus("remove", path);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> FileBlobStore::List() {
  std::string root = directory_ + "/sha256";
  struct stat st;
  if (stat(root.c_str(), &st) != 0) return ErrnoStatus("stat", root);
  std::vector<std::string> digests;
  for (const std::string& fan : ListDirectory(root)) {
    if (!IsHex(fan, 2)) continue;
    for (const std::string& name : ListDirectory(absl::StrCat(root, "/", fan))) {
      // Temporary files (".tmp-...") and anything else are not blobs.
      if (IsHex(name, 64) && name.compare(0, 2, fan) == 0) {
        digests.push_back(absl::StrCat("sha256:", name));
      }
    }
  }
  std::sort(digests.begin(), digests.end());
  return digests;
}

}  // namespace airlock::providers
