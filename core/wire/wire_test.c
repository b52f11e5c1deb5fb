/* Wire primitives: varints at every length and past it, tags at every
 * boundary, ZigZag, fixed values, skipping every wire type and nested
 * groups, UTF-8 by the spec, the writer under failing allocation. */
#include "testing/check.h"
#include "testing/failalloc.h"
#include "wire/decode.h"
#include "wire/wire.h"

#include <stdlib.h>
#include <string.h>

#define B(...) ((const uint8_t[]){__VA_ARGS__}), sizeof((const uint8_t[]){__VA_ARGS__})

static const uint8_t *varint(const uint8_t *s, size_t n, uint64_t *v, pc_WireStatus *st) {
  return pc_Wire_ReadVarint(s, s + n, v, st);
}

static void test_varint(void) {
  uint64_t v = 99;
  pc_WireStatus st = kPc_WireStatus_Ok;
  const uint8_t *in;
  size_t n;
  /* 0 and 1-byte values */
  for (unsigned i = 0; i < 128; i++) {
    uint8_t b = (uint8_t)i;
    CHECK(varint(&b, 1, &v, &st) == &b + 1 && v == i);
  }
  CHECK(varint(B(0x96, 0x01), &v, &st) != NULL && v == 150);
  /* 10 bytes: all ones */
  CHECK(varint(B(0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), &v, &st) != NULL &&
        v == UINT64_MAX);
  /* 10 bytes, zero value (non-minimal) */
  CHECK(varint(B(0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00), &v, &st) != NULL &&
        v == 0);
  /* 11 bytes: error */
  st = kPc_WireStatus_Ok;
  CHECK(varint(B(0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00), &v, &st) ==
        NULL);
  CHECK(st == kPc_WireStatus_VarintTooLong);
  /* truncated at every length */
  uint8_t cont[10];
  memset(cont, 0x80, sizeof cont);
  for (size_t k = 0; k < 10; k++) {
    st = kPc_WireStatus_Ok;
    CHECK(varint(cont, k, &v, &st) == NULL && st == kPc_WireStatus_Truncated);
  }
  /* every power of two round-trips through the writer with the right size */
  for (int bit = 0; bit < 64; bit++) {
    uint64_t x = (uint64_t)1 << bit;
    uint64_t xs[3] = {x, x - 1, x | (x >> 1)};
    for (int k = 0; k < 3; k++) {
      pc_WireWriter w;
      pc_WireWriter_Init(&w, NULL, NULL);
      CHECK(pc_WireWriter_PutVarint(&w, xs[k]));
      n = pc_WireWriter_Size(&w);
      CHECK(n == pc_Wire_VarintSize(xs[k]));
      in = pc_WireWriter_Data(&w);
      CHECK(varint(in, n, &v, &st) == in + n && v == xs[k]);
      pc_WireWriter_Free(&w);
    }
  }
  CHECK(pc_Wire_VarintSize(0) == 1 && pc_Wire_VarintSize(127) == 1 && pc_Wire_VarintSize(128) == 2);
  CHECK(pc_Wire_VarintSize(UINT64_MAX) == 10);
  /* negative int32 as a 10-byte varint: the int64 sign extension */
  CHECK(pc_Wire_VarintSize((uint64_t)(int64_t)-1) == 10);
}

