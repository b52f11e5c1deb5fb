/* The text format parser in its two voices: ours (line:col, pc.from_text)
 * and protoc's (pc_TextParseOptions.protoc, the .proto compiler's aggregate
 * option values), each case checked against Debian's protoc 3.21 (--encode
 * for the bytes, an option value for the words); a finder standing for
 * protoc's; MessageSet items as protoc writes them; no leak when an
 * allocation fails. */
#include "base/arena.h"
#include "compiler/import.h"
#include "testing/check.h"
#include "testing/failalloc.h"
#include "text/text.h"
#include "wire/encode.h"

#include <stdio.h>
#include <string.h>

static const char kProto2[] =
    "syntax = \"proto2\";\n"
    "package t;\n"
    "import \"google/protobuf/any.proto\";\n"
    "message M {\n"
    "  optional int32 a = 1;\n"
    "  optional group G = 2 { optional int32 x = 1; }\n"
    "  repeated int32 r = 3;\n"
    "  oneof k { int32 o1 = 4; string o2 = 5; }\n"
    "  optional string s = 6;\n"
    "  optional double d = 7;\n"
    "  optional bool b = 8;\n"
    "  optional google.protobuf.Any any = 9;\n"
    "  extensions 100 to 200;\n"
    "}\n"
    "extend M { optional int32 e = 100; }\n"
    "message MS { option message_set_wire_format = true; extensions 4 to max; }\n"
    "message Item { extend MS { optional Item item = 10; } optional int32 v = 1; }\n"
    "message Other { extend MS { optional Other other = 7; } optional string w = 1; }\n"
    "message Holder { optional MS ms = 1; required int32 req = 2; }\n";

static const char kProto3[] = "syntax = \"proto3\";\n"
                              "package t3;\n"
                              "message P { int32 a = 1; string s = 2; }\n";

static pc_Pool *pool_of(const char *name, const char *src) {
  pc_Pool *pool = pc_Pool_New(NULL, NULL);
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_ImportCtx c;
  memset(&c, 0, sizeof c);
  c.arena = a;
  c.main_name = name;
  c.main_source = src;
  c.main_len = strlen(src);
  pc_Error err;
  pc_Error_Init(&err);
  CHECK(pc_Import(pool, &c, name, &err));
  pc_Arena_Free(a);
  return pool;
}

/* 'text' as a 'type' of 'pool': its bytes in hex, or the error. */
static const char *run(const pc_Pool *pool, const char *type, const char *text,
                       const pc_TextParseOptions *o) {
  static char out[PC_ERROR_MAX + 16];
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  const pc_MessageDef *m = pc_Pool_FindMessage(pool, type);
  pc_Message *msg = pc_Message_New(m, a);
  pc_Error err;
  pc_Error_Init(&err);
  if (pc_Text_Parse(text, strlen(text), msg, m, a, o, &err) != kPc_TextStatus_Ok) {
    snprintf(out, sizeof out, "%s", err.msg);
  } else {
    pc_WireWriter w;
    pc_WireWriter_Init(&w, NULL, NULL);
    static const pc_EncodeOptions kPartial = {0, 1};
    out[0] = '\0';
    if (pc_Encode(msg, m, &kPartial, &w, &err) != kPc_EncodeStatus_Ok)
      snprintf(out, sizeof out, "encode: %s", err.msg);
    for (size_t i = 0; out[0] != 'e' && i < pc_WireWriter_Size(&w) && 2 * i + 2 < sizeof out; i++)
      snprintf(out + 2 * i, 3, "%02x", pc_WireWriter_Data(&w)[i]);
    pc_WireWriter_Free(&w);
  }
  pc_Arena_Free(a);
  return out;
}

static void expect(const char *got, const char *want, int line) {
  if (strcmp(got, want) == 0) return;
  fprintf(stderr, "parse_test.c: case %d: got '%s'\n  wanted '%s'\n", line, got, want);
  pc_check_failures++;
}

static const pc_TextParseOptions kOurs = {0, NULL, NULL, 0};
static const pc_TextParseOptions kProtoc = {0, NULL, NULL, 1};

/* Each text in both voices: the bytes (hex) or the error, NULL for not
 * checked. */
