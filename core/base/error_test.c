/* pc_Error_Quote: both escape styles, the cut at the room (never within an
 * escape or a UTF-8 sequence), and text that fits whole. */
#include "testing/check.h"
#include "base/error.h"

#include <string.h>

static int quotes(const char *in, size_t n, size_t room, pc_QuoteStyle style, const char *want) {
  char buf[128];
  const char *got = pc_Error_Quote(buf, room, in, n, style);
  if (got != buf || strcmp(got, want) != 0) {
    fprintf(stderr, "pc_Error_Quote: got \"%s\", want \"%s\"\n", got, want);
    return 0;
  }
  return 1;
}

int main(void) {
  CHECK(quotes("", 0, 8, kPc_Quote_Json, ""));
  CHECK(quotes("a\0b\"c\\", 6, 64, kPc_Quote_Json, "a\\u0000b\\\"c\\\\"));
  CHECK(quotes("a\0b\"c\\\x7f", 7, 64, kPc_Quote_Lua, "a\\0b\\\"c\\\\\\127"));
  CHECK(quotes("\n1\n", 3, 64, kPc_Quote_Lua, "\\0101\\10")); /* three digits before a digit */
  CHECK(quotes("\n1\n", 3, 64, kPc_Quote_Json, "\\u000a1\\u000a"));
  CHECK(quotes("abcdefgh", 8, 12, kPc_Quote_Json, "abcdefgh")); /* 8 = room - 4: whole */
  CHECK(quotes("abcdefghi", 9, 12, kPc_Quote_Json, "abcdefgh..."));
  CHECK(quotes("abcdef\x01", 7, 12, kPc_Quote_Json, "abcdef..."));       /* not half an escape */
  CHECK(quotes("abcdefg\xc3\xa9", 9, 12, kPc_Quote_Json, "abcdefg...")); /* not half an é */
  CHECK(quotes("abcdef\xc3\xa9!", 9, 12, kPc_Quote_Json, "abcdef\xc3\xa9..."));
  CHECK(quotes("\xf0\x9f\x98\x80\xf0\x9f\x98\x80", 8, 10, kPc_Quote_Lua, "\xf0\x9f\x98\x80..."));
  /* bytes that are not UTF-8 are escaped, never copied or cut into */
  CHECK(quotes("\xff", 1, 64, kPc_Quote_Json, "\\xff"));
  CHECK(quotes("\xff", 1, 64, kPc_Quote_Lua, "\\255"));
  CHECK(quotes("\xc0\x80", 2, 64, kPc_Quote_Lua, "\\192\\128"));           /* overlong */
  CHECK(quotes("\xed\xa0\x80", 3, 64, kPc_Quote_Json, "\\xed\\xa0\\x80")); /* a surrogate */
  CHECK(quotes("\xf4\x90\x80\x80", 4, 64, kPc_Quote_Json,
               "\\xf4\\x90\\x80\\x80"));                          /* past U+10FFFF */
  CHECK(quotes("\xe2\x82", 2, 64, kPc_Quote_Json, "\\xe2\\x82")); /* cut short */
  CHECK(quotes("\"\x80\x80\x80", 4, 12, kPc_Quote_Json, "\\\"\\x80..."));
  CHECK(quotes("\x7f\x80\x80", 3, 12, kPc_Quote_Lua, "\\127\\128..."));
  return CHECK_DONE();
}
