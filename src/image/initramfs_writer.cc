#include "src/image/initramfs_writer.h"

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <cstdio>

#include "absl/strings/str_format.h"
#include "src/common/file_util.h"

namespace airlock {
namespace {

void Pad4(std::string* out) {
  while (out->size() % 4 != 0) out->push_back('\0');
}

void AddEntry(std::string* out, int ino, const std::string& name, uint32_t mode,
              const std::string& data, uint32_t rdev_major = 0, uint32_t rdev_minor = 0) {
  absl::StrAppendFormat(out, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X", ino,
                        mode, 0, 0, S_ISDIR(mode) ? 2 : 1, 0, data.size(), 0, 0, rdev_major,
                        rdev_minor, name.size() + 1, 0);
  out->append(name);
  out->push_back('\0');
  Pad4(out);
  out->append(data);
  Pad4(out);
}

}  // namespace

std::string BuildInitramfs(const std::string& agent_binary) {
  std::string out;
  int ino = 1;
  for (const char* dir : {"dev", "proc", "sys", "root", "image", "session"}) {
    AddEntry(&out, ino++, dir, S_IFDIR | 0755, "");
  }
  AddEntry(&out, ino++, "dev/console", S_IFCHR | 0600, "", 5, 1);
  AddEntry(&out, ino++, "init", S_IFREG | 0755, agent_binary);
  AddEntry(&out, 0, "TRAILER!!!", 0, "");
  return out;
}

absl::Status WriteInitramfs(const std::string& agent_path, const std::string& out_path) {
  absl::StatusOr<std::string> agent = ReadFileToString(agent_path, 64 << 20);
  if (!agent.ok()) return agent.status();
  return WriteFileAtomically(out_path, BuildInitramfs(*agent), 0644);
}

}  // namespace airlock