static const struct {
  const char *type, *text, *ours, *protoc;
} kCases[] = {
    {"t.M", "G { x: 1 } r: [1, 2] a: -1", "08ffffffffffffffffff011308011418011802",
     "08ffffffffffffffffff011308011418011802"},
    {"t.M", "any { [type.googleapis.com/t.M] { a: 1 } }",
     "4a1d0a17747970652e676f6f676c65617069732e636f6d2f742e4d12020801",
     "4a1d0a17747970652e676f6f676c65617069732e636f6d2f742e4d12020801"},
    {"t.M", "b: 0x1", "4001", "4001"},
    {"t.M", "a: x", "1:4: expected integer, got \"x\"", "Expected integer, got: x"},
    {"t.M", "a 1", NULL, "Expected \":\", found \"1\"."},
    {"t.M", "q: 1", NULL, "Message type \"t.M\" has no field named \"q\"."},
    {"t.M", "g { x: 1 }", NULL, "Message type \"t.M\" has no field named \"g\"."},
    {"t.M", "a: 1 a: 2", NULL, "Non-repeated field \"a\" is specified multiple times."},
    {"t.M", "G { x: 1 } G { }", "1:12: non-repeated field \"g\" is specified multiple times",
     "Non-repeated field \"G\" is specified multiple times."},
    {"t.M", "o1: 1 o2: 'x'", NULL,
     "Field \"o2\" is specified along with field \"o1\", another member of oneof \"k\"."},
    {"t.M", "d: 010", "1:4: expected a decimal number, got \"010\"",
     "Expect a decimal number, got: 010"},
    {"t.M", "d: aBc", NULL, "Expected double, got: abc"},
    {"t.M", "d: \"x\"", NULL, "Expected double, got: \"x\""},
    {"t.M", "b: 2", NULL, "Integer out of range (2)"},
    {"t.M", "b: yes", NULL, "Invalid value for boolean field \"b\". Value: \"yes\"."},
    {"t.M", "b: 'y'", NULL, "Expected identifier, got: 'y'"},
    /* protoc 3.21 writes a lone surrogate's three bytes and joins a pair;
     * the specification and the conformance suite refuse both
     * (StringLiteralShortUnicodeEscapeSurrogatePair{String,Bytes}) */
    {"t.M", "s: \"\\ud800\"", "1:5: \\ud800: a UTF-16 surrogate is not a character", "3203eda080"},
    {"t.M", "s: 'x\\ud801\\udc37'",
     "1:6: \\ud801\\udc37: text format takes no UTF-16 surrogate pair; write U+10437 as "
     "\\U00010437 or as UTF-8",
     "320578f09090b7"},
    {"t.M", "s: '\\U0000d801\\udc37'", "1:5: \\U0000d801: a UTF-16 surrogate is not a character",
     NULL},
    {"t.M", "r: [1; 2]", NULL, "Expected \",\", found \";\"."},
    {"t.M", "a: [1]", "1:4: list given for non-repeated field \"a\"", "Expected integer, got: ["},
    {"t.M", "G < x: 1 }", "1:10: expected a field name or the end, got \"}\"",
     "Expected \">\", found \"}\"."},
    {"t.M", "G {", NULL, "Expected identifier, got: "},
    {"t.M", "[t.nope]: 1", NULL,
     "Extension \"t.nope\" is not defined or is not an extension of \"t.M\"."},
    {"t.M", "[t.M/x]: 1", NULL, "Expected \"]\", found \"/\"."},
    {"t.M", "any { [t.M] {} }", NULL, "Expected \"/\", found \"]\"."},
    {"t.M", "any { [a/b/t.M] {} }", NULL, "Expected \"]\", found \"/\"."},
    {"t.M", "any { [type.googleapis.com/t.M] {} [type.googleapis.com/t.M] {} }", NULL,
     "Non-repeated Any specified multiple times."},
    {"t.M", "any { [type.googleapis.com/t.M] { a: 1 } type_url: 'u' }",
     "1:42: non-repeated field \"type_url\" is specified multiple times",
     "Non-repeated field \"type_url\" is specified multiple times."},
    {"t.M", "any { [type.googleapis.com/t.M] { a: 1 } value: 'v' }",
     "1:42: non-repeated field \"value\" is specified multiple times",
     "Non-repeated field \"value\" is specified multiple times."},
    {"t.M", "any { [type.googleapis.com/t.Holder] {} }", NULL,
     "Value of type \"t.Holder\" stored in google.protobuf.Any has missing required fields"},
    /* MessageSet items, in type_id order; required fields in protoc's voice */
    {"t.Holder", "ms { [t.Item.item] { v: 1 } }", "0a080b100a1a0208010c",
     "Message missing required fields: req"},
    {"t.Holder", "req: 1 ms { [t.Other.other] { w: \"x\" } [t.Item.item] { v: 1 } }",
     "0a110b10071a030a01780c0b100a1a0208010c1001", "0a110b10071a030a01780c0b100a1a0208010c1001"},
    {"t.Holder", "req: 1 ms { [t.Item.item] { v: 1 } [t.Other.other] { w: \"x\" } }",
     "0a110b10071a030a01780c0b100a1a0208010c1001", "0a110b10071a030a01780c0b100a1a0208010c1001"},
    {"t.Holder", "ms { [t.Item.item] { v: 1 } [t.Item.item] { v: 2 } }",
     "1:29: non-repeated field \"t.Item.item\" is specified multiple times", NULL},
    /* a proto3 field without presence is set twice once it is not zero */
    {"t3.P", "a: 0 a: 2", "0802", "0802"},
    {"t3.P", "a: 1 a: 2", "1:6: non-repeated field \"a\" is specified multiple times",
     "Non-repeated field \"a\" is specified multiple times."},
    {"t3.P", "s: \"\\xff\"", "1:4: string is not valid UTF-8", NULL},
};

