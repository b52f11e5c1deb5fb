/* pc_Net_Resolve: addresses as numeric strings, duplicates dropped, the
 * bound kept, and a clear error for a name that does not resolve. */
#include "net/resolve.h"
#include "testing/check.h"

#include <string.h>

int main(void) {
  char out[8][PC_NET_ADDRESS_MAX];
  pc_Error err;
  pc_Error_Init(&err);
  /* A numeric address resolves to itself, once. */
  CHECK(pc_Net_Resolve("127.0.0.1", "50051", out, 8, &err) == 1);
  CHECK(strcmp(out[0], "127.0.0.1") == 0);
  /* A name gives numeric addresses (localhost: 127.0.0.1 or ::1 here). */
  size_t n = pc_Net_Resolve("localhost", "80", out, 8, &err);
  CHECK(n >= 1);
  for (size_t i = 0; i < n; i++)
    CHECK(strcmp(out[i], "127.0.0.1") == 0 || strcmp(out[i], "::1") == 0);
  for (size_t i = 1; i < n; i++) CHECK(strcmp(out[i], out[0]) != 0);
  /* At most 'max'. */
  CHECK(pc_Net_Resolve("localhost", "80", out, 1, &err) == 1);
  /* A name that does not resolve (.invalid, RFC 6761) fails with its name. */
  pc_Error_Init(&err);
  CHECK(pc_Net_Resolve("no-such-host.invalid", "80", out, 8, &err) == 0);
  CHECK(strstr(err.msg, "resolve no-such-host.invalid: ") == err.msg);
  return CHECK_DONE();
}
