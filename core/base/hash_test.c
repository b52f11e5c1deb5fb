/* FNV-1a 64 against the published test vectors (the empty string, "a",
 * "foobar"), and continuation: a name's hash is its prefix's continued. */
#include "testing/check.h"
#include "base/hash.h"

int main(void) {
  CHECK(pc_Hash_String("") == 0xcbf29ce484222325ull);
  CHECK(pc_Hash_String("a") == 0xaf63dc4c8601ec8cull);
  CHECK(pc_Hash_String("foobar") == 0x85944171f73967e8ull);
  CHECK(pc_Hash_More(PC_HASH_START, "foobar", 6) == pc_Hash_String("foobar"));
  CHECK(pc_Hash_More(pc_Hash_More(PC_HASH_START, "a", 1), ".b", 2) == pc_Hash_String("a.b"));
  CHECK(pc_Hash_More(PC_HASH_START, "x", 0) == PC_HASH_START);
  CHECK(pc_Hash_More(PC_HASH_START, "a\0b", 3) != pc_Hash_String("a"));
  return CHECK_DONE();
}
