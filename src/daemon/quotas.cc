#include "src/daemon/quotas.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "src/common/byte_size.h"
#include "src/common/file_util.h"

namespace airlock {
namespace {

constexpr size_t kMaxQuotaFile = 1 << 20;

// One quota as the file and the messages name it.
struct Field {
  const char* name;
  bool bytes;
  uint64_t QuotaAmounts::*amount;  // nullptr: a per-request field of Quota itself
  uint64_t Quota::*other;
  const char* what;
};

const std::vector<Field>& Fields() {
  static const std::vector<Field> fields = {
      {"sessions", false, &QuotaAmounts::sessions, nullptr, "sessions (creating, running, paused)"},
      {"running", false, &QuotaAmounts::running, nullptr, "sessions with a VM"},
      {"vcpus", false, &QuotaAmounts::vcpus, nullptr, "vCPUs of running sessions"},
      {"memory", true, &QuotaAmounts::memory_bytes, nullptr, "memory of running sessions"},
      {"disk", true, &QuotaAmounts::disk_bytes, nullptr,
       "writable disk sizes of all sessions, and volumes"},
      {"logs", true, &QuotaAmounts::log_bytes, nullptr,
       "stored command output (the oldest goes beyond it)"},
      {"images", true, &QuotaAmounts::image_bytes, nullptr,
       "images your pulls, imports and builds named, on disk (one over it is not kept)"},
      {"connections", false, &QuotaAmounts::connections, nullptr,
       "egress connections open at once, over all running sessions"},
      {"forks", false, nullptr, &Quota::forks_per_call, "forks one request makes"},
      {"pull", true, nullptr, &Quota::pull_bytes, "download size of one image pull"},
  };
  return fields;
}

uint64_t& Slot(Quota& q, const Field& f) {
  return f.amount != nullptr ? q.limits.*(f.amount) : q.*(f.other);
}

std::string Show(const Field& f, uint64_t n) { return f.bytes ? FormatBytes(n) : absl::StrCat(n); }

}  // namespace

std::vector<QuotaLine> DescribeQuota(const Quota& quota, const QuotaAmounts& used) {
  std::vector<QuotaLine> lines;
  Quota copy = quota;
  for (const Field& f : Fields()) {
    lines.push_back({.name = f.name,
                     .limit = Slot(copy, f),
                     .used = f.amount != nullptr ? used.*(f.amount) : 0,
                     .bytes = f.bytes,
                     .per_request = f.amount == nullptr,
                     .what = f.what});
  }
  return lines;
}

absl::StatusOr<Quotas> Quotas::Parse(absl::string_view text) {
  Quotas quotas;
  // A tenant's settings apply over the defaults, wherever in the file those are written.
  std::vector<std::pair<std::string, std::vector<std::pair<const Field*, uint64_t>>>> tenants;
  int number = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++number;
    absl::string_view line = absl::StripAsciiWhitespace(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    std::vector<std::string> words =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    auto bad = [&](const std::string& what) {
      return absl::InvalidArgumentError(absl::StrCat(
          "quota file line ", number, ": ", what,
          "; write `default KEY=VALUE...` or `tenant NAME KEY=VALUE...` with keys sessions, "
          "running, vcpus, memory, disk, logs, images, connections, forks, pull (sizes like 8g)"));
    };
    bool tenant = words[0] == "tenant";
    if (tenant && (words.size() < 2 || words[1].find('=') != std::string::npos)) {
      return bad("a tenant rule names the tenant (like uid:1000 or cert:NAME)");
    }
    if (!tenant && words[0] != "default") {
      return bad(absl::StrCat("unknown rule \"", words[0], "\""));
    }
    std::vector<std::pair<const Field*, uint64_t>> settings;
    for (size_t i = tenant ? 2 : 1; i < words.size(); ++i) {
      std::vector<std::string> kv = absl::StrSplit(words[i], absl::MaxSplits('=', 1));
      const Field* field = nullptr;
      for (const Field& f : Fields()) {
        if (kv.size() == 2 && kv[0] == f.name) field = &f;
      }
      if (field == nullptr) return bad(absl::StrCat("unknown setting \"", words[i], "\""));
      uint64_t value;
      if (!(field->bytes ? ParseByteSize(kv[1], 1, &value) : absl::SimpleAtoi(kv[1], &value))) {
        return bad(absl::StrCat("\"", kv[1], "\" is not a ", field->bytes ? "size" : "number"));
      }
      settings.push_back({field, value});
    }
    if (tenant) {
      tenants.push_back({words[1], std::move(settings)});
    } else {
      for (const auto& [field, value] : settings) Slot(quotas.defaults_, *field) = value;
    }
  }
  for (const auto& [tenant, settings] : tenants) {
    Quota& q = quotas.tenants_.try_emplace(tenant, quotas.defaults_).first->second;
    for (const auto& [field, value] : settings) Slot(q, *field) = value;
  }
  return quotas;
}

absl::StatusOr<Quotas> Quotas::Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFileToString(path, kMaxQuotaFile);
  if (!text.ok()) return text.status();
  absl::StatusOr<Quotas> quotas = Parse(*text);
  if (!quotas.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", quotas.status().message()));
  }
  return quotas;
}