static void test_zigzag(void) {
  CHECK(pc_Wire_ZigZagEncode32(0) == 0 && pc_Wire_ZigZagEncode32(-1) == 1);
  CHECK(pc_Wire_ZigZagEncode32(1) == 2 && pc_Wire_ZigZagEncode32(-2) == 3);
  CHECK(pc_Wire_ZigZagEncode32(INT32_MAX) == 0xfffffffe);
  CHECK(pc_Wire_ZigZagEncode32(INT32_MIN) == 0xffffffff);
  CHECK(pc_Wire_ZigZagEncode64(INT64_MIN) == UINT64_MAX);
  CHECK(pc_Wire_ZigZagEncode64(INT64_MAX) == UINT64_MAX - 1);
  int32_t v32[] = {0, 1, -1, 2, -2, 1000, -1000, INT32_MAX, INT32_MIN};
  for (size_t i = 0; i < sizeof v32 / sizeof v32[0]; i++)
    CHECK(pc_Wire_ZigZagDecode32(pc_Wire_ZigZagEncode32(v32[i])) == v32[i]);
  int64_t v64[] = {0, 1, -1, INT64_MAX, INT64_MIN, (int64_t)1 << 40, -((int64_t)1 << 40)};
  for (size_t i = 0; i < sizeof v64 / sizeof v64[0]; i++)
    CHECK(pc_Wire_ZigZagDecode64(pc_Wire_ZigZagEncode64(v64[i])) == v64[i]);
}

static void test_fixed(void) {
  const uint8_t b[] = {0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08};
  CHECK(pc_Wire_LoadFixed32(b) == 0x04030201u);
  CHECK(pc_Wire_LoadFixed64(b) == UINT64_C(0x0807060504030201));
  pc_WireWriter w;
  pc_WireWriter_Init(&w, NULL, NULL);
  CHECK(pc_WireWriter_PutFixed64(&w, UINT64_C(0x0807060504030201)));
  CHECK(pc_WireWriter_PutFixed32(&w, 0x04030201u));
  CHECK(pc_WireWriter_Size(&w) == 12);
  CHECK(memcmp(pc_WireWriter_Data(&w), b, 4) == 0);
  CHECK(memcmp(pc_WireWriter_Data(&w) + 4, b, 8) == 0);
  pc_WireWriter_Free(&w);
}

static pc_WireStatus tag(const uint8_t *s, size_t n, uint32_t *field, pc_WireType *wt) {
  pc_WireStatus st = kPc_WireStatus_Ok;
  const uint8_t *p = pc_Wire_ReadTag(s, s + n, field, wt, &st);
  if (p != NULL) CHECK(p == s + n);
  return p != NULL ? kPc_WireStatus_Ok : st;
}

static void test_tags(void) {
  uint32_t f;
  pc_WireType wt;
  CHECK(tag(B(0x08), &f, &wt) == kPc_WireStatus_Ok && f == 1 && wt == kPc_Wire_Varint);
  CHECK(tag(B(0x0d), &f, &wt) == kPc_WireStatus_Ok && f == 1 && wt == kPc_Wire_Fixed32);
  CHECK(tag(B(0x00), &f, &wt) == kPc_WireStatus_FieldZero);
  CHECK(tag(B(0x05), &f, &wt) == kPc_WireStatus_FieldZero);
  CHECK(tag(B(0x0e), &f, &wt) == kPc_WireStatus_BadWireType);
  CHECK(tag(B(0x0f), &f, &wt) == kPc_WireStatus_BadWireType);
  /* the largest field number */
  CHECK(tag(B(0xf8, 0xff, 0xff, 0xff, 0x0f), &f, &wt) == kPc_WireStatus_Ok &&
        f == PC_WIRE_MAX_FIELD && wt == kPc_Wire_Varint);
  /* one more: the tag no longer fits 32 bits */
  CHECK(tag(B(0xf8, 0xff, 0xff, 0xff, 0x1f), &f, &wt) == kPc_WireStatus_TagTooWide);
  /* field 1 with bit 34 set: Debian's 3.21 accepts it as field 1, the spec does not */
  CHECK(tag(B(0x88, 0x80, 0x80, 0x80, 0x40), &f, &wt) == kPc_WireStatus_TagTooWide);
  /* non-minimal but within 32 bits: accepted (as upb) */
  CHECK(tag(B(0x88, 0x80, 0x80, 0x80, 0x00), &f, &wt) == kPc_WireStatus_Ok && f == 1);
  /* six bytes and more: protoc and python3-protobuf refuse them */
  CHECK(tag(B(0x88, 0x80, 0x80, 0x80, 0x80, 0x00), &f, &wt) == kPc_WireStatus_TagTooLong);
  CHECK(tag(B(0x88, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00), &f, &wt) ==
        kPc_WireStatus_TagTooLong);
  CHECK(tag(B(0x88, 0x80, 0x80, 0x80, 0x80), &f, &wt) == kPc_WireStatus_TagTooLong);
  CHECK(strcmp(pc_WireStatus_String(kPc_WireStatus_TagTooLong), "tag longer than 5 bytes") == 0);
  CHECK(tag(B(0x88), &f, &wt) == kPc_WireStatus_Truncated);
  CHECK(tag(B(0x88, 0x80, 0x80, 0x80), &f, &wt) == kPc_WireStatus_Truncated);
  CHECK(tag((const uint8_t *)"", 0, &f, &wt) == kPc_WireStatus_Truncated);
}

