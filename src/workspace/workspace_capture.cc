#include "src/workspace/workspace_capture.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <memory>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "src/common/errno_status.h"
#include "src/common/file_util.h"
#include "src/common/sha256.h"
#include "src/common/unique_fd.h"
#include "src/image/ext4_writer.h"
#include "src/image/tar_to_ext4.h"
#include "src/workspace/host_git.h"

namespace airlock {
namespace {

constexpr uint64_t kBlock = 4096;

struct WalkEntry {
  std::string path;  // relative
  uint32_t mode = 0;
  uint64_t size = 0;
  int64_t mtime = 0;
  std::string target;
};

struct Walk {
  std::vector<WalkEntry> entries;  // in walk order: a directory before what it holds
  TarStats stats;
};

struct ArchiveDeleter {
  void operator()(archive* a) const { archive_read_free(a); }
};

absl::StatusOr<IgnoreRules> LoadProjectIgnoreRules(const std::string& root);

// The project's .airlockignore after kSecretFilePatterns.
absl::StatusOr<IgnoreRules> LoadIgnoreRules(const std::string& root) {
  static const IgnoreRules* const secret_files =
      new IgnoreRules(*IgnoreRules::Parse(kSecretFilePatterns));
  absl::StatusOr<IgnoreRules> rules = LoadProjectIgnoreRules(root);
  if (rules.ok()) rules->Prepend(*secret_files);
  return rules;
}

// A .git/config that holds credentials: refused, with what to do instead.
absl::Status CheckGitConfig(const std::string& root, const std::string& rel) {
  std::string path = absl::StrCat(root, "/", rel);
  absl::StatusOr<std::string> text = ReadFileToString(path, 1 << 20);
  if (!text.ok()) return absl::OkStatus();  // read again below, where a failure is reported
  std::string why = GitConfigCredentials(*text);
  if (why.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      path, " holds credentials (", why,
      "), which the session's guest could read; take them out (git remote set-url origin "
      "URL-without-password, and keep the token in a credential helper outside the project), "
      "or leave the file out with ",
      kIgnoreFileName));
}

absl::StatusOr<IgnoreRules> LoadProjectIgnoreRules(const std::string& root) {
  std::string path = absl::StrCat(root, "/", kIgnoreFileName);
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return IgnoreRules();
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  absl::StatusOr<std::string> text = ReadFileToString(path, 256 << 10);
  if (!text.ok()) return text.status();
  absl::StatusOr<IgnoreRules> rules = IgnoreRules::Parse(*text);
  if (!rules.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", rules.status().message()));
  }
  return rules;
}

}  // namespace

std::string GitConfigCredentials(std::string_view config) {
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(config.data(), config.size()), '\n')) {
    std::string lower = absl::AsciiStrToLower(absl::StripAsciiWhitespace(line));
    if (absl::StartsWith(lower, "#") || absl::StartsWith(lower, ";")) continue;
    if (absl::StartsWith(lower, "extraheader")) return "an http.extraHeader";
    if (!absl::StartsWith(lower, "url") && !absl::StartsWith(lower, "pushurl")) continue;
    size_t scheme = lower.find("://");
    if (scheme == std::string::npos) continue;
    std::string authority = lower.substr(scheme + 3);
    authority = authority.substr(0, authority.find_first_of("/?#"));
    size_t at = authority.rfind('@');
    if (at != std::string::npos && authority.substr(0, at).find(':') != std::string::npos) {
      return "a remote URL with a password";
    }
  }
  return "";
}

