/* The retry token bucket (throttle.h). */
#include "call/throttle.h"

#include <math.h>

int pc_Throttle_Init(pc_Throttle *t, double max_tokens, double token_ratio, pc_Error *e) {
  if (!(max_tokens > 0 && max_tokens <= 1000)) {
    pc_Error_Set(e, "maxTokens: number in (0, 1000] expected");
    return 0;
  }
  /* a bit above the thousandth so that 0.57 (0.569999... as a double) stays
   * 570; the conversion drops the rest */
  if (!(token_ratio * 1000 + 1e-6 >= 1) || !isfinite(token_ratio)) {
    pc_Error_Set(e, "tokenRatio: number of at least 0.001 expected");
    return 0;
  }
  /* more than any bucket holds refills it at once */
  double ratio = token_ratio > 1e9 ? 1e12 : token_ratio * 1000 + 1e-6;
  t->max_milli_tokens = (int64_t)(max_tokens * 1000 + 1e-6);
  t->milli_tokens = t->max_milli_tokens;
  t->milli_ratio = (int64_t)ratio;
  return 1;
}

void pc_Throttle_Success(pc_Throttle *t) {
  int64_t n = t->milli_tokens + t->milli_ratio;
  t->milli_tokens = n > t->max_milli_tokens ? t->max_milli_tokens : n;
}

int pc_Throttle_Allows(const pc_Throttle *t) {
  return t->milli_tokens * 2 > t->max_milli_tokens;
}

int pc_Throttle_Failure(pc_Throttle *t) {
  t->milli_tokens = t->milli_tokens >= 1000 ? t->milli_tokens - 1000 : 0;
  return pc_Throttle_Allows(t);
}
