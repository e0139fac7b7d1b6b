#include "src/daemon/fleet_record.h"

#include <gtest/gtest.h>

#include "src/daemon/state_store_testing.h"

namespace airlock {
namespace {

constexpr char kHeader[] = "airlock-test-record 1\n";
const std::string kKey(32, 'k');

SessionRecord Record() {
  SessionRecord s = NewSession("0123456789ab", Principal{1001, 1001});
  s.egress = {{.rule = "pypi.org:443", .source = "create"}};
  return s;
}

TEST(FleetRecordTest, WhatIsSignedReadsBackWithItsFields) {
  std::string value = SignFleetRecord(
      kHeader, {{"host", "host-a"}, {"reason", "tab\there\nand a line"}}, Record(), kKey);
  absl::StatusOr<FleetRecord> read = VerifyFleetRecord(value, kHeader, {"host", "reason"}, kKey);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->fields["host"], "host-a");
  EXPECT_EQ(read->fields["reason"], "tab\there\nand a line");
  EXPECT_EQ(read->record.id, "0123456789ab");
  EXPECT_EQ(read->record.tenant, "uid:1001");
  ASSERT_EQ(read->record.egress.size(), 1u);
  // Fields not asked for are none of the caller's.
  read = VerifyFleetRecord(value, kHeader, {"reason"}, kKey);
  EXPECT_FALSE(read.ok() && read->fields.contains("host"));
}

TEST(FleetRecordTest, AnotherKeyHeaderOrAnyChangedByteIsRefused) {
  std::string value = SignFleetRecord(kHeader, {{"host", "host-a"}}, Record(), kKey);
  absl::Status other_key =
      VerifyFleetRecord(value, kHeader, {"host"}, std::string(32, 'x')).status();
  EXPECT_TRUE(absl::IsDataLoss(other_key)) << other_key;
  EXPECT_NE(other_key.message().find("host.key"), std::string::npos) << other_key;
  EXPECT_TRUE(
      absl::IsDataLoss(VerifyFleetRecord(value, "airlock-other 1\n", {"host"}, kKey).status()));
  for (size_t i = 0; i < value.size(); i += 7) {
    std::string changed = value;
    changed[i] ^= 1;
    EXPECT_FALSE(VerifyFleetRecord(changed, kHeader, {"host"}, kKey).ok()) << i;
  }
  EXPECT_FALSE(
      VerifyFleetRecord(value + std::string(kMaxFleetRecordBytes, ' '), kHeader, {"host"}, kKey)
          .ok());
}

}  // namespace
}  // namespace airlock
