/* The table of wire cases at the C API, byte for byte, with the error
 * texts pinned (spec/wire_spec.lua runs the same table from Lua). */
#include "base/arena.h"
#include "testing/check.h"
#include "wire/decode.h"
#include "wire/descriptor_set.h"
#include "wire/encode.h"
#include "wire/wire_cases_pb.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pc_Pool *pool;
static pc_Arena *arena;
static pc_Error err;
static char hexbuf[4096];

static size_t unhex(const char *h, char *out) {
  size_t n = 0;
  while (*h) {
    if (*h == ' ') {
      h++;
      continue;
    }
    unsigned v;
    sscanf(h, "%2x", &v);
    out[n++] = (char)v;
    h += 2;
  }
  return n;
}

static const pc_MessageDef *T(const char *name) {
  const pc_MessageDef *m = pc_Pool_FindMessage(pool, name);
  CHECK(m != NULL);
  return m;
}

/* Decodes hex into a new message of 'type'; NULL with 'err' set on error. */
static pc_Message *dec(const char *type, const char *hex) {
  static char buf[300000];
  size_t n = unhex(hex, buf);
  const pc_MessageDef *m = T(type);
  pc_Message *msg = pc_Message_New(m, arena);
  pc_Error_Init(&err);
  if (pc_Decode(buf, n, msg, m, arena, NULL, &err) != kPc_DecodeStatus_Ok) return NULL;
  return msg;
}

static pc_Message *dec_raw(const char *type, const char *buf, size_t n) {
  const pc_MessageDef *m = T(type);
  pc_Message *msg = pc_Message_New(m, arena);
  pc_Error_Init(&err);
  if (pc_Decode(buf, n, msg, m, arena, NULL, &err) != kPc_DecodeStatus_Ok) return NULL;
  return msg;
}

/* The encoding of 'msg' as spaced hex. */
static const char *enc(const char *type, const pc_Message *msg, int det) {
  pc_WireWriter w;
  pc_WireWriter_Init(&w, NULL, NULL);
  pc_EncodeOptions o = {det, 0};
  CHECK(pc_Encode(msg, T(type), &o, &w, NULL) == kPc_EncodeStatus_Ok);
  size_t n = pc_WireWriter_Size(&w), pos = 0;
  hexbuf[0] = '\0';
  for (size_t i = 0; i < n && pos + 4 < sizeof hexbuf; i++)
    pos += (size_t)sprintf(hexbuf + pos, i ? " %02x" : "%02x", pc_WireWriter_Data(&w)[i]);
  pc_WireWriter_Free(&w);
  return hexbuf;
}

static const pc_FieldDef *F(const char *type, const char *name) {
  const pc_FieldDef *f = pc_MessageDef_FindFieldByName(T(type), name, strlen(name));
  CHECK(f != NULL);
  return f;
}

static pc_Value get(const pc_Message *msg, const char *type, const char *name) {
  return pc_Message_Get(msg, F(type, name));
}

static int32_t arr_i32(const pc_Array *a, size_t i) {
  return pc_Array_Get(a, i, kPc_Slot_32).i32;
}

static int erris(const char *want) {
  if (strcmp(err.msg, want) != 0) {
    fprintf(stderr, "error text: got \"%s\"\n                want \"%s\"\n", err.msg, want);
    return 0;
  }
  return 1;
}

static int eq(const char *got, const char *want) {
  if (strcmp(got, want) != 0) {
    fprintf(stderr, "bytes: got  %s\n       want %s\n", got, want);
    return 0;
  }
  return 1;
}

