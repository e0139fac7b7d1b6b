#include "src/common/sha256.h"

#include <gtest/gtest.h>

#include <string>

#include "absl/strings/escaping.h"
#include "src/common/file_util.h"
#include "src/testing/test_util.h"

namespace airlock {
namespace {

TEST(Sha256Test, MatchesThePublishedVectors) {
  // FIPS 180-2's examples.
  EXPECT_EQ(Sha256Hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  // Fed in pieces, then reused for a second stream after Finish.
  Sha256 sha;
  sha.Update("a");
  sha.Update("bc");
  EXPECT_EQ(sha.FinishHex(), Sha256Hex("abc"));
  sha.Update("abc");
  EXPECT_EQ(absl::BytesToHexString(sha.FinishRaw()), Sha256Hex("abc"));
}

TEST(Sha256Test, HmacMatchesRfc4231) {
  // RFC 4231 test case 2: a key shorter than the block.
  EXPECT_EQ(HmacSha256Hex("Jefe", "what do ya want for nothing?"),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  EXPECT_EQ(absl::BytesToHexString(HmacSha256("Jefe", "what do ya want for nothing?")),
            HmacSha256Hex("Jefe", "what do ya want for nothing?"));
}

TEST(Sha256Test, AFileIsHashedWholeAndAMissingOneIsNamed) {
  testing::TempDir scratch;
  std::string path = scratch.File("big");
  std::string bytes(3 << 20, 'x');  // more than one read's buffer
  bytes[2 << 20] = 'y';
  ASSERT_TRUE(WriteFileAtomically(path, bytes, 0600).ok());
  absl::StatusOr<std::string> hex = Sha256FileHex(path);
  ASSERT_TRUE(hex.ok()) << hex.status();
  EXPECT_EQ(*hex, Sha256Hex(bytes));
  absl::StatusOr<std::string> missing = Sha256FileHex(scratch.File("gone"));
  EXPECT_TRUE(absl::IsNotFound(missing.status()));
  EXPECT_NE(missing.status().message().find(scratch.File("gone")), std::string::npos);
}

}  // namespace
TEST(SecretEqualsTest, OnlyTheSameNonEmptySecretMatches) {
  EXPECT_TRUE(SecretEquals("abc", "abc"));
  EXPECT_FALSE(SecretEquals("abd", "abc"));
  EXPECT_FALSE(SecretEquals("ab", "abc"));
  EXPECT_FALSE(SecretEquals("abcd", "abc"));
  EXPECT_FALSE(SecretEquals("", ""));  // no secret set admits no one
}

}  // namespace airlock
