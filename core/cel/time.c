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
  if (mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || se > 59) return 0;
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
    if (!digits(s, n, i + 1, 2, &oh) || i + 3 >= n || s[i + 3] != ':' || !digits(s, n, i + 4, 2, &om) ||
        oh > 23 || om > 59)
      return 0;
    offset = (int64_t)(oh * 3600 + om * 60) * (s[i] == '-' ? -1 : 1);
    i += 6;
  } else {
    return 0;
  }
  if (i != n) return 0;
  int64_t t = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se - offset;
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
  size_t n = (size_t)snprintf(buf, 40, "%04d-%02d-%02dT%02d:%02d:%02d", (int)y, m, d, (int)(rem / 3600),
                              (int)(rem / 60 % 60), (int)(rem % 60));
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

/* Go's time.ParseDuration syntax: [-+]? then one or more of a decimal
 * number and a unit (ns, us, µs, ms, s, m, h), or "0". 1, 0 (syntax) or
 * -1 (out of CEL's range). */
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
  int64_t tsec = 0, tns = 0; /* the total, tns kept below 1e9 */
  while (i < n) {
    uint64_t whole = 0;
    int any = 0, big = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
      if (whole > 100000000000000000ULL) big = 1;
      else whole = whole * 10 + (uint64_t)(s[i] - '0');
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
    /* the unit: seconds and nanoseconds it is worth */
    int64_t usec = 0, uns = 0;
    size_t rest = n - i;
    if (rest >= 2 && memcmp(s + i, "ns", 2) == 0) uns = 1, i += 2;
    else if (rest >= 2 && memcmp(s + i, "us", 2) == 0) uns = 1000, i += 2;
    else if (rest >= 3 && memcmp(s + i, "\xC2\xB5s", 3) == 0) uns = 1000, i += 3;
    else if (rest >= 3 && memcmp(s + i, "\xCE\xBCs", 3) == 0) uns = 1000, i += 3;
    else if (rest >= 2 && memcmp(s + i, "ms", 2) == 0) uns = 1000000, i += 2;
    else if (rest >= 1 && s[i] == 's') usec = 1, i += 1;
    else if (rest >= 1 && s[i] == 'm') usec = 60, i += 1;
    else if (rest >= 1 && s[i] == 'h') usec = 3600, i += 1;
    else return 0;
    if (big) return -1;
    if (usec) {
      if (whole > (uint64_t)(CEL_DUR_MAX * 2) / (uint64_t)usec) return -1;
      tsec += (int64_t)whole * usec;
      /* the fraction of a unit of whole seconds, in nanoseconds */
      long double f = (long double)frac / (long double)scale * (long double)usec * 1e9L;
      int64_t fns = (int64_t)f;
      tsec += fns / 1000000000;
      tns += fns % 1000000000;
    } else {
      uint64_t per_sec = (uint64_t)(1000000000 / uns);
      tsec += (int64_t)(whole / per_sec);
      tns += (int64_t)(whole % per_sec) * uns;
      tns += (int64_t)((long double)frac / (long double)scale * (long double)uns);
    }
    tsec += tns / 1000000000;
    tns %= 1000000000;
    if (tsec > CEL_DUR_MAX * 2) return -1;
  }
  if (tsec > CEL_DUR_MAX || (tsec == CEL_DUR_MAX && tns > 0)) return -1;
  *sec = neg ? -tsec : tsec;
  *nanos = (int32_t)(neg ? -tns : tns);
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
