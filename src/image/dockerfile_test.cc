#include "src/image/dockerfile.h"

#include <gtest/gtest.h>

#include <string>

namespace airlock {
namespace {

using Kind = DockerInstructionKind;

Dockerfile ParseOk(const std::string& text) {
  absl::StatusOr<Dockerfile> f = ParseDockerfile(text);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? *f : Dockerfile{};
}

std::string ParseError(const std::string& text) {
  absl::StatusOr<Dockerfile> f = ParseDockerfile(text);
  EXPECT_FALSE(f.ok()) << text;
  return f.ok() ? "" : std::string(f.status().message());
}

TEST(DockerfileTest, ReadsAnAppsDockerfileIntoOneStage) {
  Dockerfile f = ParseOk(
      "# syntax=docker/dockerfile:1\n"
      "FROM airlock/bookworm-python\n"
      "# a comment\n"
      "WORKDIR /app\n"
      "COPY requirements.txt ./\n"
      "run pip install -r requirements.txt \\\n"
      "    && rm -rf /root/.cache\n"
      "ENV PORT=8000 NAME=\"my app\"\n"
      "EXPOSE 8000/tcp\n"
      "CMD [\"python3\", \"-m\", \"app\"]\n");
  ASSERT_EQ(f.stages.size(), 1u);
  const DockerStage& s = f.stages[0];
  EXPECT_EQ(s.base, "airlock/bookworm-python");
  EXPECT_EQ(s.line, 2u);
  ASSERT_EQ(s.instructions.size(), 6u);
  EXPECT_EQ(s.instructions[0].kind, Kind::kWorkdir);
  EXPECT_EQ(s.instructions[0].words, std::vector<std::string>{"/app"});
  EXPECT_EQ(s.instructions[1].words, (std::vector<std::string>{"requirements.txt", "./"}));
  const DockerInstruction& run = s.instructions[2];
  EXPECT_EQ(run.kind, Kind::kRun);
  EXPECT_EQ(run.line, 6u);
  EXPECT_FALSE(run.command.exec_form);
  EXPECT_EQ(run.command.text, "pip install -r requirements.txt     && rm -rf /root/.cache");
  ASSERT_EQ(s.instructions[3].pairs.size(), 2u);
  EXPECT_EQ(s.instructions[3].pairs[1].first, "NAME");
  EXPECT_EQ(*s.instructions[3].pairs[1].second, "\"my app\"");
  EXPECT_EQ(s.instructions[4].words, std::vector<std::string>{"8000/tcp"});
  EXPECT_TRUE(s.instructions[5].command.exec_form);
  EXPECT_EQ(s.instructions[5].command.argv, (std::vector<std::string>{"python3", "-m", "app"}));
}

TEST(DockerfileTest, StagesArgsAndCopyFrom) {
  Dockerfile f = ParseOk(
      "ARG BASE=airlock/bookworm-python\n"
      "ARG V\n"
      "FROM ${BASE} AS Build\n"
      "RUN [\"sh\", \"-c\", \"echo built > /out\"]\n"
      "FROM scratch\n"
      "COPY --from=build --chmod=0644 /out /out\n");
  ASSERT_EQ(f.global_args.size(), 2u);
  EXPECT_EQ(*f.global_args[0].second, "airlock/bookworm-python");
  EXPECT_FALSE(f.global_args[1].second.has_value());
  ASSERT_EQ(f.stages.size(), 2u);
  EXPECT_EQ(f.stages[0].name, "build");
  EXPECT_EQ(f.stages[0].base, "${BASE}");
  EXPECT_EQ(f.stages[1].base, "scratch");
  const DockerInstruction& copy = f.stages[1].instructions[0];
  EXPECT_EQ(copy.flags.at("from"), "build");
  EXPECT_EQ(copy.flags.at("chmod"), "0644");
}

TEST(DockerfileTest, EscapeDirectiveCommentsInContinuationsAndCrlf) {
  Dockerfile f = ParseOk(
      "# escape=`\r\n"
      "FROM base\r\n"
      "RUN dir c:\\ `\r\n"
      "# dropped\r\n"
      "\r\n"
      "  && echo done\r\n");
  EXPECT_EQ(f.escape, '`');
  EXPECT_EQ(f.stages[0].instructions[0].command.text, "dir c:\\   && echo done");
}

TEST(DockerfileTest, DirectivesOnlyAtTheTop) {
  Dockerfile f = ParseOk("FROM base\n# escape=`\nRUN a \\\n b\n");
  EXPECT_EQ(f.escape, '\\');
  EXPECT_EQ(f.stages[0].instructions[0].command.text, "a  b");
}

TEST(DockerfileTest, Heredocs) {
  Dockerfile f = ParseOk(
      "FROM base\n"
      "RUN <<EOF\n"
      "set -e\n"
      "echo hi\n"
      "EOF\n"
      "RUN python3 <<-'PY' > /out\n"
      "\tprint('$HOME')\n"
      "\tPY\n"
      "COPY <<conf /etc/app.conf\n"
      "a=1\n"
      "conf\n"
      "RUN echo '<<NOT' a<<<b\n");
  const auto& ins = f.stages[0].instructions;
  ASSERT_EQ(ins.size(), 4u);
  EXPECT_EQ(ins[0].command.text, "set -e\necho hi\n");
  EXPECT_EQ(ins[1].command.text, "python3 <<-'PY' > /out\nprint('$HOME')\nPY");
  EXPECT_FALSE(ins[1].heredocs[0].expand);
  EXPECT_EQ(ins[2].kind, Kind::kCopy);
  ASSERT_EQ(ins[2].heredocs.size(), 1u);
  EXPECT_EQ(ins[2].heredocs[0].body, "a=1\n");
  EXPECT_EQ(ins[2].words, (std::vector<std::string>{"<<conf", "/etc/app.conf"}));
  EXPECT_TRUE(ins[3].heredocs.empty());
}

TEST(DockerfileTest, MaintainerBecomesALabelAndOldEnvFormKeepsSpaces) {
  Dockerfile f = ParseOk("FROM base\nMAINTAINER Ann <ann@example.com>\nENV GREETING hello there\n");
  const auto& ins = f.stages[0].instructions;
  EXPECT_EQ(ins[0].kind, Kind::kLabel);
  EXPECT_EQ(ins[0].pairs[0].first, "maintainer");
  EXPECT_EQ(*ExpandWord(*ins[0].pairs[0].second, {}), "Ann <ann@example.com>");
  EXPECT_EQ(ins[1].pairs[0].first, "GREETING");
  EXPECT_EQ(*ins[1].pairs[0].second, "hello there");
}

TEST(DockerfileTest, RefusalsNameTheLineAndWhatToDo) {
  EXPECT_EQ(ParseError(""), "the Dockerfile has no FROM: start it with FROM IMAGE");
  EXPECT_NE(ParseError("RUN true\n").find("line 1: RUN before FROM"), std::string::npos);
  EXPECT_NE(ParseError("FROM a\nONBUILD RUN x\n").find("line 2: ONBUILD is not supported"),
            std::string::npos);
  EXPECT_NE(ParseError("FROM a\nFOO bar\n").find("unknown instruction \"FOO\""), std::string::npos);
  EXPECT_NE(ParseError("FROM a\nRUN --mount=type=cache,target=/x true\n").find("--allow"),
            std::string::npos);
  EXPECT_NE(ParseError("FROM a\nCOPY --own=1 a b\n").find("COPY takes no flag --own (it takes"),
            std::string::npos);
  EXPECT_NE(ParseError("FROM a\nCOPY onlyone\n").find("a destination"), std::string::npos);
  EXPECT_NE(ParseError("FROM a\nSHELL bash -c\n").find("JSON array"), std::string::npos);
  EXPECT_NE(ParseError("FROM a b c d\n").find("AS NAME"), std::string::npos);
  EXPECT_NE(ParseError("FROM a\nRUN <<EOF\necho\n").find("never ends"), std::string::npos);
  EXPECT_NE(ParseError("FROM a\nARG 1X=2\n").find("letters, digits"), std::string::npos);
  EXPECT_NE(ParseError("FROM a\nENV A\n").find("needs a value"), std::string::npos);
  EXPECT_NE(ParseError("FROM a\nRUN\n").find("RUN needs a command"), std::string::npos);
  EXPECT_NE(ParseError(std::string("FROM a\nRUN x\0y\n", 16)).find("line 2: a NUL"),
            std::string::npos);
}

TEST(DockerfileTest, HostileSizesAreLinearOrRefused) {
  std::string many = "FROM base\nRUN true";
  while (many.size() < (1 << 20)) many += " \\\n  && true";
  many += "\n";
  Dockerfile f = ParseOk(many);
  EXPECT_GT(f.stages[0].instructions[0].command.text.size(), 500000u);

  std::string too_many = "FROM base\n";
  for (size_t i = 0; i <= kMaxInstructions; ++i) too_many += "RUN true\n";
  EXPECT_NE(ParseError(too_many).find("more than 4096 instructions"), std::string::npos);
  EXPECT_NE(ParseError(std::string(kMaxDockerfileBytes + 1, '#')).find("at most 4 MiB"),
            std::string::npos);
}

TEST(ExpandWordTest, VariablesQuotesAndDefaults) {
  std::map<std::string, std::string> vars = {{"A", "x"}, {"EMPTY", ""}, {"P", "/opt"}};
  EXPECT_EQ(*ExpandWord("$A-${A}-$NONE.", vars), "x-x-.");
  EXPECT_EQ(*ExpandWord("${NONE:-d}|${EMPTY:-d}|${EMPTY-d}|${A:-d}", vars), "d|d||x");
  EXPECT_EQ(*ExpandWord("${A:+set}|${EMPTY:+set}|${EMPTY+set}|${NONE+set}", vars), "set||set|");
  EXPECT_EQ(*ExpandWord("${NONE:-${P}/bin}", vars), "/opt/bin");
  EXPECT_EQ(*ExpandWord("'$A' \"$A\" \\$A \"\\$A\"", vars), "$A x $A $A");
  EXPECT_EQ(*ExpandWord("a\\ b", vars), "a b");
  EXPECT_EQ(*ExpandWord("`$A", vars, '`'), "$A");
  EXPECT_EQ(*ExpandWord("cost $5 $", vars), "cost $5 $");
  EXPECT_EQ(ExpandWord("${NONE:?set NONE with --build-arg}", vars).status().message(),
            "in \"${NONE:?set NONE with --build-arg}\": NONE: set NONE with --build-arg");
  EXPECT_FALSE(ExpandWord("\"open", vars).ok());
  EXPECT_FALSE(ExpandWord("${A", vars).ok());
  EXPECT_FALSE(ExpandWord("${A/x/y}", vars).ok());
  EXPECT_FALSE(ExpandWord("${}", vars).ok());
}

TEST(ExpandWordTest, NestingAndGrowthAreCapped) {
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "${X:-";
  deep += "x";
  for (int i = 0; i < 100; ++i) deep += "}";
  EXPECT_NE(ExpandWord(deep, {}).status().message().find("nested too deep"), std::string::npos);
  std::map<std::string, std::string> vars = {{"B", std::string(1 << 16, 'b')}};
  std::string word;
  for (int i = 0; i < 20; ++i) word += "$B";
  EXPECT_NE(ExpandWord(word, vars).status().message().find("more than 1 MiB"), std::string::npos);
}

TEST(ExpandWordTest, WordsSplitOutsideQuotes) {
  std::map<std::string, std::string> vars = {{"F", "a b"}};
  EXPECT_EQ(*ExpandWords("\"my file\" $F 'x y' dest/", vars),
            (std::vector<std::string>{"my file", "a b", "x y", "dest/"}));
}

}  // namespace
}  // namespace airlock
