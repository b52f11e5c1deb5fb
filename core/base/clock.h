/* Time for call policies: a monotonic clock and a sleep, in seconds.
 *
 * Call deadlines must not move when the wall clock is set, so the clock is
 * clock_gettime(CLOCK_MONOTONIC) (not time() nor clock(), which counts CPU
 * time). Hosts and tests inject their own clock and sleep per callable
 * (README "Calls"); these are only the defaults. */
#ifndef PC_CLOCK_H
#define PC_CLOCK_H

/* Seconds since an unspecified start, never decreasing, with the
 * resolution of CLOCK_MONOTONIC (nanoseconds on Linux). */
double pc_Clock_Monotonic(void);

/* Sleeps 'seconds' (fractions allowed) with nanosleep, resuming after a
 * signal until the whole time has passed. Zero, negative and NaN return at
 * once. Returns 0, or -1 when nanosleep fails for another reason than EINTR
 * (errno tells). */
int pc_Clock_Sleep(double seconds);

#endif