const Quota& Quotas::For(const std::string& tenant) const {
  auto it = tenants_.find(tenant);
  return it != tenants_.end() ? it->second : defaults_;
}

absl::Status Quotas::Check(const Quota& quota, const QuotaAmounts& in_use,
                           const QuotaAmounts& adding) {
  for (const Field& f : Fields()) {
    if (f.amount == nullptr) continue;
    uint64_t limit = quota.limits.*(f.amount), used = in_use.*(f.amount), more = adding.*(f.amount);
    if (more == 0 || used + more <= limit) continue;
    return absl::ResourceExhaustedError(
        absl::StrCat("over the ", f.name, " quota of ", Show(f, limit), ": ", Show(f, used),
                     " in use, this needs ", Show(f, more),
                     " more (remove or pause sessions, or ask the operator for a larger quota)"));
  }
  return absl::OkStatus();
}

QuotaReservations::Hold& QuotaReservations::Hold::operator=(Hold&& other) noexcept {
  if (this != &other) {
    Release();
    owner_ = other.owner_;
    tenant_ = std::move(other.tenant_);
    held_ = other.held_;
    other.owner_ = nullptr;
  }
  return *this;
}

namespace {

// What of `held` a hold gives back for `visible`, taken off `held`.
QuotaAmounts TakeVisible(QuotaAmounts& held, const QuotaAmounts& visible) {
  QuotaAmounts give;
  for (const Field& f : Fields()) {
    if (f.amount == nullptr) continue;
    give.*(f.amount) = std::min(held.*(f.amount), visible.*(f.amount));
    held.*(f.amount) -= give.*(f.amount);
  }
  return give;
}

}  // namespace

void QuotaReservations::Hold::Settle(const QuotaAmounts& visible) {
  if (owner_ == nullptr) return;
  owner_->Give(tenant_, TakeVisible(held_, visible));
}

absl::Status QuotaReservations::Hold::SettleWith(const QuotaAmounts& visible,
                                                 const std::function<absl::Status()>& record) {
  if (owner_ == nullptr) return record();
  absl::MutexLock lock(&owner_->mu_);
  absl::Status recorded = record();
  if (recorded.ok()) owner_->GiveLocked(tenant_, TakeVisible(held_, visible));
  return recorded;
}

void QuotaReservations::Hold::Release() {
  if (owner_ == nullptr) return;
  owner_->Give(tenant_, held_);
  held_ = {};
  owner_ = nullptr;
}

absl::StatusOr<QuotaReservations::Hold> QuotaReservations::Admit(
    const std::string& tenant, const Quota& quota, const std::function<QuotaAmounts()>& usage,
    const QuotaAmounts& adding) {
  absl::MutexLock lock(&mu_);
  QuotaAmounts in_use = usage();
  QuotaAmounts& held = held_[tenant];
  for (const Field& f : Fields()) {
    if (f.amount != nullptr) in_use.*(f.amount) += held.*(f.amount);
  }
  if (absl::Status s = Quotas::Check(quota, in_use, adding); !s.ok()) return s;
  for (const Field& f : Fields()) {
    if (f.amount != nullptr) held.*(f.amount) += adding.*(f.amount);
  }
  Hold hold;
  hold.owner_ = this;
  hold.tenant_ = tenant;
  hold.held_ = adding;
  return hold;
}

QuotaAmounts QuotaReservations::Held(const std::string& tenant) {
  absl::MutexLock lock(&mu_);
  auto it = held_.find(tenant);
  return it != held_.end() ? it->second : QuotaAmounts{};
}

void QuotaReservations::Give(const std::string& tenant, const QuotaAmounts& amounts) {
  absl::MutexLock lock(&mu_);
  GiveLocked(tenant, amounts);
}

void QuotaReservations::GiveLocked(const std::string& tenant, const QuotaAmounts& amounts) {
  QuotaAmounts& held = held_[tenant];
  for (const Field& f : Fields()) {
    if (f.amount == nullptr) continue;
    held.*(f.amount) -= std::min(held.*(f.amount), amounts.*(f.amount));
  }
}

}  // namespace airlock
