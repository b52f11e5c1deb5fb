#include "base/number.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

size_t pc_Number_Shortest(double d, char out[32]) {
  const char *special = NULL;
  if (isnan(d))
    special = "nan";
  else if (isinf(d))
    special = d > 0 ? "inf" : "-inf";
  else if (d == 0)
    special = signbit(d) ? "-0" : "0";
  if (special != NULL) {
    size_t n = strlen(special);
    memcpy(out, special, n + 1);
    return n;
  }
  int n = 0;
  for (int prec = fabs(d) < DBL_MIN ? 1 : DBL_DIG; prec <= DBL_DIG + 2; prec++) {
    n = snprintf(out, 32, "%.*g", prec, d);
    if (strtod(out, NULL) == d) break;
  }
  return (size_t)n;
}
