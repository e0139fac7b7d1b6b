#include "tests/package_mirror.h"

#include <archive.h>
#include <archive_entry.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <openssl/sha.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "src/common/file_util.h"
#include "src/common/hex.h"
#include "src/common/subprocess.h"

namespace airlock {
namespace {

// Regular files (0644) as a zip, or as a gzipped tar, in memory.
std::string Archive(const std::vector<std::pair<std::string, std::string>>& files, bool zip) {
  std::string buffer(1 << 20, '\0');
  size_t used = 0;
  archive* a = archive_write_new();
  if (zip) {
    archive_write_set_format_zip(a);
  } else {
    archive_write_add_filter_gzip(a);
    archive_write_set_format_ustar(a);
  }
  archive_write_open_memory(a, buffer.data(), buffer.size(), &used);
  for (const auto& [name, data] : files) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_write_header(a, e);
    archive_write_data(a, data.data(), data.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  buffer.resize(used);
  return buffer;
}

}  // namespace

std::string DemoWheel() {
  auto record_hash = [](const std::string& data) {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
    unsigned char b64[64];
    int n = EVP_EncodeBlock(b64, digest, SHA256_DIGEST_LENGTH);
    std::string out(reinterpret_cast<char*>(b64), static_cast<size_t>(n));
    for (char& c : out) c = c == '+' ? '-' : c == '/' ? '_' : c;
    return absl::StrCat("sha256=", std::string(absl::StripSuffix(absl::StripSuffix(out, "="), "=")),
                        ",", data.size());
  };
  std::vector<std::pair<std::string, std::string>> files = {
      {"airlock_demo/__init__.py", "VALUE = 42\n"},
      {"airlock_demo-1.0.dist-info/METADATA",
       "Metadata-Version: 2.1\nName: airlock-demo\nVersion: 1.0\n"},
      {"airlock_demo-1.0.dist-info/WHEEL",
       "Wheel-Version: 1.0\nGenerator: airlock-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
  };
  std::string record;
  for (const auto& [name, data] : files)
    absl::StrAppend(&record, name, ",", record_hash(data), "\n");
  absl::StrAppend(&record, "airlock_demo-1.0.dist-info/RECORD,,\n");
  files.emplace_back("airlock_demo-1.0.dist-info/RECORD", record);
  return Archive(files, /*zip=*/true);
}

LoopbackHttpServer::Handler DemoIndex(std::map<std::string, std::string> extra) {
  return [wheel = DemoWheel(),
          extra = std::move(extra)](const std::string& path) -> std::optional<std::string> {
    if (path == "/simple/airlock-demo/" || path == "/simple/airlock-demo") {
      return absl::StrCat("<!DOCTYPE html><html><body><a href=\"/files/", kDemoWheelName, "\">",
                          kDemoWheelName, "</a></body></html>");
    }
    if (path == absl::StrCat("/files/", kDemoWheelName)) return wheel;
    // A flat Debian repository ("deb URI ./") is asked for URI/./FILE.
    auto found = extra.find(absl::StrReplaceAll(path, {{"/./", "/"}}));
    if (found != extra.end()) return found->second;
    return std::nullopt;
  };
}

std::map<std::string, std::string> DemoNpmRegistry(const std::string& host) {
  std::vector<std::pair<std::string, std::string>> files = {
      {"package/package.json",
       R"({"name":"airlock-demo-js","version":"1.0.0","main":"index.js","license":"MIT"})"},
      {"package/index.js", "module.exports.VALUE = 42;\n"},
  };
  std::string tarball = Archive(files, /*zip=*/false);
  unsigned char sha512[SHA512_DIGEST_LENGTH], sha1[SHA_DIGEST_LENGTH];
  SHA512(reinterpret_cast<const unsigned char*>(tarball.data()), tarball.size(), sha512);
  SHA1(reinterpret_cast<const unsigned char*>(tarball.data()), tarball.size(), sha1);
  unsigned char b64[128];
  int n = EVP_EncodeBlock(b64, sha512, SHA512_DIGEST_LENGTH);
  std::string integrity =
      absl::StrCat("sha512-", std::string(reinterpret_cast<char*>(b64), static_cast<size_t>(n)));
  std::string path = "/airlock-demo-js/-/airlock-demo-js-1.0.0.tgz";
  std::string packument = absl::StrCat(
      R"({"name":"airlock-demo-js","dist-tags":{"latest":"1.0.0"},"versions":{"1.0.0":)",
      R"({"name":"airlock-demo-js","version":"1.0.0","main":"index.js","dist":{"tarball":"http://)",
      host, path, R"(","integrity":")", integrity, R"(","shasum":")", HexString(sha1, sizeof sha1),
      R"("}}}})");
  return {{"/airlock-demo-js", packument}, {path, tarball}};
}

std::map<std::string, std::string> DemoDebianRepository() {
  TestDir dir;
  std::string root = dir.path + "/pkg";
  EXPECT_TRUE(MakeDirectories(root + "/DEBIAN", 0755).ok());
  EXPECT_TRUE(MakeDirectories(root + "/usr/bin", 0755).ok());
  EXPECT_TRUE(WriteFileAtomically(root + "/DEBIAN/control",
                                  "Package: airlock-hello\nVersion: 1.0\nArchitecture: all\n"
                                  "Maintainer: Airlock Tests <test@airlock.invalid>\n"
                                  "Description: a package the tests install\n",
                                  0644)
                  .ok());
  EXPECT_TRUE(WriteFileAtomically(root + "/usr/bin/airlock-hello",
                                  "#!/bin/sh\necho hello from a package\n", 0755)
                  .ok());
  std::string deb_path = dir.path + "/airlock-hello_1.0_all.deb";
  absl::StatusOr<ProcessResult> built =
      RunProcess({"/usr/bin/dpkg-deb", "--root-owner-group", "--build", root, deb_path});
  EXPECT_TRUE(built.ok() && built->exit_code == 0) << (built.ok() ? built->output : "");
  std::string deb = ReadFileToString(deb_path, 1 << 20).value_or("");
  auto sha256 = [](const std::string& data) {
    unsigned char digest[SHA256_DIGEST_LENGTH];
    SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest);
    return HexString(digest, sizeof(digest));
  };
  std::string packages = absl::StrCat(
      "Package: airlock-hello\nVersion: 1.0\nArchitecture: all\n"
      "Maintainer: Airlock Tests <test@airlock.invalid>\nInstalled-Size: 1\n"
      "Filename: ./airlock-hello_1.0_all.deb\nSize: ",
      deb.size(), "\nSHA256: ", sha256(deb), "\nDescription: a package the tests install\n\n");
  std::string release = absl::StrCat("Date: Thu, 03 Dec 2026 00:00:00 UTC\nSHA256:\n ",
                                     sha256(packages), " ", packages.size(), " Packages\n");
  return {{"/debian/Packages", packages},
          {"/debian/Release", release},
          {"/debian/airlock-hello_1.0_all.deb", deb}};
}

}  // namespace airlock
