#define _POSIX_C_SOURCE 200809L
#include "base/clock.h"

#include <errno.h>
#include <time.h>

double pc_Clock_Monotonic(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int pc_Clock_Sleep(double seconds) {
  if (!(seconds > 0)) return 0;
  /* Clamped to what a 32-bit time_t holds (68 years). */
  if (seconds > 2147483647.0) seconds = 2147483647.0;
  struct timespec req, rem;
  req.tv_sec = (time_t)seconds;
  req.tv_nsec = (long)((seconds - (double)req.tv_sec) * 1e9);
  if (req.tv_nsec > 999999999L) req.tv_nsec = 999999999L;
  while (nanosleep(&req, &rem) != 0) {
    if (errno != EINTR) return -1;
    req = rem;
  }
  return 0;
}
