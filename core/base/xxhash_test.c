/* XXH64 against the reference's vectors (the empty string, "a", "abc",
 * and "Nobody inspects the spammish repetition", the published ones),
 * inputs across the 32-byte stripe, 8- and 4-byte tails, a seed, and
 * the "address_n" keys of a ring_hash ring, each value as xxhash-wasm
 * (the hash @grpc/grpc-js-xds's ring uses) gives it. */
#include "testing/check.h"
#include "base/xxhash.h"

#include <string.h>

static uint64_t h(const char *s) {
  return pc_XxHash64(s, strlen(s), 0);
}

int main(void) {
  CHECK(pc_XxHash64("", 0, 0) == 0xef46db3751d8e999ull);
  CHECK(h("a") == 0xd24ec4f1a98c6e5bull);
  CHECK(h("abc") == 0x44bc2cf5ad770999ull);
  CHECK(h("127.0.0.1:8080_0") == 0xf673a43b9624fa24ull);
  CHECK(h("user-42") == 0x397e9d3a76af7c81ull);
  CHECK(h("Nobody inspects the spammish repetition") == 0xfbcea83c8a378bf1ull);
  CHECK(h("Nobody inspects the spammish repetitionNobody inspects the spammish repetition") ==
        0xa997d744bbe85185ull);
  CHECK(h("0123456789abcdef0123456789abcdef") == 0x642a94958e71e6c5ull);
  CHECK(pc_XxHash64("abc", 3, 1) == 0xbea9ca8199328908ull);
  CHECK(pc_XxHash64("abcd", 3, 0) == h("abc")); /* only the n bytes count */
  return CHECK_DONE();
}