static size_t skip_at; /* offset of the last skip error */

static pc_WireStatus skip(const uint8_t *s, size_t n, int depth, size_t *used) {
  uint32_t f;
  pc_WireType wt;
  pc_WireStatus st = kPc_WireStatus_Ok;
  const uint8_t *at = NULL;
  skip_at = 0;
  const uint8_t *p = pc_Wire_ReadTag(s, s + n, &f, &wt, &st);
  if (p == NULL) return st;
  p = pc_Wire_SkipField(p, s + n, f, wt, depth, &st, &at);
  if (p == NULL) {
    CHECK(at >= s && at <= s + n);
    skip_at = (size_t)(at - s);
    return st;
  }
  *used = (size_t)(p - s);
  return kPc_WireStatus_Ok;
}

static void test_skip(void) {
  size_t used = 0;
  const int d = PC_WIRE_DEFAULT_DEPTH;
  CHECK(skip(B(0x08, 0x96, 0x01, 0xff), d, &used) == kPc_WireStatus_Ok && used == 3);
  CHECK(skip(B(0x09, 1, 2, 3, 4, 5, 6, 7, 8, 0xff), d, &used) == kPc_WireStatus_Ok && used == 9);
  CHECK(skip(B(0x09, 1, 2, 3, 4, 5, 6, 7), d, &used) == kPc_WireStatus_Truncated);
  CHECK(skip(B(0x0d, 1, 2, 3, 4), d, &used) == kPc_WireStatus_Ok && used == 5);
  CHECK(skip(B(0x0d, 1, 2, 3), d, &used) == kPc_WireStatus_Truncated);
  CHECK(skip(B(0x0a, 0x02, 'h', 'i'), d, &used) == kPc_WireStatus_Ok && used == 4);
  CHECK(skip(B(0x0a, 0x00), d, &used) == kPc_WireStatus_Ok && used == 2);
  CHECK(skip(B(0x0a, 0x03, 'h', 'i'), d, &used) == kPc_WireStatus_LengthPastEnd);
  CHECK(skip(B(0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f), d, &used) == kPc_WireStatus_LengthPastEnd);
  CHECK(skip(B(0x0a), d, &used) == kPc_WireStatus_Truncated);
  CHECK(skip(B(0x08, 0x80), d, &used) == kPc_WireStatus_Truncated);
  /* groups */
  CHECK(skip(B(0x1b, 0x08, 0x01, 0x1c, 0xff), d, &used) == kPc_WireStatus_Ok && used == 4);
  CHECK(skip(B(0x1b, 0x1c), d, &used) == kPc_WireStatus_Ok && used == 2);
  CHECK(skip(B(0x1b, 0x0b, 0x0c, 0x1c), d, &used) == kPc_WireStatus_Ok && used == 4);
  CHECK(skip(B(0x1b, 0x08, 0x01), d, &used) == kPc_WireStatus_Truncated && skip_at == 3);
  CHECK(skip(B(0x1b, 0x08, 0x01, 0x0a, 0x05), d, &used) == kPc_WireStatus_LengthPastEnd &&
        skip_at == 4);
  CHECK(skip(B(0x1b), d, &used) == kPc_WireStatus_Truncated);
  CHECK(skip(B(0x1b, 0x24), d, &used) == kPc_WireStatus_GroupMismatch && skip_at == 1);
  CHECK(skip(B(0x1b, 0x08, 0x01, 0x24), d, &used) == kPc_WireStatus_GroupMismatch && skip_at == 3);
  CHECK(skip(B(0x1c), d, &used) == kPc_WireStatus_UnmatchedEndGroup);
  CHECK(skip(B(0x1b, 0x0e), d, &used) == kPc_WireStatus_BadWireType);
  CHECK(skip(B(0x1b, 0x00), d, &used) == kPc_WireStatus_FieldZero);
  CHECK(skip(B(0x1b, 0x1c), 0, &used) == kPc_WireStatus_TooDeep);
  /* depth: n nested groups need n levels */
  for (int n = 1; n <= 120; n++) {
    uint8_t *buf = malloc((size_t)n * 2);
    memset(buf, 0x0b, (size_t)n);
    memset(buf + n, 0x0c, (size_t)n);
    CHECK(skip(buf, (size_t)n * 2, n, &used) == kPc_WireStatus_Ok && used == (size_t)n * 2);
    CHECK(skip(buf, (size_t)n * 2, n - 1, &used) == kPc_WireStatus_TooDeep);
    free(buf);
  }
  /* 200,000 start-groups: an error, no crash, no recursion */
  uint8_t *many = malloc(200000);
  memset(many, 0x0b, 200000);
  CHECK(skip(many, 200000, d, &used) == kPc_WireStatus_TooDeep);
  CHECK(skip(many, 200000, 1000000, &used) == kPc_WireStatus_TooDeep);
  free(many);
  /* every status has text */
  for (int s = 0; s <= kPc_WireStatus_BadUtf8; s++)
    CHECK(strcmp(pc_WireStatus_String((pc_WireStatus)s), "unknown wire status") != 0);
  CHECK(strcmp(pc_WireStatus_String((pc_WireStatus)99), "unknown wire status") == 0);
}