static void cases(void) {
  pc_Message *m;
  /* e = MINUS_ONE; i = -1; s = -1 */
  m = pc_Message_New(T("t.Neg"), arena);
  pc_Value v;
  v.i32 = -1;
  pc_Message_Set(m, F("t.Neg", "e"), v);
  pc_Message_Set(m, F("t.Neg", "i"), v);
  pc_Message_Set(m, F("t.Neg", "s"), v);
  CHECK(eq(enc("t.Neg", m, 0),
           "08 ff ff ff ff ff ff ff ff ff 01 10 ff ff ff ff ff ff ff ff ff 01 18 01"));
  m = dec("t.Neg", "08 ff ff ff ff 0f");
  CHECK(m && get(m, "t.Neg", "e").i32 == -1);
  CHECK(m && eq(enc("t.Neg", m, 0), "08 ff ff ff ff ff ff ff ff ff 01"));
  m = dec("t.Neg", "08 7b");
  CHECK(m && get(m, "t.Neg", "e").i32 == 123);
  CHECK(m && eq(enc("t.Neg", m, 0), "08 7b"));

  const char *ints[] = {"0a 03 01 02 03", "08 01 08 02 08 03"};
  for (int i = 0; i < 2; i++) {
    m = dec("t.Ints", ints[i]);
    const pc_Array *a = m ? get(m, "t.Ints", "v").a : NULL;
    CHECK(a && a->size == 3 && arr_i32(a, 0) == 1 && arr_i32(a, 1) == 2 && arr_i32(a, 2) == 3);
    CHECK(m && eq(enc("t.Ints", m, 0), "0a 03 01 02 03"));
  }
  m = dec("t.Ints", "0a 02 01 02 08 03 0a 01 04");
  {
    const pc_Array *a = m ? get(m, "t.Ints", "v").a : NULL;
    CHECK(a && a->size == 4 && arr_i32(a, 3) == 4 && arr_i32(a, 2) == 3);
  }
  m = dec("t.Unpacked", "fa 01 02 01 02");
  {
    const pc_Array *a = m ? get(m, "t.Unpacked", "v").a : NULL;
    CHECK(a && a->size == 2 && arr_i32(a, 0) == 1 && arr_i32(a, 1) == 2);
    CHECK(m && eq(enc("t.Unpacked", m, 0), "f8 01 01 f8 01 02"));
  }
  /* B: one empty item / truncated */
  m = dec("t.B", "0a 00");
  CHECK(m && get(m, "t.B", "items").a->size == 1);
  CHECK(m && eq(enc("t.B", m, 0), "0a 00"));
  CHECK(dec("t.B", "0a") == NULL && erris("t.B.items: truncated input at offset 1"));

  m = dec("t2.Outer", "2a 04 08 0a 10 2a 2a 03 08 89 06");
  {
    const pc_Message *sub = m ? get(m, "t2.Outer", "sub").m : NULL;
    CHECK(sub && get(sub, "t2.Inner", "f1").i32 == 777 && get(sub, "t2.Inner", "f2").i32 == 42);
  }
  m = dec("t2.Outer", "2a 04 18 00 18 01 2a 04 18 02 18 03");
  {
    const pc_Message *sub = m ? get(m, "t2.Outer", "sub").m : NULL;
    const pc_Array *a = sub ? get(sub, "t2.Inner", "r").a : NULL;
    CHECK(a && a->size == 4 && arr_i32(a, 0) == 0 && arr_i32(a, 3) == 3);
  }
  /* maps */
  const pc_FieldDef *mf = F("t.M", "m"), *sf = F("t.M", "s");
  m = dec("t.M", "0a 02 08 05");
  {
    pc_Value key;
    memset(&key, 0, sizeof key);
    key.i32 = 5;
    const pc_Map *map = m ? get(m, "t.M", "m").map : NULL;
    pc_Value *val = map ? pc_Map_Find(map, kPc_Slot_32, key) : NULL;
    CHECK(val && val->m != NULL && get(val->m, "t.Sub", "x").i32 == 0);
    CHECK(m && eq(enc("t.M", m, 0), "0a 04 08 05 12 00"));
  }
  m = dec("t.M", "0a 00");
  {
    pc_Value key;
    memset(&key, 0, sizeof key);
    const pc_Map *map = m ? get(m, "t.M", "m").map : NULL;
    CHECK(map && map->size == 1 && pc_Map_Find(map, kPc_Slot_32, key) != NULL);
    CHECK(m && eq(enc("t.M", m, 0), "0a 04 08 00 12 00"));
  }
  m = dec("t.M", "12 03 12 01 62");
  {
    pc_Value key;
    memset(&key, 0, sizeof key);
    const pc_Map *map = m ? pc_Message_Get(m, sf).map : NULL;
    pc_Value *val = map ? pc_Map_Find(map, kPc_Slot_String, key) : NULL;
    CHECK(val && val->s.size == 1 && val->s.data[0] == 'b');
  }
  m = dec("t.M", "0a 04 08 01 12 00 0a 06 08 01 12 02 08 07");
  {
    pc_Value key;
    memset(&key, 0, sizeof key);
    key.i32 = 1;
    const pc_Map *map = m ? pc_Message_Get(m, mf).map : NULL;
    pc_Value *val = map ? pc_Map_Find(map, kPc_Slot_32, key) : NULL;
    CHECK(map && map->size == 1);
    CHECK(val && val->m && get(val->m, "t.Sub", "x").i32 == 7);
  }
  /* unknown fields of every wire type, verbatim */
  const char *unk[] = {"1b 08 01 1c",
                       "08 96 01 12 02 68 69 1d 01 02 03 04 21 01 02 03 04 05 06 07 08"};
  for (int i = 0; i < 2; i++) {
    m = dec("t.Empty", unk[i]);
    CHECK(m && eq(enc("t.Empty", m, 0), unk[i]));
  }
  CHECK(!dec("t.Empty", "1b 08 01") && erris("t.Empty field 3: truncated input at offset 3"));
  CHECK(!dec("t.Empty", "1b 24") &&
        erris("t.Empty field 3: end-group does not match its start-group at offset 1"));
  CHECK(!dec("t.Empty", "1c") &&
        erris("t.Empty field 3: end-group without a start-group at offset 0"));
  CHECK(!dec("t.Empty", "0e") && erris("t.Empty field 1: invalid wire type at offset 0"));
  CHECK(!dec("t.Empty", "0f") && erris("t.Empty field 1: invalid wire type at offset 0"));
  /* proto2 group */
  m = dec("t2.G", "1b 08 01 1c");
  {
    const pc_Message *g = m ? get(m, "t2.G", "grp").m : NULL;
    CHECK(g && get(g, "t2.G.Grp", "a").i32 == 1);
    CHECK(m && eq(enc("t2.G", m, 0), "1b 08 01 1c"));
  }
  CHECK(!dec("t.Empty", "00 01") && erris("t.Empty: field number 0 at offset 0"));
  CHECK(!dec("t.Empty", "05 de ad be ef") && erris("t.Empty: field number 0 at offset 0"));
  CHECK(!dec("t.I64", "88 80 80 80 40 d2 09") &&
        erris("t.I64: tag wider than 32 bits at offset 0"));
  CHECK(!dec("t.Empty", "f8 ff ff ff 1f 01") &&
        erris("t.Empty: tag wider than 32 bits at offset 0"));
  CHECK(!dec("t.I64", "88 80 80 80 80 00 01") &&
        erris("t.I64: tag longer than 5 bytes at offset 0"));
  CHECK(!dec("t.Empty", "08 01 88 80 80 80 80 80 80 80 80 00 01") &&
        erris("t.Empty: tag longer than 5 bytes at offset 2"));
  m = dec("t.Empty", "f8 ff ff ff 0f 01");
  CHECK(m && eq(enc("t.Empty", m, 0), "f8 ff ff ff 0f 01"));
  CHECK(!dec("t.I64", "08 80") && erris("t.I64.r: truncated input at offset 1"));
  CHECK(!dec("t.I64", "08 a1 a1 a1 a1 a1 a1 a1 a1 a1 a1 10 10 03") &&
        erris("t.I64.r: varint longer than 10 bytes at offset 1"));
  CHECK(!dec("t.Bin", "12 05 61 62") &&
        erris("t.Bin.raw: length runs past the end of the input at offset 1"));
  /* non-minimal tags are accepted (the decoder's inline two-byte path) */
  m = dec("t.I64", "88 00 05 90 80 00 06");
  CHECK(m && get(m, "t.I64", "r").i64 == 5 && get(m, "t.I64", "u").u64 == 6);
  CHECK(m && eq(enc("t.I64", m, 0), "08 05 10 06"));
  CHECK(!dec("t.I64", "80 00 05") && erris("t.I64: field number 0 at offset 0"));
  CHECK(!dec("t.I64", "8e 00") && erris("t.I64 field 1: invalid wire type at offset 0"));
  m = dec("t.I64", "08 80 80 80 80 80 80 80 80 80 00");
  CHECK(m && get(m, "t.I64", "r").i64 == 0 && eq(enc("t.I64", m, 0), ""));
  /* UTF-8 in proto3 strings only */
  CHECK(!dec("t.Bin", "0a 02 c0 80") &&
        erris("t.Bin.text: invalid UTF-8 in a string field at offset 1"));
  CHECK(dec("t.Bin", "12 02 c0 80") != NULL);
  /* 100 nested Rec parse, 101 fail */
  for (int depth = 100; depth <= 101; depth++) {
    /* built back to front: each level is 0a <varint length> <inner> */
    static char nest[1000];
    size_t pos = sizeof nest;
    for (int i = 0; i < depth; i++) {
      size_t len = sizeof nest - pos;
      if (len >= 128) {
        nest[--pos] = (char)(len >> 7);
        nest[--pos] = (char)((len & 0x7f) | 0x80);
      } else {
        nest[--pos] = (char)len;
      }
      nest[--pos] = 0x0a;
    }
    size_t n = sizeof nest - pos;
    memmove(nest, nest + pos, n);
    m = dec_raw("t.Rec", nest, n);
    if (depth == 100) {
      int levels = 0;
      const pc_Message *c = m;
      while (c != NULL && (c = get(c, "t.Rec", "child").m) != NULL) levels++;
      CHECK(m != NULL && levels == 100);
    } else {
      CHECK(
          m == NULL &&
          strstr(err.msg, "t.Rec.child: messages nested deeper than 100 (max_depth) at offset ") ==
              err.msg);
    }
  }
  /* 200,000 bytes of 0b */
  {
    char *many = malloc(200000);
    memset(many, 0x0b, 200000);
    CHECK(dec_raw("t.Empty", many, 200000) == NULL && strstr(err.msg, "nesting too deep"));
    free(many);
  }
}

int main(void) {
  pool = pc_Pool_New(NULL, NULL);
  size_t first;
  pc_Error_Init(&err);
  long n = pc_Pool_AddDescriptorSet(pool, (const char *)kCasesPb, sizeof kCasesPb, &first, &err);
  if (n != 2) fprintf(stderr, "%s\n", err.msg);
  CHECK(n == 2);
  arena = pc_Arena_New(NULL, NULL);
  if (n == 2) cases();
  pc_Arena_Free(arena);
  pc_Pool_Free(pool);
  return CHECK_DONE();
}
