/* The retry token bucket: starts full, failures take one token, successes
 * give back the ratio, retries stop at or below half, thousandths exact. */
#include "testing/check.h"
#include "call/throttle.h"

#include <math.h>
#include <string.h>

static void test_bucket(void) {
  pc_Throttle t;
  pc_Error e;
  pc_Error_Init(&e);
  CHECK(pc_Throttle_Init(&t, 10, 0.1, &e));
  CHECK(t.milli_tokens == 10000 && t.milli_ratio == 100);
  CHECK(pc_Throttle_Allows(&t));
  /* 9, 8, 7, 6 allow a retry; 5 is not above half */
  for (int i = 0; i < 4; i++) CHECK(pc_Throttle_Failure(&t));
  CHECK(!pc_Throttle_Failure(&t));
  CHECK(t.milli_tokens == 5000);
  for (int i = 0; i < 10; i++) (void)pc_Throttle_Failure(&t);
  CHECK(t.milli_tokens == 0); /* never below 0 */
  for (int i = 0; i < 50; i++) pc_Throttle_Success(&t);
  CHECK(t.milli_tokens == 5000 && !pc_Throttle_Allows(&t));
  pc_Throttle_Success(&t);
  CHECK(pc_Throttle_Allows(&t));
  for (int i = 0; i < 1000; i++) pc_Throttle_Success(&t);
  CHECK(t.milli_tokens == 10000); /* never above max */
  /* three decimals kept, the rest dropped; 0.57 is not 569 */
  CHECK(pc_Throttle_Init(&t, 3, 0.57, &e) && t.milli_ratio == 570);
  CHECK(pc_Throttle_Init(&t, 3, 0.1239, &e) && t.milli_ratio == 123);
  CHECK(pc_Throttle_Init(&t, 0.5, 1, &e) && t.max_milli_tokens == 500);
}

static void test_invalid(void) {
  pc_Throttle t;
  pc_Error e;
  const double bad_max[] = {0, -1, 1000.5, NAN, INFINITY};
  for (size_t i = 0; i < sizeof bad_max / sizeof bad_max[0]; i++) {
    pc_Error_Init(&e);
    CHECK(!pc_Throttle_Init(&t, bad_max[i], 0.1, &e));
    CHECK(strstr(e.msg, "maxTokens") != NULL);
  }
  const double bad_ratio[] = {0, -0.5, 0.0004, NAN, INFINITY};
  for (size_t i = 0; i < sizeof bad_ratio / sizeof bad_ratio[0]; i++) {
    pc_Error_Init(&e);
    CHECK(!pc_Throttle_Init(&t, 10, bad_ratio[i], &e));
    CHECK(strstr(e.msg, "tokenRatio") != NULL);
  }
}

int main(void) {
  test_bucket();
  test_invalid();
  return CHECK_DONE();
}
