/* pc_Number_Shortest writes the fewest digits that read back, for normal,
 * subnormal and special values, and every text it writes reads back. */
#include "testing/check.h"
#include "base/number.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int shows(double d, const char *want) {
  char out[32];
  size_t n = pc_Number_Shortest(d, out);
  return n == strlen(want) && strcmp(out, want) == 0;
}

int main(void) {
  CHECK(shows(0.1, "0.1"));
  CHECK(shows(1.5, "1.5"));
  CHECK(shows(30.000000000000004, "30.000000000000004"));
  CHECK(shows(0.1 + 0.2, "0.30000000000000004"));
  CHECK(shows(9223372036854775808.0, "9.223372036854776e+18"));
  CHECK(shows(1e300, "1e+300"));
  CHECK(shows(-2.5, "-2.5"));
  CHECK(shows(5e-324, "5e-324")); /* the least subnormal: one digit, not %.15g's 15 */
  CHECK(shows(DBL_MAX, "1.7976931348623157e+308"));
  CHECK(shows(DBL_MIN, "2.2250738585072014e-308"));
  CHECK(shows(0.0, "0"));
  CHECK(shows(-0.0, "-0"));
  CHECK(shows(NAN, "nan"));
  CHECK(shows(INFINITY, "inf"));
  CHECK(shows(-INFINITY, "-inf"));
  /* every text read back, over a spread of magnitudes and bit patterns */
  unsigned long long bits = 0x9E3779B97F4A7C15ULL;
  int all = 1;
  for (int i = 0; i < 20000; i++) {
    bits ^= bits << 13;
    bits ^= bits >> 7;
    bits ^= bits << 17;
    double d;
    memcpy(&d, &bits, sizeof d);
    if (isnan(d) || isinf(d)) continue;
    char out[32];
    size_t n = pc_Number_Shortest(d, out);
    if (n == 0 || n >= 32 || strtod(out, NULL) != d) all = 0;
  }
  CHECK(all);
  return CHECK_DONE();
}
