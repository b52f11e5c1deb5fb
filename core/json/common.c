/* What the JSON writer and reader share (json_internal.h). */
#include "json/json_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *pc_JsonStatus_String(pc_JsonStatus s) {
  switch (s) {
  case kPc_JsonStatus_Ok: return "ok";
  case kPc_JsonStatus_Invalid: return "invalid";
  case kPc_JsonStatus_OutOfMemory: return "out of memory";
  }
  return "?";
}

void pc_JsonBuf_Init(pc_JsonBuf *b, pc_Alloc *alloc, void *ud) {
  b->alloc = alloc != NULL ? alloc : pc_DefaultAlloc;
  b->ud = ud;
  b->data = NULL;
  b->size = b->cap = 0;
}

void pc_JsonBuf_Free(pc_JsonBuf *b) {
  if (b->data != NULL) b->alloc(b->ud, b->data, b->cap, 0);
  b->data = NULL;
  b->size = b->cap = 0;
}

static const struct {
  const char *name;
  pc_JsonWkt wkt;
} kWkts[] = {
    {"google.protobuf.Any", kWkt_Any},
    {"google.protobuf.Timestamp", kWkt_Timestamp},
    {"google.protobuf.Duration", kWkt_Duration},
    {"google.protobuf.FieldMask", kWkt_FieldMask},
    {"google.protobuf.Struct", kWkt_Struct},
    {"google.protobuf.Value", kWkt_Value},
    {"google.protobuf.ListValue", kWkt_ListValue},
    {"google.protobuf.DoubleValue", kWkt_Wrapper},
    {"google.protobuf.FloatValue", kWkt_Wrapper},
    {"google.protobuf.Int64Value", kWkt_Wrapper},
    {"google.protobuf.UInt64Value", kWkt_Wrapper},
    {"google.protobuf.Int32Value", kWkt_Wrapper},
    {"google.protobuf.UInt32Value", kWkt_Wrapper},
    {"google.protobuf.BoolValue", kWkt_Wrapper},
    {"google.protobuf.StringValue", kWkt_Wrapper},
    {"google.protobuf.BytesValue", kWkt_Wrapper},
    {"google.protobuf.Empty", kWkt_Empty},
};

pc_JsonWkt pc_Json_WktOf(const pc_MessageDef *m) {
  const char *n = m->full_name;
  if (strncmp(n, "google.protobuf.", 16) != 0) return kWkt_None;
  for (size_t i = 0; i < sizeof kWkts / sizeof kWkts[0]; i++)
    if (strcmp(n, kWkts[i].name) == 0) return kWkts[i].wkt;
  return kWkt_None;
}

int pc_Json_IsNullValue(const pc_EnumDef *e) {
  return e != NULL && strcmp(e->full_name, "google.protobuf.NullValue") == 0;
}

/* -- Paths ---------------------------------------------------------------- */

typedef struct {
  char *p, *end;
} Out;

static void put(Out *o, const char *s, size_t n) {
  size_t room = (size_t)(o->end - o->p);
  if (n > room) n = room;
  memcpy(o->p, s, n);
  o->p += n;
}

static int plain_key(const char *k, size_t n) {
  if (n == 0) return 0;
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)k[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '@' ||
          (i > 0 && c >= '0' && c <= '9')))
      return 0;
  }
  return 1;
}

/* A step's text: [i], .name, or ["key"] for a key that is not a plain name,
 * escaped and cut as pc_Error_Quote does within STEP_ROOM bytes. */
#define STEP_ROOM ((size_t)72)

static size_t step_text(char *buf, const pc_JsonPath *p) {
  if (p->key == NULL) return (size_t)snprintf(buf, STEP_ROOM, "[%zu]", p->index);
  char key[STEP_ROOM - 4];
  pc_Error_Quote(key, sizeof key, p->key, p->keylen, kPc_Quote_Json);
  int plain = plain_key(p->key, p->keylen);
  return (size_t)snprintf(buf, STEP_ROOM, plain ? ".%s" : "[\"%s\"]", key);
}

/* Steps printed at each end of a deep path; the middle becomes "...". */
#define PATH_ENDS ((size_t)8)

/* The path to 'p' as "$.a[2].b" in at most 'budget' (>= 4) bytes: at
 * most PATH_ENDS steps at each end of a deeper path, and when they do not
 * fit the budget, the last steps that fit in half of it (the last one in
 * all of it) and the first that fit the rest, with "..." where steps are
 * left out. */