static int utf8(const char *s) {
  return pc_Wire_ValidUtf8((const uint8_t *)s, strlen(s));
}

/* Where 's' stops being UTF-8 by the definition (RFC 3629 section 4), a
 * byte at a time: the offset of the first character that is not
 * well-formed, or 'len'. */
static size_t utf8_bad_by_bytes(const uint8_t *s, size_t len) {
  for (size_t i = 0; i < len;) {
    uint8_t c = s[i];
    size_t n = c < 0x80                 ? 1
               : c >= 0xc2 && c <= 0xdf ? 2
               : c >= 0xe0 && c <= 0xef ? 3
               : c >= 0xf0 && c <= 0xf4 ? 4
                                        : 0;
    if (n == 0 || len - i < n) return i;
    uint32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (size_t j = 1; j < n; j++) {
      if ((s[i + j] & 0xc0) != 0x80) return i;
      cp = cp << 6 | (s[i + j] & 0x3f);
    }
    static const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < least[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += n;
  }
  return len;
}

static int utf8_by_bytes(const uint8_t *s, size_t len) {
  return utf8_bad_by_bytes(s, len) == len;
}

/* Strings where pc_Wire_ValidUtf8 or pc_Wire_InvalidUtf8At and the
 * definition disagree (the first printed), over the sequences utf8_same
 * was given. */
static size_t utf8_disagree = 0;

/* utf8_same checks a copy of each string in a heap block of exactly its
 * length (NULL for none, as an empty string slot), so that the sanitizer
 * build finds a read past the end by the word paths. */
static uint8_t *utf8_exact[41];

static void utf8_same(const uint8_t *s, size_t len) {
  uint8_t *copy = utf8_exact[len];
  if (len > 0) memcpy(copy, s, len);
  if (pc_Wire_ValidUtf8(copy, len) == utf8_by_bytes(s, len) &&
      pc_Wire_InvalidUtf8At(copy, len) == utf8_bad_by_bytes(s, len))
    return;
  if (utf8_disagree++ == 0) {
    fprintf(stderr,
            "pc_Wire_ValidUtf8 or _InvalidUtf8At disagrees with the definition on %zu bytes:", len);
    for (size_t i = 0; i < len; i++) fprintf(stderr, " %02x", s[i]);
    fprintf(stderr, "\n");
  }
}

/* 'seq' alone, and between ASCII so that it starts at offset 'at' (0..15)
 * of a string 'tail' bytes longer than that. */
static void utf8_same_framed(const uint8_t *seq, size_t n, size_t at, size_t tail) {
  uint8_t buf[40];
  utf8_same(seq, n);
  memset(buf, 'a', sizeof buf);
  memcpy(buf + at, seq, n);
  utf8_same(buf, at + n + tail);
}

/* Every 1-, 2- and 3-byte string; every 4-byte string that starts
 * 0xf0..0xf4 with every second and third byte and a fourth at the edges of
 * the continuation range. Each alone and framed in ASCII at an offset and
 * tail length that change with it. */
static size_t utf8_exhaustive(void) {
  static const uint8_t fourth[] = {0x00, 0x41, 0x7f, 0x80, 0x81, 0x8f, 0x90, 0x9f,
                                   0xa0, 0xbf, 0xc0, 0xc2, 0xe0, 0xf0, 0xff};
  utf8_disagree = 0;
  for (unsigned a = 0; a < 0x100; a++) {
    uint8_t s1[1] = {(uint8_t)a};
    utf8_same_framed(s1, 1, a % 16, a / 16 % 9);
    for (unsigned b = 0; b < 0x100; b++) {
      uint8_t s2[2] = {(uint8_t)a, (uint8_t)b};
      utf8_same_framed(s2, 2, b % 16, a % 9);
      for (unsigned c = 0; c < 0x100; c++) {
        uint8_t s3[3] = {(uint8_t)a, (uint8_t)b, (uint8_t)c};
        utf8_same_framed(s3, 3, (a + c) % 16, (b + c) % 9);
        if (a < 0xf0 || a > 0xf4) continue;
        for (size_t d = 0; d < sizeof fourth; d++) {
          uint8_t s4[4] = {(uint8_t)a, (uint8_t)b, (uint8_t)c, fourth[d]};
          utf8_same_framed(s4, 4, (b + d) % 16, (c + d) % 9);
        }
      }
    }
  }
  return utf8_disagree;
}

/* Sequences, valid, invalid and cut short, at every offset 0..15 of
 * strings of up to 34 bytes (across each word boundary of both
 * word paths), and each one's prefixes ending a string. */
static const uint8_t utf8_pieces[][4] = {{0xc2, 0x80},
                                         {0xdf, 0xbf},
                                         {0xe0, 0xa0, 0x80},
                                         {0xed, 0x9f, 0xbf},
                                         {0xef, 0xbf, 0xbf},
                                         {0xf0, 0x90, 0x80, 0x80},
                                         {0xf4, 0x8f, 0xbf, 0xbf},
                                         {0x80},
                                         {0xc0, 0x80},
                                         {0xe0, 0x9f, 0xbf},
                                         {0xed, 0xa0, 0x80},
                                         {0xf0, 0x8f, 0xbf, 0xbf},
                                         {0xf4, 0x90, 0x80, 0x80},
                                         {0xf5, 0x80, 0x80, 0x80},
                                         {0xe2, 0x28, 0xa1},
                                         {0xf0, 0x9f, 0x28, 0x80}};
static const size_t utf8_piece_len[] = {2, 2, 3, 3, 3, 4, 4, 1, 2, 3, 3, 4, 4, 4, 3, 4};

static size_t utf8_at_every_offset(void) {
  utf8_disagree = 0;
  for (size_t k = 0; k < sizeof utf8_piece_len / sizeof *utf8_piece_len; k++)
    for (size_t at = 0; at < 16; at++)
      for (size_t n = 1; n <= utf8_piece_len[k]; n++) /* n < length: cut short */
        for (size_t tail = 0; tail < 16; tail++) utf8_same_framed(utf8_pieces[k], n, at, tail);
  return utf8_disagree;
}

/* Random strings of up to 40 bytes: ASCII runs with the pieces above, any
 * of their prefixes and random bytes between. */
static size_t utf8_random(void) {
  uint32_t seed = 12345;
  utf8_disagree = 0;
  for (int round = 0; round < 200000; round++) {
    uint8_t buf[40];
    size_t n = 0, want_len = ((seed = seed * 1103515245u + 12345u) >> 16) % 40;
    while (n < want_len) {
      seed = seed * 1103515245u + 12345u;
      unsigned r = seed >> 16;
      if (r % 6 != 0) {
        buf[n++] = (uint8_t)(' ' + r % 95);
      } else if (r / 6 % 8 == 0) {
        buf[n++] = (uint8_t)(r >> 8);
      } else {
        size_t k = r / 48 % (sizeof utf8_piece_len / sizeof *utf8_piece_len);
        size_t len = r & 0x8000 ? 1 + r / 8 % utf8_piece_len[k] : utf8_piece_len[k];
        for (size_t i = 0; i < len && n < sizeof buf; i++) buf[n++] = utf8_pieces[k][i];
      }
    }
    utf8_same(buf, n);
  }
  return utf8_disagree;
}

static void test_utf8(void) {
  CHECK(utf8(""));
  CHECK(utf8("plain ascii, long enough to take the 8-byte path"));
  CHECK(utf8("\xc2\x80"));         /* U+0080 */
  CHECK(utf8("\xdf\xbf"));         /* U+07FF */
  CHECK(utf8("\xe0\xa0\x80"));     /* U+0800 */
  CHECK(utf8("\xed\x9f\xbf"));     /* U+D7FF */
  CHECK(utf8("\xee\x80\x80"));     /* U+E000 */
  CHECK(utf8("\xef\xbf\xbf"));     /* U+FFFF */
  CHECK(utf8("\xf0\x90\x80\x80")); /* U+10000 */
  CHECK(utf8("\xf4\x8f\xbf\xbf")); /* U+10FFFF */
  CHECK(utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));
  CHECK(pc_Wire_ValidUtf8((const uint8_t *)"a\0b", 3)); /* NUL is valid */
  CHECK(pc_Wire_ValidUtf8(NULL, 0));                    /* an empty string slot holds no pointer */
  CHECK(!utf8("\x80"));                                 /* lone continuation */
  CHECK(!utf8("\xbf"));
  CHECK(!utf8("\xc0\x80"));     /* overlong NUL */
  CHECK(!utf8("\xc1\xbf"));     /* overlong */
  CHECK(!utf8("\xe0\x80\x80")); /* overlong 3-byte */
  CHECK(!utf8("\xe0\x9f\xbf"));
  CHECK(!utf8("\xf0\x80\x80\x80")); /* overlong 4-byte */
  CHECK(!utf8("\xf0\x8f\xbf\xbf"));
  CHECK(!utf8("\xed\xa0\x80"));     /* U+D800 */
  CHECK(!utf8("\xed\xbf\xbf"));     /* U+DFFF */
  CHECK(!utf8("\xf4\x90\x80\x80")); /* U+110000 */
  CHECK(!utf8("\xf5\x80\x80\x80"));
  CHECK(!utf8("\xff"));
  CHECK(!utf8("\xc3")); /* truncated */
  CHECK(!utf8("\xe2\x82"));
  CHECK(!utf8("\xf0\x9f\x98"));
  CHECK(!utf8("\xe2\x28\xa1")); /* bad continuation */
  CHECK(!utf8("\xf0\x9f\x28\x80"));
  CHECK(!utf8("abcdefgh\xc3")); /* after the fast path */
  /* where: the first byte of the first character that is not well-formed */
  CHECK(pc_Wire_InvalidUtf8At((const uint8_t *)"ab\xff", 3) == 2);
  CHECK(pc_Wire_InvalidUtf8At((const uint8_t *)"caf\xc3\xa9\xe2\x82", 7) == 5); /* cut short */
  CHECK(pc_Wire_InvalidUtf8At((const uint8_t *)"abcdefghij\xe2\x28\xa1", 13) == 10);
  CHECK(pc_Wire_InvalidUtf8At((const uint8_t *)"caf\xc3\xa9", 5) == 5); /* UTF-8: the length */
  CHECK(pc_Wire_InvalidUtf8At(NULL, 0) == 0);
  for (size_t n = 1; n < sizeof utf8_exact / sizeof *utf8_exact; n++)
    if ((utf8_exact[n] = malloc(n)) == NULL) abort();
  CHECK(utf8_exhaustive() == 0);
  CHECK(utf8_at_every_offset() == 0);
  CHECK(utf8_random() == 0);
  for (size_t n = 1; n < sizeof utf8_exact / sizeof *utf8_exact; n++) free(utf8_exact[n]);
}

