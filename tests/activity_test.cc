// The activity record end to end: what programs in a session did, as the guest's PID 1 saw it
// (not as any transcript says), reaching `airlock log` with the command each process descends
// from, across a pause and a resume, with hostile names escaped and a flood bounded.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "tests/cli_runner.h"

namespace airlock {
namespace {

std::string Create() {
  Result r = RunAirlock({"session", "create"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return std::string(absl::StripTrailingAsciiWhitespace(r.out));
}

nlohmann::json Timeline(const std::string& id, const std::vector<std::string>& flags = {}) {
  std::vector<std::string> args = {"log", id, "--json"};
  args.insert(args.end(), flags.begin(), flags.end());
  Result r = RunAirlock(args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  nlohmann::json events = nlohmann::json::parse(r.out, nullptr, false);
  return events.is_array() ? events : nlohmann::json::array();
}

// The first activity event of `kind` whose path (or a program's argv[0]) is `what`.
const nlohmann::json* Find(const nlohmann::json& events, const std::string& kind,
                           const std::string& what) {
  for (const nlohmann::json& e : events) {
    if (e.value("kind", "") != kind) continue;
    if (e.value("path", "") == what) return &e;
    if (e.contains("argv") && !e["argv"].empty() && e["argv"][0] == what) return &e;
  }
  return nullptr;
}

// Waits (at most 60 s: records reach the host within seconds) until the timeline has every
// (kind, what) named; returns the last timeline read.
nlohmann::json WaitForRecords(const std::string& id,
                              const std::vector<std::pair<std::string, std::string>>& wanted) {
  nlohmann::json events;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (;;) {
    events = Timeline(id);
    bool all = true;
    for (const auto& [kind, what] : wanted) all = all && Find(events, kind, what) != nullptr;
    if (all || std::chrono::steady_clock::now() > deadline) return events;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
}

uint64_t ExecIdOf(const nlohmann::json& events, const std::string& first_arg) {
  for (const nlohmann::json& e : events) {
    if (e.value("kind", "") == "exec" && e["argv"].size() > 2 &&
        absl::StrContains(e["argv"][2].get<std::string>(), first_arg)) {
      return e["exec_id"].get<uint64_t>();
    }
  }
  return 0;
}

TEST(ActivityTest, WhatAScriptDidIsRecordedWithItsCommandEvenWhenItCoversItsTracks) {
  std::string id = Create();
  ASSERT_EQ(id.size(), 12u);
  // Reads, writes, a directory, a rename, children, a file of the image removed, and a log the
  // script writes and then deletes: the record keeps what the guest no longer has.
  ExecScript(id,
             "mkdir -p /workspace/proj && echo hi > /workspace/proj/a.txt && "
             "cat /workspace/proj/a.txt >/dev/null && mv /workspace/proj/a.txt "
             "/workspace/proj/b.txt && python3 -c 'open(\"/root/notes\", \"w\").write(\"x\")' && "
             "echo secret-work > /root/agent.log && rm /root/agent.log && rm /root/.profile && "
             "sh -c 'exit 3' ; true");
  ExecScript(id, "echo second > /workspace/second");
  // What the first command did, each by that command; the second's is its own.
  const std::vector<std::pair<std::string, std::string>> first_did = {
      {"activity.create", "/workspace/proj"},
      {"activity.write", "/workspace/proj/a.txt"},
      {"activity.read", "/workspace/proj/a.txt"},
      {"activity.rename", "/workspace/proj/a.txt"},
      {"activity.write", "/root/notes"},
      {"activity.write", "/root/agent.log"},
      {"activity.remove", "/root/agent.log"},
      {"activity.remove", "/root/.profile"},
      {"activity.exec", "python3"},
      {"activity.exec", "mv"}};
  std::vector<std::pair<std::string, std::string>> wanted = first_did;
  wanted.push_back({"activity.write", "/workspace/second"});
  nlohmann::json events = WaitForRecords(id, wanted);
  uint64_t first = ExecIdOf(events, "mkdir"), second = ExecIdOf(events, "echo second");
  ASSERT_NE(first, 0u) << events.dump(1);
  ASSERT_NE(second, 0u);
  for (const auto& [kind, what] : first_did) {
    const nlohmann::json* e = Find(events, kind, what);
    ASSERT_NE(e, nullptr) << kind << " " << what << " missing from\n" << events.dump(1);
    EXPECT_EQ(e->value("exec_id", 0u), first) << e->dump();
    EXPECT_EQ(e->value("actor", ""), "guest");
  }
  EXPECT_EQ(Find(events, "activity.read", "/workspace/proj/a.txt")->value("process", ""), "cat");
  EXPECT_EQ(Find(events, "activity.rename", "/workspace/proj/a.txt")->value("path_to", ""),
            "/workspace/proj/b.txt");
  EXPECT_EQ(Find(events, "activity.write", "/root/notes")->value("process", ""), "python3");
  const nlohmann::json* python = Find(events, "activity.exec", "python3");
  EXPECT_EQ((*python)["argv"][1], "-c");
  EXPECT_NE(python->value("parent_pid", 0u), 0u);
  EXPECT_EQ(Find(events, "activity.write", "/workspace/second")->value("exec_id", 0u), second);
  // How the child ended is recorded too.
  bool exit3 = false;
  for (const nlohmann::json& e : events) {
    exit3 = exit3 || (e.value("kind", "") == "activity.exit" && e.value("exit_code", 0) == 3 &&
                      e.value("exec_id", 0u) == first);
  }
  EXPECT_TRUE(exit3) << events.dump(1);
  // The text form names the command and the process.
  Result text = RunAirlock({"log", id});
  EXPECT_NE(text.out.find(absl::StrCat("activity.write #", first)), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("write /root/notes by python3"), std::string::npos) << text.out;

  // A snapshot closes the guest's stream; the record goes on after the resume.
  ASSERT_EQ(RunAirlock({"pause", id}).exit_code, 0);
  ASSERT_EQ(RunAirlock({"resume", id}).exit_code, 0);
  ExecScript(id, "echo after > /workspace/after-resume");
  events = WaitForRecords(id, {{"activity.write", "/workspace/after-resume"}});
  EXPECT_NE(Find(events, "activity.write", "/workspace/after-resume"), nullptr) << events.dump(1);
  // Nothing the agent runs can take it back: the session's own files are gone, the record not.
  ASSERT_EQ(RunAirlock({"rm", id}).exit_code, 0);
  events = Timeline(id);
  EXPECT_NE(Find(events, "activity.remove", "/root/agent.log"), nullptr);
}

TEST(ActivityTest, HostileNamesAreEscapedAndAFloodIsBoundedAndCounted) {
  std::string id = Create();
  // A name with an escape sequence and a newline, and a path of about 4 KiB.
  ExecScript(id,
             "set -e; mkdir -p /workspace; cd /workspace; "
             "printf x > \"$(printf 'evil\\033[31m\\nname')\"; "
             "d=/workspace; for i in $(seq 1 16); do d=$d/$(printf '%0250d' $i); done; "
             "mkdir -p $d; echo deep > $d/f");
  nlohmann::json events;
  const nlohmann::json* evil = nullptr;
  const nlohmann::json* deep = nullptr;
  for (int i = 0; i < 120 && (evil == nullptr || deep == nullptr); ++i) {
    events = Timeline(id);
    evil = Find(events, "activity.write", "/workspace/evil\x1b[31m\nname");
    deep = nullptr;
    for (const nlohmann::json& e : events) {
      if (e.value("kind", "") == "activity.write" && absl::EndsWith(e.value("path", ""), "/f")) {
        deep = &e;
      }
    }
    if (evil == nullptr || deep == nullptr) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
  }
  ASSERT_NE(evil, nullptr) << events.dump(1);
  ASSERT_NE(deep, nullptr) << events.dump(1);
  EXPECT_GT(deep->value("path", "").size(), 4000u);
  Result text = RunAirlock({"log", id});
  EXPECT_EQ(text.out.find('\x1b'), std::string::npos);
  EXPECT_NE(text.out.find("evil\\x1b[31m"), std::string::npos) << text.out;

  // Files written as fast as the guest can: the session goes on, and each write is in the
  // record unless the record says events were lost (the kernel merges repeats of one event
  // not yet read, so every file here is a new one).
  constexpr int kFiles = 5000;
  auto started = std::chrono::steady_clock::now();
  ExecScript(id, absl::StrCat("python3 -c 'import os\n"
                              "os.makedirs(\"/workspace/flood\", exist_ok=True)\n"
                              "for i in range(",
                              kFiles,
                              "):\n"
                              "    open(\"/workspace/flood/f%d\" % i, \"w\").close()'"));
  auto took = std::chrono::steady_clock::now() - started;
  EXPECT_EQ(ExecScript(id, "echo alive"), "alive\n");
  int writes = 0, lost = 0, before = -1;
  for (int i = 0; i < 30 && writes < kFiles && lost == 0 && writes != before; ++i) {
    std::this_thread::sleep_for(std::chrono::seconds(2));
    before = writes;
    events = Timeline(id);
    writes = lost = 0;
    for (const nlohmann::json& e : events) {
      writes += e.value("kind", "") == "activity.write" &&
                absl::StartsWith(e.value("path", ""), "/workspace/flood/f");
      lost += e.value("kind", "") == "activity.lost";
    }
  }
  EXPECT_TRUE(writes == kFiles || lost > 0) << writes << " writes, " << lost << " losses";
  std::printf("%d files written in %.1f s; %d writes in the record, %d losses said\n", kFiles,
              std::chrono::duration<double>(took).count(), writes, lost);
  RunAirlock({"rm", id});
}

}  // namespace
}  // namespace airlock