namespace {

std::string OverCapMessage(const std::string& root, uint64_t total, uint64_t cap,
                           const std::map<std::string, uint64_t>& top_sizes) {
  std::vector<std::pair<uint64_t, std::string>> largest;
  for (const auto& [dir, bytes] : top_sizes) largest.push_back({bytes, dir});
  std::sort(largest.rbegin(), largest.rend());
  if (largest.size() > 5) largest.resize(5);
  std::vector<std::string> named;
  for (const auto& [bytes, dir] : largest)
    named.push_back(absl::StrCat(dir, "/ ", HumanBytes(bytes)));
  return absl::StrCat(
      "the project ", root, " holds ", HumanBytes(total), " of files, over the workspace cap of ",
      HumanBytes(cap),
      named.empty() ? "" : "; the largest directories: ", absl::StrJoin(named, ", "),
      ". Leave what the session does not need out with ", root, "/", kIgnoreFileName,
      " (one pattern per line, as in .gitignore), or raise the cap with "
      "--workspace-max");
}

absl::StatusOr<Walk> WalkProject(const std::string& root, const CaptureOptions& options) {
  absl::StatusOr<IgnoreRules> rules = LoadIgnoreRules(root);
  if (!rules.ok()) return rules.status();
  std::unique_ptr<archive, ArchiveDeleter> a(archive_read_disk_new());
  if (a == nullptr) return absl::ResourceExhaustedError("libarchive: out of memory");
  archive_read_disk_set_symlink_physical(a.get());
  archive_read_disk_set_behavior(a.get(), ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS |
                                              ARCHIVE_READDISK_NO_XATTR | ARCHIVE_READDISK_NO_ACL |
                                              ARCHIVE_READDISK_NO_FFLAGS);
  if (archive_read_disk_open(a.get(), root.c_str()) != ARCHIVE_OK) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read ", root, ": ", archive_error_string(a.get())));
  }
  Walk walk;
  std::map<std::string, uint64_t> top_sizes;
  archive_entry* entry = archive_entry_new();
  absl::Status failure;
  for (;;) {
    int r = archive_read_next_header2(a.get(), entry);
    if (r == ARCHIVE_EOF) break;
    const char* name = archive_entry_pathname(entry);
    std::string full = name != nullptr ? name : "";
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      failure = absl::FailedPreconditionError(absl::StrCat(
          "cannot read ", full.empty() ? root : full, ": ", archive_error_string(a.get()),
          "; leave it out with ", kIgnoreFileName, " or fix its permissions"));
      break;
    }
    std::string rel;
    if (full != root) {
      if (full.size() <= root.size() + 1 || full.compare(0, root.size(), root) != 0) {
        failure = absl::InternalError(absl::StrCat("unexpected path while walking: ", full));
        break;
      }
      rel = full.substr(root.size() + 1);
    }
    unsigned type = archive_entry_filetype(entry);
    bool is_dir = type == AE_IFDIR;
    if (!rel.empty() && rules->Ignored(rel, is_dir)) continue;
    if (rel == ".git/config" && type == AE_IFREG) {
      if (absl::Status s = CheckGitConfig(root, rel); !s.ok()) {
        failure = s;
        break;
      }
    }
    if (is_dir) {
      if (archive_read_disk_can_descend(a.get())) archive_read_disk_descend(a.get());
      if (rel.empty()) continue;
    } else if (type != AE_IFREG && type != AE_IFLNK) {
      continue;  // sockets, fifos and devices have no place in a project copy
    }
    if (rel.size() > 4096) {
      failure = absl::InvalidArgumentError(
          absl::StrCat("the path ", rel.substr(0, 100), "... is over 4096 bytes"));
      break;
    }
    WalkEntry e;
    e.path = rel;
    e.mode = static_cast<uint32_t>(archive_entry_mode(entry));
    e.mtime = archive_entry_mtime(entry);
    walk.stats.entries++;
    if (type == AE_IFREG) {
      e.size = static_cast<uint64_t>(std::max<int64_t>(0, archive_entry_size(entry)));
      walk.stats.data_bytes += e.size;
      walk.stats.blocks += (e.size + kBlock - 1) / kBlock + e.size / (128ull << 20);
      size_t slash = rel.find('/');
      if (slash != std::string::npos) top_sizes[rel.substr(0, slash)] += e.size;
    } else if (type == AE_IFLNK) {
      const char* target = archive_entry_symlink(entry);
      e.target = target != nullptr ? target : "";
      if (e.target.size() >= 60) walk.stats.blocks += 1;
    } else {
      walk.stats.blocks += 1;
    }
    if (walk.stats.entries > kMaxWorkspaceEntries) {
      failure = absl::ResourceExhaustedError(
          absl::StrCat("the project ", root, " holds more than ", kMaxWorkspaceEntries,
                       " files and directories; leave what the session does not need out with ",
                       root, "/", kIgnoreFileName));
      break;
    }
    // Past the cap the walk goes on (metadata only) so the message can name the largest parts.
    if (walk.stats.data_bytes <= options.max_bytes) walk.entries.push_back(std::move(e));
  }
  archive_entry_free(entry);
  if (!failure.ok()) return failure;
  if (walk.stats.data_bytes > options.max_bytes) {
    return absl::ResourceExhaustedError(
        OverCapMessage(root, walk.stats.data_bytes, options.max_bytes, top_sizes));
  }
  walk.stats.blocks += walk.stats.entries * 32 / kBlock + 1;
  return walk;
}