static int fill_writer(pc_WireWriter *w) {
  for (int i = 0; i < 2000; i++) {
    if (!pc_WireWriter_PutVarint(w, (uint64_t)i * 977)) return 0;
    if (!pc_WireWriter_PutTag(w, (uint32_t)i + 1, kPc_Wire_Varint)) return 0;
  }
  char big[3000];
  memset(big, 'x', sizeof big);
  return pc_WireWriter_PutBytes(w, big, sizeof big) && pc_WireWriter_PutBytes(w, NULL, 0);
}

static void test_writer(void) {
  pc_WireWriter w;
  pc_WireWriter_Init(&w, NULL, NULL);
  CHECK(pc_WireWriter_Size(&w) == 0);
  CHECK(fill_writer(&w));
  /* read it back: 3000 x, then tag/value pairs in ascending order */
  const uint8_t *p = pc_WireWriter_Data(&w), *end = p + pc_WireWriter_Size(&w);
  p += 3000;
  for (int i = 1999; i >= 0; i--) {
    uint32_t f;
    pc_WireType wt;
    uint64_t v;
    pc_WireStatus st;
    p = pc_Wire_ReadTag(p, end, &f, &wt, &st);
    CHECK(p != NULL && f == (uint32_t)i + 1 && wt == kPc_Wire_Varint);
    if (p == NULL) break;
    p = pc_Wire_ReadVarint(p, end, &v, &st);
    CHECK(p != NULL && v == (uint64_t)i * 977);
    if (p == NULL) break;
  }
  CHECK(p == end);
  pc_WireWriter_Free(&w);
  CHECK(pc_WireWriter_Size(&w) == 0);

  for (long n = 1;; n++) {
    fail_reset(n);
    pc_WireWriter_Init(&w, fail_alloc, NULL);
    fill_writer(&w);
    pc_WireWriter_Free(&w);
    CHECK(fail_live == 0);
    if (!fail_hit) break;
  }
}

static void test_length(void) {
  size_t len = 0;
  pc_WireStatus st = kPc_WireStatus_Ok;
  const uint8_t in[] = {0x03, 'a', 'b', 'c'};
  CHECK(pc_Wire_ReadLength(in, in + 4, &len, &st) == in + 1 && len == 3);
  CHECK(pc_Wire_ReadLength(in, in + 3, &len, &st) == NULL && st == kPc_WireStatus_LengthPastEnd);
  const uint8_t huge[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01};
  CHECK(pc_Wire_ReadLength(huge, huge + 10, &len, &st) == NULL &&
        st == kPc_WireStatus_LengthPastEnd);
}

int main(void) {
  test_varint();
  test_zigzag();
  test_fixed();
  test_tags();
  test_skip();
  test_utf8();
  test_writer();
  test_length();
  return CHECK_DONE();
}
