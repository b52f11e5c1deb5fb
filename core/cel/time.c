/* Timestamps and durations: RFC 3339 text both ways, Go's duration syntax
 * ("1h30m", "-1.5s", as cel-go reads it), the civil calendar, fixed time
 * zone offsets. */
#include "cel/cel_internal.h"

#include <stdio.h>
#include <string.h>

/* Days since 1970-01-01 of a date of the proleptic Gregorian calendar
 * (Howard Hinnant's days_from_civil). */
static int64_t days_from_civil(int64_t y, int m, int d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

void cel_civil(int64_t z, int64_t *year, int *month, int *day) {
  z += 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  int64_t doe = z - era * 146097;
  int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  int64_t mp = (5 * doy + 2) / 153;
  *day = (int)(doy - (153 * mp + 2) / 5 + 1);
  *month = (int)(mp < 10 ? mp + 3 : mp - 9);
  *year = yoe + era * 400 + (*month <= 2);
}

static int digits(const char *s, size_t n, size_t at, int count, int *out) {
  if (at + (size_t)count > n) return 0;
  int v = 0;
  for (int i = 0; i < count; i++) {
    char c = s[at + (size_t)i];
    if (c < '0' || c > '9') return 0;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return 1;
}

static int days_in_month(int64_t y, int m) {
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (m == 2 && ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) return 29;
  return kDays[m - 1];
}

/* 1: parsed, 0: not RFC 3339, -1: out of range. */
int cel_parse_timestamp(const char *s, size_t n, int64_t *sec, int32_t *nanos) {
  int y, mo, d, h, mi, se;
  if (!digits(s, n, 0, 4, &y) || n < 19 || s[4] != '-' || !digits(s, n, 5, 2, &mo) || s[7] != '-' ||
      !digits(s, n, 8, 2, &d) || s[10] != 'T' || !digits(s, n, 11, 2, &h) || s[13] != ':' ||
      !digits(s, n, 14, 2, &mi) || s[16] != ':' || !digits(s, n, 17, 2, &se))
    return 0;
  if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || se > 59)
    return 0;
  size_t i = 19;
  int32_t frac = 0;
  if (i < n && s[i] == '.') {
    i++;
    int count = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
      if (count < 9) frac = frac * 10 + (s[i] - '0');
      count++;
      i++;
    }
    if (count == 0 || count > 9) return 0;
    for (; count < 9; count++) frac *= 10;
  }
  int64_t offset = 0;
  if (i < n && s[i] == 'Z') {
    i++;
  } else if (i < n && (s[i] == '+' || s[i] == '-')) {
    int oh, om;
    if (!digits(s, n, i + 1, 2, &oh) || i + 3 >= n || s[i + 3] != ':' ||
        !digits(s, n, i + 4, 2, &om) || oh > 23 || om > 59)
      return 0;
    offset = (int64_t)(oh * 3600 + om * 60) * (s[i] == '-' ? -1 : 1);
    i += 6;
  } else {
    return 0;
  }
  if (i != n) return 0;
  int64_t t =
      days_from_civil(y, mo, d) * 86400 + (int64_t)h * 3600 + (int64_t)mi * 60 + se - offset;
  if (t < CEL_TS_MIN || t > CEL_TS_MAX) return -1;
  *sec = t;
  *nanos = frac;
  return 1;
}

/* The fraction of a second: ".5", ".000000001" (trailing zeros dropped),
 * nothing for 0. */
static size_t fraction(int32_t nanos, char *out) {
  if (nanos == 0) return 0;
  char buf[16];
  snprintf(buf, sizeof buf, ".%09d", (int)nanos);
  size_t n = 10;
  while (buf[n - 1] == '0') n--;
  memcpy(out, buf, n);
  return n;
}

size_t cel_format_timestamp(int64_t sec, int32_t nanos, char *buf) {
  int64_t days = sec >= 0 ? sec / 86400 : -((-sec + 86399) / 86400);
  int64_t rem = sec - days * 86400, y;
  int m, d;
  cel_civil(days, &y, &m, &d);
  size_t n = (size_t)snprintf(buf, 40, "%04d-%02d-%02dT%02d:%02d:%02d", (int)y, m, d,
                              (int)(rem / 3600), (int)(rem / 60 % 60), (int)(rem % 60));
  n += fraction(nanos, buf + n);
  buf[n++] = 'Z';
  buf[n] = '\0';
  return n;
}

size_t cel_format_duration(int64_t sec, int32_t nanos, char *buf) {
  size_t n = 0;
  if (sec < 0 || nanos < 0) {
    buf[n++] = '-';
    sec = -sec;
    nanos = -nanos;
  }
  n += (size_t)snprintf(buf + n, 30, "%lld", (long long)sec);
  n += fraction(nanos, buf + n);
  buf[n++] = 's';
  buf[n] = '\0';
  return n;
}