static void voices(const pc_Pool *p2, const pc_Pool *p3) {
  for (size_t i = 0; i < sizeof kCases / sizeof kCases[0]; i++) {
    const pc_Pool *pool = kCases[i].type[1] == '3' ? p3 : p2;
    if (kCases[i].ours != NULL)
      expect(run(pool, kCases[i].type, kCases[i].text, &kOurs), kCases[i].ours, (int)i);
    if (kCases[i].protoc != NULL)
      expect(run(pool, kCases[i].type, kCases[i].text, &kProtoc), kCases[i].protoc, (int)i);
  }
}

/* A finder: "[short]" names t.e; no Any type is known. */
static const pc_FieldDef *short_name(void *ud, const pc_MessageDef *m, const char *name) {
  (void)m;
  return strcmp(name, "short") == 0 ? pc_Pool_FindExtension(ud, "t.e") : NULL;
}

static const pc_MessageDef *no_type(void *ud, const char *url) {
  (void)ud;
  (void)url;
  return NULL;
}

static void finder(const pc_Pool *pool) {
  pc_TextFinder f = {short_name, no_type, (void *)pool};
  pc_TextParseOptions o = {0, NULL, &f, 1};
  expect(run(pool, "t.M", "[short]: 5", &o), "a00605", -1);
  expect(run(pool, "t.M", "[t.e]: 5", &o),
         "Extension \"t.e\" is not defined or is not an extension of \"t.M\".", -2);
  expect(run(pool, "t.M", "any { [type.googleapis.com/t.M] {} }", &o),
         "Could not find type \"type.googleapis.com/t.M\" stored in google.protobuf.Any.", -3);
}

/* Every allocation failing in turn: out of memory, and nothing leaks. */
static void no_leak(const pc_Pool *pool) {
  static const char text[] = "req: 1 ms { [t.Other.other] { w: \"x\" } [t.Item.item] { v: 1 } }";
  const pc_MessageDef *m = pc_Pool_FindMessage(pool, "t.Holder");
  for (long n = 1;; n++) {
    fail_reset(n);
    pc_Arena *a = pc_Arena_New(fail_alloc, NULL);
    if (a != NULL) {
      pc_Message *msg = pc_Message_New(m, a);
      pc_Error err;
      pc_Error_Init(&err);
      pc_TextStatus st = msg == NULL
                             ? kPc_TextStatus_OutOfMemory
                             : pc_Text_Parse(text, sizeof text - 1, msg, m, a, &kProtoc, &err);
      CHECK(st == kPc_TextStatus_Ok || st == kPc_TextStatus_OutOfMemory);
      pc_Arena_Free(a);
    }
    CHECK(fail_live == 0);
    if (!fail_hit) break;
  }
}

int main(void) {
  pc_Pool *p2 = pool_of("t.proto", kProto2), *p3 = pool_of("t3.proto", kProto3);
  voices(p2, p3);
  finder(p2);
  no_leak(p2);
  pc_Pool_Free(p2);
  pc_Pool_Free(p3);
  return CHECK_DONE();
}
