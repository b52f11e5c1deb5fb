/* Retry throttling: the token bucket of gRPC's retry design (gRFC A6,
 * "Throttling Retry Attempts and Hedged RPCs").
 *
 * One bucket per client target, shared by all its calls and methods. It
 * starts full (max_tokens). An attempt failing with a retryable code takes
 * one token (never below 0); a successful call gives back token_ratio
 * (never above max_tokens). While the tokens are at or below max_tokens / 2
 * no retry is made. Tokens are counted in thousandths, as gRPC does, so the
 * arithmetic is exact and a token_ratio keeps at most 3 decimal places (the
 * rest is dropped). No allocation. */
#ifndef PC_THROTTLE_H
#define PC_THROTTLE_H

#include "base/error.h"

#include <stdint.h>

typedef struct {
  int64_t milli_tokens;     /* tokens now, in thousandths */
  int64_t max_milli_tokens; /* max_tokens * 1000 */
  int64_t milli_ratio;      /* token_ratio * 1000, decimals past 3 dropped */
} pc_Throttle;

/* Sets up a full bucket. 'max_tokens' must be in (0, 1000] and
 * 'token_ratio' > 0 with at least 0.001 (gRFC A6 "Validation of
 * retryThrottling"). Returns 1, or 0 with "maxTokens: number in (0, 1000]
 * expected" in 'e' (the gRPC JSON field names). */
int pc_Throttle_Init(pc_Throttle *t, double max_tokens, double token_ratio, pc_Error *e);

/* A call succeeded: adds token_ratio, up to max_tokens. */
void pc_Throttle_Success(pc_Throttle *t);

/* An attempt failed with a retryable code: takes one token (not below 0).
 * Returns whether a retry may follow (tokens > max_tokens / 2 after it). */
int pc_Throttle_Failure(pc_Throttle *t);

/* Whether retries are allowed now (tokens > max_tokens / 2). */
int pc_Throttle_Allows(const pc_Throttle *t);

#endif
