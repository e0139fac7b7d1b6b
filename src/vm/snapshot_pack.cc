#include "src/vm/snapshot_pack.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"

namespace airlock {
namespace {

void AppendU64(std::string* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t ReadU64(absl::string_view b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[i]);
  return v;
}

}  // namespace

absl::StatusOr<PackLayout> MeasurePack(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoStatus("stat a snapshot file");
  PackLayout layout;
  layout.size = static_cast<uint64_t>(st.st_size);
  layout.packed_bytes = 8;
  off_t at = 0;
  while (at < st.st_size) {
    off_t data = lseek(fd, at, SEEK_DATA);
    if (data < 0 && errno == ENXIO) break;  // only a hole is left
    if (data < 0) return ErrnoStatus("seek in a snapshot file");
    off_t hole = lseek(fd, data, SEEK_HOLE);
    if (hole < 0) return ErrnoStatus("seek in a snapshot file");
    uint64_t length = static_cast<uint64_t>(hole - data);
    layout.regions.emplace_back(static_cast<uint64_t>(data), length);
    layout.packed_bytes += 16 + length;
    at = hole;
  }
  return layout;
}

absl::Status WritePack(int fd, const PackLayout& layout, int out) {
  std::vector<char> buf(1 << 20);
  for (const auto& [offset, length] : layout.regions) {
    std::string header;
    AppendU64(&header, offset);
    AppendU64(&header, length);
    if (absl::Status st = WriteAll(out, header); !st.ok()) return st;
    for (uint64_t done = 0; done < length;) {
      size_t want = static_cast<size_t>(std::min<uint64_t>(length - done, buf.size()));
      ssize_t n = pread(fd, buf.data(), want, static_cast<off_t>(offset + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return ErrnoStatus("read a snapshot file");
      if (n == 0) return absl::DataLossError("a snapshot file shrank while it was packed");
      if (absl::Status st = WriteAll(out, std::string_view(buf.data(), static_cast<size_t>(n)));
          !st.ok()) {
        return st;
      }
      done += static_cast<uint64_t>(n);
    }
  }
  std::string size;
  AppendU64(&size, layout.size);
  return WriteAll(out, size);
}

absl::Status Unpacker::Fail(std::string why) {
  status_ = absl::DataLossError(absl::StrCat("a packed snapshot file is malformed: ", why));
  return status_;
}

absl::Status Unpacker::Feed(absl::string_view bytes) {
  while (status_.ok() && !bytes.empty()) {
    if (region_left_ > 0) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(region_left_, bytes.size()));
      for (size_t done = 0; done < n;) {
        ssize_t w =
            pwrite(out_, bytes.data() + done, n - done, static_cast<off_t>(region_at_ + done));
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return status_ = ErrnoStatus("write a snapshot file");
        done += static_cast<size_t>(w);
      }
      region_at_ += n;
      region_left_ -= n;
      bytes.remove_prefix(n);
      continue;
    }
    size_t take = std::min<size_t>(16 - header_.size(), bytes.size());
    header_.append(bytes.data(), take);
    bytes.remove_prefix(take);
    if (header_.size() < 16) break;
    uint64_t offset = ReadU64(header_);
    uint64_t length = ReadU64(absl::string_view(header_).substr(8));
    header_.clear();
    if (length == 0) return Fail("a region is empty");
    if (offset < end_) return Fail("regions overlap or are out of order");
    if (offset > max_size_ || length > max_size_ - offset) {
      return Fail(absl::StrCat("a region ends past the ", max_size_, " bytes the file may have"));
    }
    region_at_ = offset;
    region_left_ = length;
    end_ = offset + length;
  }
  return status_;
}

absl::Status Unpacker::Finish() {
  if (!status_.ok()) return status_;
  if (region_left_ > 0) return Fail("it ends inside a region");
  if (header_.size() != 8) return Fail("it does not end with the file's size");
  uint64_t size = ReadU64(header_);
  if (size < end_ || size > max_size_) {
    return Fail(absl::StrCat("its size ", size, " is not between ", end_, " and ", max_size_));
  }
  if (ftruncate(out_, static_cast<off_t>(size)) != 0) {
    return status_ = ErrnoStatus("size a snapshot file");
  }
  size_ = size;
  return absl::OkStatus();
}

absl::Status UnpackStream(int in, int out, uint64_t max_size) {
  Unpacker unpacker(out, max_size);
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = read(in, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("read a packed snapshot file");
    if (n == 0) break;
    // An error is kept (and returned at the end) while the rest is read and dropped.
    unpacker.Feed(absl::string_view(buf.data(), static_cast<size_t>(n))).IgnoreError();
  }
  return unpacker.Finish();
}

}  // namespace airlock