static void put_path(Out *o, const pc_JsonPath *p, size_t budget) {
  size_t n = 0;
  for (const pc_JsonPath *q = p; q != NULL; q = q->up) n++;
  const pc_JsonPath *shown[2 * PATH_ENDS]; /* from the root down */
  size_t m = n > 2 * PATH_ENDS ? 2 * PATH_ENDS : n, gap = n > 2 * PATH_ENDS ? PATH_ENDS : m;
  size_t i = n;
  for (const pc_JsonPath *q = p; q != NULL; q = q->up) {
    i--; /* q is step i from the root */
    if (i < PATH_ENDS || n <= 2 * PATH_ENDS)
      shown[i] = q;
    else if (i >= n - PATH_ENDS)
      shown[i - (n - 2 * PATH_ENDS)] = q;
  }
  char text[STEP_ROOM];
  size_t len[2 * PATH_ENDS], total = 1 + (gap < m ? 3 : 0);
  for (size_t k = 0; k < m; k++) total += len[k] = step_text(text, shown[k]);
  size_t head = m, tail = m; /* steps [0, head) and [tail, m) are written */
  if (total > budget) {
    size_t used = 4; /* "$" and "..." */
    for (tail = m; tail > 0 && used + len[tail - 1] <= (tail == m ? budget : budget / 2); tail--)
      used += len[tail - 1];
    for (head = 0; head < tail && used + len[head] <= budget; head++) used += len[head];
  } else if (gap < m) {
    head = gap;
    tail = gap;
  }
  put(o, "$", 1);
  for (size_t k = 0; k < head; k++) put(o, text, step_text(text, shown[k]));
  if (head < tail || gap < m) put(o, "...", 3);
  for (size_t k = tail; k < m; k++) put(o, text, step_text(text, shown[k]));
}

void pc_Json_Fail(pc_Error *err, const pc_JsonPath *path, const char *fmt, ...) {
  if (err == NULL || err->set) return;
  char what[PC_ERROR_MAX], buf[PC_ERROR_MAX];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  size_t wlen = n < 0 ? 0 : (size_t)n >= sizeof what ? sizeof what - 1 : (size_t)n;
  size_t budget = sizeof buf - 1 > wlen + 2 + 4 ? sizeof buf - 1 - wlen - 2 : 4; /* 4: "$..." */
  Out o = {buf, buf + budget};
  put_path(&o, path, budget);
  o.end = buf + sizeof buf - 1;
  put(&o, ": ", 2);
  put(&o, what, wlen);
  *o.p = '\0';
  pc_Error_Set(err, "%s", buf);
}

/* -- Base64 --------------------------------------------------------------- */

static const char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void pc_Json_Base64Encode(const uint8_t *in, size_t n, char *out) {
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];
    *out++ = kB64[v >> 18];
    *out++ = kB64[(v >> 12) & 63];
    *out++ = kB64[(v >> 6) & 63];
    *out++ = kB64[v & 63];
  }
  if (n - i == 1) {
    uint32_t v = (uint32_t)in[i] << 16;
    *out++ = kB64[v >> 18];
    *out++ = kB64[(v >> 12) & 63];
    *out++ = '=';
    *out++ = '=';
  } else if (n - i == 2) {
    uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8;
    *out++ = kB64[v >> 18];
    *out++ = kB64[(v >> 12) & 63];
    *out++ = kB64[(v >> 6) & 63];
    *out++ = '=';
  }
}

/* Each base64 character's value (0..63) in bits 0-5 and the alphabets it
 * belongs to in bits 6-7 (1 standard, 2 URL-safe, 3 both); 0: not base64.
 * One load a character (the bodies of bytes fields run through it). */