int cel_duration_ok(int64_t sec, int64_t nanos) {
  if (sec > CEL_DUR_MAX_SEC || sec < -CEL_DUR_MAX_SEC) return 0;
  if (sec == CEL_DUR_MAX_SEC) return nanos <= CEL_DUR_MAX_NANOS;
  if (sec == -CEL_DUR_MAX_SEC) return nanos >= -CEL_DUR_MAX_NANOS - 1;
  return 1;
}

/* floor(f * unit / scale) for f < scale <= 10^18 and unit <= 3.6e12: the
 * nanoseconds a fraction of a unit is worth, exactly. */
static uint64_t fraction_ns(uint64_t f, uint64_t unit, uint64_t scale) {
#ifdef __SIZEOF_INT128__
  return (uint64_t)((unsigned __int128)f * unit / scale);
#else
  return (uint64_t)((long double)f * (long double)unit / (long double)scale);
#endif
}

/* Go's time.ParseDuration syntax: [-+]? then one or more of a decimal
 * number and a unit (ns, us, µs, ms, s, m, h), or "0". 1, 0 (syntax) or
 * -1 (out of range). Fractions count exactly, truncated to the nanosecond. */
int cel_parse_duration(const char *s, size_t n, int64_t *sec, int32_t *nanos) {
  size_t i = 0;
  int neg = 0;
  if (i < n && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
  if (i == n) return 0;
  if (n - i == 1 && s[i] == '0') {
    *sec = 0;
    *nanos = 0;
    return 1;
  }
  uint64_t tsec = 0, tns = 0; /* the total, tns kept below 1e9 */
  while (i < n) {
    uint64_t whole = 0;
    int any = 0, big = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
      if (whole > 100000000000000000ULL)
        big = 1;
      else
        whole = whole * 10 + (uint64_t)(s[i] - '0');
      any = 1;
      i++;
    }
    uint64_t frac = 0, scale = 1;
    if (i < n && s[i] == '.') {
      i++;
      while (i < n && s[i] >= '0' && s[i] <= '9') {
        if (scale < 1000000000000000000ULL) {
          frac = frac * 10 + (uint64_t)(s[i] - '0');
          scale *= 10;
        }
        any = 1;
        i++;
      }
    }
    if (!any) return 0;
    /* the unit in nanoseconds */
    uint64_t unit;
    size_t rest = n - i;
    if (rest >= 2 && memcmp(s + i, "ns", 2) == 0)
      unit = 1, i += 2;
    else if (rest >= 2 && memcmp(s + i, "us", 2) == 0)
      unit = 1000, i += 2;
    else if (rest >= 3 &&
             (memcmp(s + i, "\xC2\xB5s", 3) == 0 || memcmp(s + i, "\xCE\xBCs", 3) == 0))
      unit = 1000, i += 3; /* micro sign, Greek mu */
    else if (rest >= 2 && memcmp(s + i, "ms", 2) == 0)
      unit = 1000000, i += 2;
    else if (rest >= 1 && s[i] == 's')
      unit = 1000000000ULL, i += 1;
    else if (rest >= 1 && s[i] == 'm')
      unit = 60000000000ULL, i += 1;
    else if (rest >= 1 && s[i] == 'h')
      unit = 3600000000000ULL, i += 1;
    else
      return 0;
    if (big) return -1;
    /* whole units: seconds and nanoseconds */
    if (unit >= 1000000000ULL) {
      uint64_t per = unit / 1000000000ULL;
      if (whole > (uint64_t)CEL_DUR_MAX_SEC / per + 1) return -1;
      tsec += whole * per;
    } else {
      uint64_t per = 1000000000ULL / unit;
      tsec += whole / per;
      tns += (whole % per) * unit;
    }
    uint64_t fns = fraction_ns(frac, unit, scale);
    tsec += fns / 1000000000ULL;
    tns += fns % 1000000000ULL;
    tsec += tns / 1000000000ULL;
    tns %= 1000000000ULL;
    if (tsec > (uint64_t)CEL_DUR_MAX_SEC + 1) return -1;
  }
  int64_t s64 = (int64_t)tsec, n64 = (int64_t)tns;
  if (neg) {
    s64 = -s64;
    n64 = -n64;
  }
  if (!cel_duration_ok(s64, n64)) return -1;
  *sec = s64;
  *nanos = (int32_t)n64;
  return 1;
}

int cel_time_zone(const char *s, size_t n, int32_t *offset) {
  if ((n == 3 && memcmp(s, "UTC", 3) == 0) || (n == 1 && s[0] == 'Z')) {
    *offset = 0;
    return 1;
  }
  size_t i = 0;
  int sign = 1;
  if (n > 0 && (s[0] == '+' || s[0] == '-')) {
    sign = s[0] == '-' ? -1 : 1;
    i = 1;
  }
  int h, m;
  if (n - i != 5 || !digits(s, n, i, 2, &h) || s[i + 2] != ':' || !digits(s, n, i + 3, 2, &m) ||
      h > 23 || m > 59)
    return 0;
  *offset = sign * (h * 3600 + m * 60);
  return 1;
}