absl::Status ChangedWhileRead(const std::string& root, const std::string& rel) {
  return absl::AbortedError(
      absl::StrCat(root, "/", rel, " changed while the project was captured; try again"));
}

// Opens a file below root without following any symlink on the way (the tree may change while
// it is read; what is read must still be inside it).
absl::StatusOr<UniqueFd> OpenBeneath(int root_fd, const std::string& root, const std::string& rel) {
  open_how how = {};
  how.flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  long fd = syscall(SYS_openat2, root_fd, rel.c_str(), &how, sizeof how);
  if (fd >= 0) return UniqueFd(static_cast<int>(fd));
  if (errno == ENOENT || errno == ELOOP || errno == EXDEV || errno == ENOTDIR) {
    return ChangedWhileRead(root, rel);
  }
  return ErrnoStatus("open", absl::StrCat(root, "/", rel));
}

// Reads each file once (hashing it, and writing it into the image when there is one) and
// returns the sorted manifest.
absl::StatusOr<WorkspaceTree> ReadTree(const std::string& root, const Walk& walk,
                                       Ext4Writer* writer) {
  UniqueFd root_fd(open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd.valid()) return ErrnoStatus("open", root);
  WorkspaceTree tree;
  for (const WalkEntry& e : walk.entries) {
    Ext4Metadata meta{.mode = e.mode & 01777, .uid = 0, .gid = 0, .mtime = e.mtime};
    if (S_ISDIR(e.mode)) {
      tree.directories++;
      if (writer != nullptr) {
        if (absl::Status s = writer->AddDirectory(e.path, meta); !s.ok()) return s;
      }
      continue;
    }
    BaseEntry base{.path = e.path, .mode = (e.mode & S_IFMT) | (e.mode & 01777)};
    if (S_ISLNK(e.mode)) {
      base.target = e.target;
      if (writer != nullptr) {
        if (absl::Status s = writer->AddSymlink(e.path, e.target, meta); !s.ok()) return s;
      }
      tree.entries.push_back(std::move(base));
      continue;
    }
    absl::StatusOr<UniqueFd> fd = OpenBeneath(root_fd.get(), root, e.path);
    if (!fd.ok()) return fd.status();
    struct stat st;
    if (fstat(fd->get(), &st) != 0) return ErrnoStatus("stat", absl::StrCat(root, "/", e.path));
    if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != e.size) {
      return ChangedWhileRead(root, e.path);
    }
    Sha256 sha;
    uint64_t read_total = 0;
    int file = fd->get();
    auto read = [&](char* buf, size_t cap) -> absl::StatusOr<size_t> {
      for (;;) {
        ssize_t n = ::read(file, buf, cap);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return ErrnoStatus("read", absl::StrCat(root, "/", e.path));
        read_total += static_cast<uint64_t>(n);
        if (read_total > e.size) return ChangedWhileRead(root, e.path);
        sha.Update(absl::string_view(buf, static_cast<size_t>(n)));
        return static_cast<size_t>(n);
      }
    };
    if (writer != nullptr) {
      if (absl::Status s = writer->AddFile(e.path, meta, e.size, read); !s.ok()) return s;
    } else {
      char buf[1 << 16];
      for (;;) {
        absl::StatusOr<size_t> n = read(buf, sizeof buf);
        if (!n.ok()) return n.status();
        if (*n == 0) break;
      }
    }
    if (read_total != e.size) return ChangedWhileRead(root, e.path);
    base.size = e.size;
    base.sha256 = sha.FinishHex();
    tree.data_bytes += e.size;
    tree.entries.push_back(std::move(base));
  }
  std::sort(tree.entries.begin(), tree.entries.end(),
            [](const BaseEntry& a, const BaseEntry& b) { return a.path < b.path; });
  tree.digest = TreeDigest(tree.entries);
  return tree;
}

