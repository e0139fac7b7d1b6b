// The FIPS 180-4 example vectors, and every length from 0 to 300 bytes hashed whole and in random
// chunks, compared with OpenSSL's SHA256.
#include "src/guest/guest_sha256.h"

#include <gtest/gtest.h>
#include <openssl/sha.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace airlock::guest {
namespace {

std::string ToHex(const std::array<uint8_t, 32>& digest) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (uint8_t byte : digest) {
    hex.push_back(kDigits[byte >> 4]);
    hex.push_back(kDigits[byte & 0xf]);
  }
  return hex;
}

std::array<uint8_t, 32> OpenSslSha256(const std::string& data) {
  std::array<uint8_t, 32> digest;
  SHA256(reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest.data());
  return digest;
}

TEST(Sha256Test, EmptyMessage) {
  EXPECT_EQ(ToHex(Sha256Of("")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

TEST(Sha256Test, Abc) {
  EXPECT_EQ(ToHex(Sha256Of("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, FourHundredFortyEightBits) {
  // 56 bytes: the length no longer fits in the first block, so padding takes a second.
  EXPECT_EQ(ToHex(Sha256Of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Sha256Test, OneMillionAs) {
  constexpr char kExpected[] = "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
  EXPECT_EQ(ToHex(Sha256Of(std::string(1'000'000, 'a'))), kExpected);

  // The same message fed in 1000 pieces of 1000 bytes, which straddle block boundaries.
  Sha256 sha;
  const std::string piece(1000, 'a');
  for (int i = 0; i < 1000; ++i) sha.Update(piece.data(), piece.size());
  EXPECT_EQ(ToHex(sha.Finish()), kExpected);
}

TEST(Sha256Test, EmptyUpdatesChangeNothing) {
  Sha256 sha;
  sha.Update(nullptr, 0);
  sha.Update("ab", 2);
  sha.Update(nullptr, 0);
  sha.Update("c", 1);
  EXPECT_EQ(ToHex(sha.Finish()), ToHex(Sha256Of("abc")));
}

TEST(Sha256Test, MatchesOpenSslForEveryLengthAndChunking) {
  std::mt19937 rng(20240611);
  std::uniform_int_distribution<int> byte_dist(0, 255);
  for (size_t length = 0; length <= 300; ++length) {
    std::string data(length, '\0');
    for (char& c : data) c = static_cast<char>(byte_dist(rng));
    const std::string expected = ToHex(OpenSslSha256(data));

    EXPECT_EQ(ToHex(Sha256Of(data)), expected) << "length " << length;

    for (int trial = 0; trial < 8; ++trial) {
      // Random split points, duplicates allowed so that some chunks are empty.
      std::uniform_int_distribution<size_t> point_dist(0, length);
      std::uniform_int_distribution<int> count_dist(0, 6);
      std::vector<size_t> points = {0, length};
      for (int i = count_dist(rng); i > 0; --i) points.push_back(point_dist(rng));
      std::sort(points.begin(), points.end());

      Sha256 sha;
      for (size_t i = 0; i + 1 < points.size(); ++i) {
        sha.Update(data.data() + points[i], points[i + 1] - points[i]);
      }
      EXPECT_EQ(ToHex(sha.Finish()), expected) << "length " << length << " trial " << trial;
    }
  }
}

}  // namespace
}  // namespace airlock::guest
