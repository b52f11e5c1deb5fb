#include "wire/wire.h"

/* ORDER WIRESTATUS */
static const char *const status_text[] = {
    "ok",
    "truncated input",
    "varint longer than 10 bytes",
    "tag wider than 32 bits",
    "field number 0",
    "field number above 536870911",
    "invalid wire type",
    "length runs past the end of the input",
    "end-group without a start-group",
    "end-group does not match its start-group",
    "nesting too deep",
    "invalid UTF-8 in a string field",
    "tag longer than 5 bytes",
};

const char *pc_WireStatus_String(pc_WireStatus s) {
  if ((unsigned)s >= sizeof status_text / sizeof status_text[0]) return "unknown wire status";
  return status_text[s];
}

const uint8_t *pc_Wire_ReadVarintSlow(const uint8_t *p, const uint8_t *end, uint64_t *v,
                                      pc_WireStatus *st) {
  uint64_t r = 0;
  for (int i = 0; i < PC_WIRE_MAX_VARINT; i++) {
    if (p >= end) {
      *st = kPc_WireStatus_Truncated;
      return NULL;
    }
    uint8_t b = *p++;
    r |= (uint64_t)(b & 0x7f) << (7 * i);
    if (b < 0x80) {
      *v = r;
      return p;
    }
  }
  *st = kPc_WireStatus_VarintTooLong;
  return NULL;
}

const uint8_t *pc_Wire_ReadTag(const uint8_t *p, const uint8_t *end, uint32_t *field,
                               pc_WireType *wt, pc_WireStatus *st) {
  uint64_t v = 0;
  *field = 0;
  for (int i = 0;; i++) { /* a 32-bit varint takes at most 5 bytes */
    if (i == PC_WIRE_MAX_TAG) {
      *st = kPc_WireStatus_TagTooLong;
      return NULL;
    }
    if (p >= end) {
      *st = kPc_WireStatus_Truncated;
      return NULL;
    }
    uint8_t b = *p++;
    v |= (uint64_t)(b & 0x7f) << (7 * i);
    if (b < 0x80) break;
  }
  if (v > UINT32_MAX) {
    *st = kPc_WireStatus_TagTooWide;
    return NULL;
  }
  *field = (uint32_t)(v >> 3);
  *wt = (pc_WireType)(v & 7);
  if (*field == 0) {
    *st = kPc_WireStatus_FieldZero;
    return NULL;
  }
  if (*wt > kPc_Wire_Fixed32) {
    *st = kPc_WireStatus_BadWireType;
    return NULL;
  }
  return p;
}

/* Iterative over nested groups: each open group's number sits in 'open'
 * (bounded by the depth limit and by PC_WIRE_SKIP_MAX_GROUPS, so no
 * recursion and no allocation). */
const uint8_t *pc_Wire_SkipField(const uint8_t *p, const uint8_t *end, uint32_t field,
                                 pc_WireType wt, int depth_left, pc_WireStatus *st,
                                 const uint8_t **at) {
  uint32_t open[PC_WIRE_SKIP_MAX_GROUPS];
  int max = depth_left < (int)(sizeof open / sizeof open[0]) ? depth_left
                                                             : (int)(sizeof open / sizeof open[0]);
  int n = 0;
  const uint8_t *tagpos = p; /* the end-group errors point at the tag */
  for (;;) {
    *at = p;
    switch (wt) {
    case kPc_Wire_Varint: {
      uint64_t v;
      p = pc_Wire_ReadVarint(p, end, &v, st);
      if (p == NULL) return NULL;
      break;
    }
    case kPc_Wire_Fixed64:
      if (end - p < 8) {
        *st = kPc_WireStatus_Truncated;
        return NULL;
      }
      p += 8;
      break;
    case kPc_Wire_Fixed32:
      if (end - p < 4) {
        *st = kPc_WireStatus_Truncated;
        return NULL;
      }
      p += 4;
      break;
    case kPc_Wire_Len: {
      size_t len;
      p = pc_Wire_ReadLength(p, end, &len, st);
      if (p == NULL) return NULL;
      p += len;
      break;
    }
    case kPc_Wire_StartGroup:
      if (n >= max) {
        *st = kPc_WireStatus_TooDeep;
        return NULL;
      }
      open[n++] = field;
      break;
    case kPc_Wire_EndGroup:
      *at = tagpos;
      if (n == 0) {
        *st = kPc_WireStatus_UnmatchedEndGroup;
        return NULL;
      }
      if (open[n - 1] != field) {
        *st = kPc_WireStatus_GroupMismatch;
        return NULL;
      }
      n--;
      break;
    default: *st = kPc_WireStatus_BadWireType; return NULL;
    }
    if (n == 0) return p;
    *at = p;
    if (p >= end) {
      *st = kPc_WireStatus_Truncated;
      return NULL;
    }
    tagpos = p;
    p = pc_Wire_ReadTag(p, end, &field, &wt, st);
    if (p == NULL) return NULL;
  }
}

#define HIGH_BITS UINT64_C(0x8080808080808080) /* each byte's high bit */

/* The first byte from 's' (the start of a character) to 'end' that does
 * not begin a well-formed character, or NULL when they are UTF-8; read a
 * character at a time, the ASCII runs between eight bytes at a time. */
