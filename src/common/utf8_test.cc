#include "src/common/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace airlock {
namespace {

TEST(Utf8Test, NothingAGuestPrintsCanDriveTheTerminal) {
  // Colour, a window title, a cursor move, a carriage return over a line, C1's CSI, a bad byte.
  EXPECT_EQ(EscapeForTerminal("\x1b[31mred\x1b]0;title\x07"), "\\x1b[31mred\\x1b]0;title\\x07");
  EXPECT_EQ(EscapeForTerminal("ok\rforged"), "ok\\x0dforged");
  EXPECT_EQ(EscapeForTerminal("\xc2\x9b"
                              "2J"),
            "\\xc2\\x9b2J");
  EXPECT_EQ(EscapeForTerminal("a\x7f\xff"), "a\\x7f\\xff");
  // A new line is a forged log line unless the caller prints line by line.
  EXPECT_EQ(EscapeForTerminal("one\ntwo"), "one\\x0atwo");
  EXPECT_EQ(EscapeForTerminal("one\ntwo", /*keep_newlines=*/true), "one\ntwo");
  // What is plain stays as it is: tabs, accents, other scripts, emoji, no-break space.
  for (const char* plain : {"a\tb", "caf\xc3\xa9", "\xe6\x97\xa5\xe6\x9c\xac", "\xf0\x9f\x99\x82",
                            "\xc2\xa0", "web.test:8080"}) {
    EXPECT_EQ(EscapeForTerminal(plain), plain);
  }
}

}  // namespace
}  // namespace airlock
