/* pc_Utf8_Put writes each length's smallest and largest code point as
 * RFC 3629 says. */
#include "testing/check.h"
#include "base/utf8.h"

#include <string.h>

static int put_is(uint32_t cp, const char *want) {
  char out[4];
  size_t n = pc_Utf8_Put(cp, out);
  return n == strlen(want) && memcmp(out, want, n) == 0;
}

int main(void) {
  CHECK(put_is(0x41, "A"));
  CHECK(put_is(0x7F, "\x7F"));
  CHECK(put_is(0x80, "\xC2\x80"));
  CHECK(put_is(0x7FF, "\xDF\xBF"));
  CHECK(put_is(0x800, "\xE0\xA0\x80"));
  CHECK(put_is(0xFFFD, "\xEF\xBF\xBD"));
  CHECK(put_is(0xFFFF, "\xEF\xBF\xBF"));
  CHECK(put_is(0x10000, "\xF0\x90\x80\x80"));
  CHECK(put_is(0x10437, "\xF0\x90\x90\xB7"));
  CHECK(put_is(0x10FFFF, "\xF4\x8F\xBF\xBF"));
  char nul[4] = {1, 1, 1, 1};
  CHECK(pc_Utf8_Put(0, nul) == 1 && nul[0] == 0);
  return CHECK_DONE();
}