static const uint8_t *bad_utf8_from(const uint8_t *s, const uint8_t *end) {
  while (s < end) {
    uint8_t c = *s;
    if (c < 0x80) {
      uint64_t w;
      if (end - s >= 8) {
        memcpy(&w, s, 8);
        if (!(w & HIGH_BITS)) {
          s += 8;
          continue;
        }
      }
      s++;
      continue;
    }
    size_t n;
    uint8_t lo = 0x80, hi = 0xbf; /* range of the second byte */
    if (c >= 0xc2 && c <= 0xdf) {
      n = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 3;
      if (c == 0xe0)
        lo = 0xa0; /* overlong */
      else if (c == 0xed)
        hi = 0x9f; /* surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 4;
      if (c == 0xf0)
        lo = 0x90; /* overlong */
      else if (c == 0xf4)
        hi = 0x8f; /* above U+10FFFF */
    } else {
      return s; /* continuation byte, 0xc0/0xc1 overlong, or 0xf5.. */
    }
    if ((size_t)(end - s) < n) return s;
    if (s[1] < lo || s[1] > hi) return s;
    for (size_t i = 2; i < n; i++)
      if ((s[i] & 0xc0) != 0x80) return s;
    s += n;
  }
  return NULL;
}

/* ASCII, nearly every string, is found by testing the high bits of whole
 * words (memcpy: the bytes need not be aligned): a string of 8 or more
 * bytes eight at a time, its last word the eight that end it (overlapping
 * the one before); a shorter one as two overlapping halves. From the first
 * word with a high bit set, bad_utf8_from reads the rest exactly. */
int pc_Wire_ValidUtf8(const uint8_t *s, size_t len) {
  if (len < 8) {
    if (len >= 4) {
      uint32_t a, b;
      memcpy(&a, s, 4);
      memcpy(&b, s + len - 4, 4);
      if (!((a | b) & UINT32_C(0x80808080))) return 1;
    } else if (len == 0 || !((s[0] | s[len / 2] | s[len - 1]) & 0x80)) {
      return 1; /* 's' may be NULL when 'len' is 0 (an empty string slot) */
    }
    return bad_utf8_from(s, s + len) == NULL;
  }
  const uint8_t *end = s + len, *last = end - 8;
  uint64_t w;
  for (; s < last; s += 8) {
    memcpy(&w, s, 8);
    if (w & HIGH_BITS) return bad_utf8_from(s, end) == NULL;
  }
  memcpy(&w, last, 8); /* 's' is within the last eight: the bytes before are ASCII */
  return !(w & HIGH_BITS) || bad_utf8_from(s, end) == NULL;
}

size_t pc_Wire_InvalidUtf8At(const uint8_t *s, size_t len) {
  const uint8_t *bad = len > 0 ? bad_utf8_from(s, s + len) : NULL;
  return bad != NULL ? (size_t)(bad - s) : len;
}

void pc_WireWriter_Init(pc_WireWriter *w, pc_Alloc *alloc, void *ud) {
  w->alloc = alloc != NULL ? alloc : pc_DefaultAlloc;
  w->ud = ud;
  w->buf = w->ptr = NULL;
  w->cap = 0;
}

void pc_WireWriter_Free(pc_WireWriter *w) {
  if (w->buf != NULL) w->alloc(w->ud, w->buf, w->cap, 0);
  w->buf = w->ptr = NULL;
  w->cap = 0;
}

int pc_WireWriter_GrowFor(pc_WireWriter *w, size_t n) {
  size_t used = pc_WireWriter_Size(w);
  if (n > SIZE_MAX / 2 - used) return 0;
  size_t cap = w->cap < 128 ? 128 : w->cap;
  while (cap - used < n) cap *= 2;
  uint8_t *nb = w->alloc(w->ud, NULL, 0, cap);
  if (nb == NULL) return 0;
  if (used > 0) memcpy(nb + cap - used, w->ptr, used);
  if (w->buf != NULL) w->alloc(w->ud, w->buf, w->cap, 0);
  w->buf = nb;
  w->cap = cap;
  w->ptr = nb + cap - used;
  return 1;
}

int pc_ByteBuf_Put(pc_ByteBuf *b, pc_Arena *a, const void *data, size_t len) {
  if (len > b->cap - b->n) {
    if (len > SIZE_MAX / 2 - b->n) return 0;
    size_t nc = b->cap ? b->cap * 2 : 64;
    while (nc < b->n + len) nc *= 2;
    uint8_t *n = pc_Arena_Malloc(a, nc);
    if (n == NULL) return 0;
    if (b->n) memcpy(n, b->p, b->n);
    b->p = n;
    b->cap = nc;
  }
  if (len) memcpy(b->p + b->n, data, len);
  b->n += len;
  return 1;
}

int pc_ByteBuf_PutVarint(pc_ByteBuf *b, pc_Arena *a, uint64_t v) {
  uint8_t tmp[PC_WIRE_MAX_VARINT];
  size_t n = 0;
  while (v >= 0x80) {
    tmp[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  tmp[n++] = (uint8_t)v;
  return pc_ByteBuf_Put(b, a, tmp, n);
}

int pc_ByteBuf_PutFixed(pc_ByteBuf *b, pc_Arena *a, uint64_t v, int bytes) {
  uint8_t le[8];
  for (int i = 0; i < bytes && i < 8; i++) le[i] = (uint8_t)(v >> (8 * i));
  return pc_ByteBuf_Put(b, a, le, (size_t)(bytes < 8 ? bytes : 8));
}