absl::StatusOr<std::string> ProjectRoot(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("the workspace ", dir, " does not exist"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the workspace ", dir, " is not a directory; give the project's directory (e.g. .)"));
  }
  char resolved[PATH_MAX];
  if (realpath(dir.c_str(), resolved) == nullptr) return ErrnoStatus("resolve", dir);
  if (std::string(resolved) == "/") {
    return absl::InvalidArgumentError("the workspace cannot be the whole filesystem (/)");
  }
  return std::string(resolved);
}

}  // namespace

std::string HumanBytes(uint64_t bytes) {
  if (bytes >= (1ull << 30)) return absl::StrFormat("%.1f GiB", bytes / double(1ull << 30));
  if (bytes >= (1ull << 20)) return absl::StrFormat("%.0f MiB", bytes / double(1ull << 20));
  if (bytes >= (1ull << 10)) return absl::StrFormat("%.0f KiB", bytes / double(1ull << 10));
  return absl::StrCat(bytes, " bytes");
}

std::string TreeDigest(const std::vector<BaseEntry>& entries) {
  Sha256 sha;
  for (const BaseEntry& e : entries) {
    std::string line = absl::StrFormat("%o %d %s %d:%s %s", e.mode, e.size, e.sha256,
                                       e.target.size(), e.target, e.path);
    line.push_back('\0');
    sha.Update(line);
  }
  return absl::StrCat("sha256:", sha.FinishHex());
}

absl::StatusOr<WorkspaceTree> DescribeWorkspace(const std::string& dir,
                                                const CaptureOptions& options) {
  absl::StatusOr<std::string> root = ProjectRoot(dir);
  if (!root.ok()) return root.status();
  absl::StatusOr<Walk> walk = WalkProject(*root, options);
  if (!walk.ok()) return walk.status();
  return ReadTree(*root, *walk, nullptr);
}

absl::StatusOr<CapturedWorkspace> CaptureWorkspace(const std::string& dir,
                                                   const std::string& image_path,
                                                   const CaptureOptions& options) {
  absl::StatusOr<std::string> root = ProjectRoot(dir);
  if (!root.ok()) return root.status();
  absl::StatusOr<Walk> walk = WalkProject(*root, options);
  if (!walk.ok()) return walk.status();
  Ext4Writer::Options size = ImageSizeFor({walk->stats});
  size.label = "airlock-workspace";
  absl::StatusOr<std::unique_ptr<Ext4Writer>> writer = Ext4Writer::Create(image_path, size);
  if (!writer.ok()) return writer.status();
  // A fresh ext4 has lost+found; a project does not.
  if (absl::Status s = (*writer)->Remove("lost+found"); !s.ok()) return s;
  CapturedWorkspace captured;
  captured.root = *root;
  absl::StatusOr<WorkspaceTree> tree = ReadTree(*root, *walk, writer->get());
  if (!tree.ok()) return tree.status();
  if (absl::Status s = (*writer)->Finish(); !s.ok()) return s;
  captured.tree = *std::move(tree);
  captured.image_bytes = size.size_bytes;
  if (IsGitRepository(*root)) {
    absl::StatusOr<ProcessResult> head =
        RunHostGit(*root, {"rev-parse", "--verify", "-q", "HEAD^{commit}"});
    if (!head.ok()) return head.status();
    if (head->exit_code == 0) {
      captured.head = std::string(absl::StripTrailingAsciiWhitespace(head->output));
    }
    absl::StatusOr<ProcessResult> branch =
        RunHostGit(*root, {"symbolic-ref", "--short", "-q", "HEAD"});
    if (!branch.ok()) return branch.status();
    if (branch->exit_code == 0) {
      captured.branch = std::string(absl::StripTrailingAsciiWhitespace(branch->output));
    }
  }
  return captured;
}

}  // namespace airlock