#define B64(alpha, v) ((alpha) << 6 | (v))
static const unsigned char kB64Dec[256] = {
    ['A'] = B64(3, 0),  ['B'] = B64(3, 1),  ['C'] = B64(3, 2),  ['D'] = B64(3, 3),
    ['E'] = B64(3, 4),  ['F'] = B64(3, 5),  ['G'] = B64(3, 6),  ['H'] = B64(3, 7),
    ['I'] = B64(3, 8),  ['J'] = B64(3, 9),  ['K'] = B64(3, 10), ['L'] = B64(3, 11),
    ['M'] = B64(3, 12), ['N'] = B64(3, 13), ['O'] = B64(3, 14), ['P'] = B64(3, 15),
    ['Q'] = B64(3, 16), ['R'] = B64(3, 17), ['S'] = B64(3, 18), ['T'] = B64(3, 19),
    ['U'] = B64(3, 20), ['V'] = B64(3, 21), ['W'] = B64(3, 22), ['X'] = B64(3, 23),
    ['Y'] = B64(3, 24), ['Z'] = B64(3, 25), ['a'] = B64(3, 26), ['b'] = B64(3, 27),
    ['c'] = B64(3, 28), ['d'] = B64(3, 29), ['e'] = B64(3, 30), ['f'] = B64(3, 31),
    ['g'] = B64(3, 32), ['h'] = B64(3, 33), ['i'] = B64(3, 34), ['j'] = B64(3, 35),
    ['k'] = B64(3, 36), ['l'] = B64(3, 37), ['m'] = B64(3, 38), ['n'] = B64(3, 39),
    ['o'] = B64(3, 40), ['p'] = B64(3, 41), ['q'] = B64(3, 42), ['r'] = B64(3, 43),
    ['s'] = B64(3, 44), ['t'] = B64(3, 45), ['u'] = B64(3, 46), ['v'] = B64(3, 47),
    ['w'] = B64(3, 48), ['x'] = B64(3, 49), ['y'] = B64(3, 50), ['z'] = B64(3, 51),
    ['0'] = B64(3, 52), ['1'] = B64(3, 53), ['2'] = B64(3, 54), ['3'] = B64(3, 55),
    ['4'] = B64(3, 56), ['5'] = B64(3, 57), ['6'] = B64(3, 58), ['7'] = B64(3, 59),
    ['8'] = B64(3, 60), ['9'] = B64(3, 61), ['+'] = B64(1, 62), ['/'] = B64(1, 63),
    ['-'] = B64(2, 62), ['_'] = B64(2, 63),
};
#undef B64

size_t pc_Json_Base64Decode(const char *in, size_t n, uint8_t *out, size_t *bad) {
  size_t len = n;
  /* Padding: up to two '=' at the end, and then the length is a multiple of 4. */
  if (len > 0 && in[len - 1] == '=') {
    len--;
    if (len > 0 && in[len - 1] == '=') len--;
    if (n % 4 != 0) {
      *bad = len;
      return (size_t)-1;
    }
  }
  if (len % 4 == 1) {
    *bad = len - 1;
    return (size_t)-1;
  }
  int seen = 3;
  size_t o = 0;
  uint32_t acc = 0;
  int bits = 0;
  for (size_t i = 0; i < len; i++) {
    unsigned d = kB64Dec[(unsigned char)in[i]];
    int alpha = (int)(d >> 6);
    if ((seen & alpha) == 0) { /* not base64 (alpha 0), or the other alphabet's */
      *bad = i;
      return (size_t)-1;
    }
    seen &= alpha;
    acc = acc << 6 | (d & 63u);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (uint8_t)(acc >> bits);
      acc &= (1u << bits) - 1;
    }
  }
  return o; /* leftover bits are ignored, as most decoders do */
}

/* -- FieldMask names ------------------------------------------------------ */

size_t pc_Json_SnakeToCamel(const char *in, size_t n, char *out) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char c = in[i];
    if (c >= 'A' && c <= 'Z') return (size_t)-1;
    if (c == '_') {
      if (i + 1 >= n || in[i + 1] < 'a' || in[i + 1] > 'z') return (size_t)-1;
      out[o++] = (char)(in[++i] - 'a' + 'A');
    } else {
      out[o++] = c;
    }
  }
  return o;
}

size_t pc_Json_CamelToSnake(const char *in, size_t n, char *out) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    char c = in[i];
    if (c == '_') return (size_t)-1;
    if (c >= 'A' && c <= 'Z') {
      out[o++] = '_';
      out[o++] = (char)(c - 'A' + 'a');
    } else {
      out[o++] = c;
    }
  }
  return o;
}

/* -- Dates (H. Hinnant's days_from_civil / civil_from_days) --------------- */

int64_t pc_Json_DaysFromCivil(int64_t y, unsigned m, unsigned d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  unsigned yoe = (unsigned)(y - era * 400);
  unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
  unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + (int64_t)doe - 719468;
}

void pc_Json_CivilFromDays(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
  z += 719468;
  int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  unsigned doe = (unsigned)(z - era * 146097);
  unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  int64_t yy = (int64_t)yoe + era * 400;
  unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  unsigned mp = (5 * doy + 2) / 153;
  *d = doy - (153 * mp + 2) / 5 + 1;
  *m = mp < 10 ? mp + 3 : mp - 9;
  *y = yy + (*m <= 2);
}
