/* The .proto parser and resolver: one case per validation rule with its
 * exact error text, the literal forms, the synthesized map entries and
 * synthetic oneofs, the built-in well-known types, and no leak on any
 * allocation failure. (Equality with protoc over the whole corpus is the
 * proto_corpus test.) */
#include "base/arena.h"
#include "testing/check.h"
#include "testing/failalloc.h"
#include "compiler/load.h"
#include "compiler/parse_internal.h"
#include "schema/wkt.h"

#include <string.h>

typedef struct {
  const char *name, *src;
} Mem;

static int mem_source(void *ud, const char *name, const char **src, size_t *len, pc_Error *err) {
  const Mem *m = ud;
  (void)err;
  for (; m->name; m++)
    if (strcmp(m->name, name) == 0) {
      *src = m->src;
      *len = strlen(m->src);
      return 1;
    }
  return 0;
}

/* Loads "t.proto" (plus 'extra' files) and returns the error text, or "" */
static const char *load_error(const char *src, const Mem *extra) {
  static pc_Error err;
  Mem files[8] = {{"t.proto", src}};
  for (int i = 0; extra && extra[i].name; i++) files[i + 1] = extra[i];
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_ProtoSet set = {0};
  pc_Error_Init(&err);
  pc_FileDesc *f = pc_LoadProto(a, &set, "t.proto", mem_source, files, &err);
  pc_Arena_Free(a);
  return f ? "" : err.msg;
}

#define ERR(src, want)                                                                             \
  do {                                                                                             \
    const char *got_ = load_error(src, NULL);                                                      \
    if (strcmp(got_, want) != 0) fprintf(stderr, "got:  %s\nwant: %s\n", got_, want);              \
    CHECK(strcmp(got_, want) == 0);                                                                \
  } while (0)

#define ERR2(src, extra, want)                                                                     \
  do {                                                                                             \
    const char *got_ = load_error(src, extra);                                                     \
    if (strcmp(got_, want) != 0) fprintf(stderr, "got:  %s\nwant: %s\n", got_, want);              \
    CHECK(strcmp(got_, want) == 0);                                                                \
  } while (0)

static void import_errors(void) {
  static const Mem p2[] = {{"p2.proto", "syntax = \"proto2\";\nenum E { X = 1; }"}, {NULL, NULL}};
  ERR2("syntax = \"proto3\";\nimport \"p2.proto\";\nmessage A { E e = 1; }", p2,
       "t.proto:3:13: Enum type \"E\" is not a proto3 enum, but is used in \"A\" which is a "
       "proto3 message type.");
  static const Mem chain[] = {{"a.proto", "syntax = \"proto3\"; package a; message A {}"},
                              {"b.proto", "syntax = \"proto3\"; import \"a.proto\";"},
                              {"c.proto", "syntax = \"proto3\"; import public \"a.proto\";"},
                              {NULL, NULL}};
  ERR2("syntax = \"proto3\";\nimport \"b.proto\";\nmessage T { a.A a = 1; }", chain,
       "t.proto:3:13: \"a.A\" seems to be defined in \"a.proto\", which is not imported by "
       "\"t.proto\".  To use it here, please add the necessary import.");
  ERR2("syntax = \"proto3\";\nimport \"c.proto\";\nmessage T { a.A a = 1; }", chain, "");
  ERR2("syntax = \"proto3\";\nimport \"c.proto\";\nmessage A {}", chain, "");
  static const Mem dup[] = {{"d.proto", "syntax = \"proto3\"; package p; message A {}"},
                            {NULL, NULL}};
  ERR2("syntax = \"proto3\";\npackage p;\nimport \"d.proto\";\nmessage A {}", dup,
       "t.proto:4:9: \"p.A\" is already defined in file \"d.proto\".");
}

static void errors(void) {
  /* syntax and tokens */
  ERR("syntax = \"proto4\";",
      "t.proto:1:10: Unrecognized syntax identifier \"proto4\".  This parser only recognizes "
      "\"proto2\" and \"proto3\".");
  ERR("edition = \"2023\";", "t.proto:1:1: editions are not supported yet");
  ERR("syntax = \"proto3\";\nmessage A { int32 a = 1 }", "t.proto:2:25: Expected \";\".");
  ERR("syntax = \"proto2\";\nmessage A { int32 a = 1; }",
      "t.proto:2:13: Expected \"required\", \"optional\", or \"repeated\".");
  ERR("syntax = \"proto3\";\nmessage A { string a = 1 [json_name = \"\\q\"]; }",
      "t.proto:2:41: Invalid escape sequence in string literal.");
  ERR("syntax = \"proto3\";\nmessage A { int32 a = 1;\n",
      "t.proto:3:1: Reached end of input in message definition (missing '}').");
  ERR("syntax = \"proto3\";\nenum E { A = 0; B = 2147483648; }",
      "t.proto:2:21: Integer out of range.");
  ERR("syntax = \"proto3\";\nmessage A { oneof o { optional int32 a = 1; } }",
      "t.proto:2:23: Fields in oneofs must not have labels (required / optional / repeated).");
  ERR("message A { optional int32 a = 1; }\npackage p;\npackage q;",
      "t.proto:3:1: Multiple package definitions.");
  ERR("syntax = \"proto2\";\nmessage A { optional group g = 1 {} }",
      "t.proto:2:28: Group names must start with a capital letter.");
  /* names */
  ERR("syntax = \"proto3\";\npackage p;\nmessage A {\n  int32 a = 1;\n  string a = 2;\n}",
      "t.proto:5:10: \"a\" is already defined in \"p.A\".");
  ERR("syntax = \"proto2\";\npackage p;\nenum E { A = 0; }\nenum F { A = 1; }",
      "t.proto:4:10: \"A\" is already defined in \"p\".");
  ERR("syntax = \"proto3\";\nmessage A { Foo a = 1; }", "t.proto:2:13: \"Foo\" is not defined.");
  ERR("syntax = \"proto3\";\npackage p;\nmessage Bar { message Baz {} }\nmessage Foo {\n"
      "  message Bar {}\n  Bar.Baz baz = 1;\n}",
      "t.proto:6:3: \"Bar.Baz\" is resolved to \"p.Foo.Bar.Baz\", which is not defined. The "
      "innermost scope is searched first in name resolution. Consider using a leading '.'(i.e., "
      "\".Bar.Baz\") to start from the outermost scope.");
  ERR("syntax = \"proto3\";\npackage p;\nmessage A { int32 x = 1; p.A.x y = 2; }",
      "t.proto:3:26: \"p.A.x\" is not a type.");
  ERR("syntax = \"proto3\";\nimport \"google/protobuf/any.proto\";\n"
      "message A { google.protobuf.Duration d = 1; }",
      "t.proto:3:13: \"google.protobuf.Duration\" is not defined.");
  ERR("syntax = \"proto3\";\nimport \"missing.proto\";",
      "t.proto: Import \"missing.proto\" was not found or had errors.");
  ERR("syntax = \"proto3\";\nimport \"google/protobuf/any.proto\";\n"
      "import \"google/protobuf/any.proto\";",
      "t.proto: Import \"google/protobuf/any.proto\" was listed twice.");
  ERR("syntax = \"proto3\";\nservice S { rpc M (int32) returns (A); }",
      "t.proto:2:20: Expected message type.");
  ERR("syntax = \"proto3\";\nenum E { X = 0; }\nservice S { rpc M (E) returns (E); }",
      "t.proto:3:20: \"E\" is not a message type.");
  /* numbers */
  ERR("syntax = \"proto3\";\npackage p;\nmessage A {\n  int32 a = 1;\n  string b = 1;\n}",
      "t.proto:5:14: Field number 1 has already been used in \"p.A\" by field \"a\".");
  ERR("syntax = \"proto3\";\nmessage A { int32 a = 0; }",
      "t.proto:2:23: Field numbers must be positive integers.");
  ERR("syntax = \"proto3\";\nmessage A { int32 a = 536870912; }",
      "t.proto:2:23: Field numbers cannot be greater than 536870911.");
  ERR("syntax = \"proto3\";\nmessage A { int32 a = 19000; }",
      "t.proto:2:23: Field numbers 19000 through 19999 are reserved for the protocol buffer "
      "library implementation.");
  ERR("syntax = \"proto3\";\nmessage A {\n  reserved 2, 5 to 8;\n  int32 a = 6;\n}",
      "t.proto: Field \"a\" uses reserved number 6.");
  ERR("syntax = \"proto3\";\nmessage A {\n  reserved \"a\";\n  int32 a = 1;\n}",
      "t.proto:4:9: Field name \"a\" is reserved.");
  ERR("syntax = \"proto3\";\nenum E { reserved 1 to max; A = 0; B = 7; }",
      "t.proto: Enum value \"B\" uses reserved number 7.");
  ERR("syntax = \"proto2\";\nmessage M { extensions 10 to 20; extensions 15 to 30; }",
      "t.proto:2:24: Extension range 15 to 30 overlaps with already-defined range 10 to 20.");
  ERR("syntax = \"proto2\";\nmessage M { extensions 10 to 20; optional int32 a = 12; }",
      "t.proto:2:24: Extension range 10 to 20 includes field \"a\" (12)."); /* protoc: at the range */
  ERR("syntax = \"proto2\";\npackage p;\nmessage M { extensions 100 to 200; }\n"
      "extend M { optional int32 e = 300; }",
      "t.proto:4:31: \"p.M\" does not declare 300 as an extension number.");
  ERR("syntax = \"proto2\";\npackage p;\nmessage M { extensions 100 to 200; }\n"
      "extend M { optional int32 e = 150; optional int32 f = 150; }",
      "t.proto:4:55: Extension number 150 has already been used in \"p.M\" by extension \"p.e\".");
  ERR("syntax = \"proto2\";\nenum E { A = 0; B = 0; }",
      "t.proto:2:21: \"B\" uses the same enum value as \"A\". If this is intended, set 'option "
      "allow_alias = true;' to the enum definition.");
  ERR("syntax = \"proto2\";\nenum E { }", "t.proto:2:6: Enums must contain at least one value.");
  /* maps, defaults, options */
  ERR("syntax = \"proto3\";\nmessage A { map<double, string> m = 1; }",
      "t.proto:2:13: Key in map fields cannot be float/double, bytes or message types.");
  ERR("syntax = \"proto2\";\nenum E { ONE = 1; }\nmessage A { map<int32, E> m = 1; }",
      "t.proto:3:13: Enum value in map must define 0 as the first value.");
  ERR("syntax = \"proto3\";\nmessage A { repeated map<int32, int32> m = 1; }",
      "t.proto:2:25: Field labels (required/optional/repeated) are not allowed on map fields.");
  ERR("syntax = \"proto2\";\nenum E { A = 0; }\nmessage M { optional E e = 1 [default = B]; }",
      "t.proto:3:41: Enum type \"E\" has no value named \"B\".");
  ERR("syntax = \"proto2\";\nmessage N {}\nmessage M { optional N n = 1 [default = 1]; }",
      "t.proto:3:41: Messages can't have default values.");
  ERR("syntax = \"proto2\";\nmessage M { optional int32 n = 1 [default = 1.5]; }",
      "t.proto:2:45: Expected integer for field default value.");
  ERR("syntax = \"proto2\";\nmessage A { optional int32 a = 1 [packed = true]; }",
      "t.proto:2:22: [packed = true] can only be specified for repeated primitive fields.");
  ERR("syntax = \"proto3\";\noption foo = 1;",
      "t.proto:2:8: Option \"foo\" unknown. Ensure that your proto definition file imports the "
      "proto which defines the option.");
  ERR("syntax = \"proto3\";\noption java_multiple_files = 1;",
      "t.proto:2:30: Value must be identifier for boolean option "
      "\"google.protobuf.FileOptions.java_multiple_files\".");
  ERR("syntax = \"proto3\";\noption optimize_for = FAST;",
      "t.proto:2:23: Enum type \"google.protobuf.FileOptions.OptimizeMode\" has no value named "
      "\"FAST\" for option \"google.protobuf.FileOptions.optimize_for\".");
  ERR("syntax = \"proto3\";\noption java_package = \"a\";\noption java_package = \"b\";",
      "t.proto:3:8: Option \"java_package\" was already set.");
  ERR("syntax = \"proto3\";\noption (foo) = 1;",
      "t.proto:2:8: Option \"(foo)\" unknown. Ensure that your proto definition file imports the "
      "proto which defines the option.");
  ERR("syntax = \"proto3\";\nimport \"google/protobuf/descriptor.proto\";\n"
      "extend google.protobuf.FileOptions { int32 small = 50000; }\noption (small) = 3000000000;",
      "t.proto:4:18: Value out of range for int32 option \"small\".");
  ERR("syntax = \"proto3\";\nimport \"google/protobuf/descriptor.proto\";\n"
      "message R { string s = 1; }\n"
      "extend google.protobuf.FileOptions { R r = 50000; }\noption (r) = { t: 1 };",
      "t.proto:5:14: Error while parsing option value for \"r\": Message type \"R\" has no field "
      "named \"t\".");
  ERR("syntax = \"proto3\";\nimport \"google/protobuf/descriptor.proto\";\n"
      "message R { double d = 1; }\n"
      "extend google.protobuf.FileOptions { R r = 50000; }\noption (r) = { d: 0x10 };",
      "t.proto:5:14: Error while parsing option value for \"r\": Expect a decimal number, got: "
      "0x10");
  ERR("syntax = \"proto3\";\nimport \"google/protobuf/descriptor.proto\";\n"
      "message R { string s = 1; }\n"
      "extend google.protobuf.FileOptions { R r = 50000; }\noption (r) = 5;",
      "t.proto:5:14: Option \"r\" is a message. To set the entire message, use syntax like "
      "\"r = { <proto text format> }\". To set fields within it, use syntax like \"r.foo = "
      "value\".");
  /* proto3 rules */
  ERR("syntax = \"proto3\";\nenum E { A = 1; }",
      "t.proto:2:14: The first enum value must be zero in proto3.");
  ERR("syntax = \"proto3\";\nmessage A { required int32 a = 1; }",
      "t.proto:2:22: Required fields are not allowed in proto3.");
  ERR("syntax = \"proto3\";\nmessage A { int32 a = 1 [default = 5]; }",
      "t.proto:2:36: Explicit default values are not allowed in proto3.");
  ERR("syntax = \"proto3\";\nmessage A { optional group G = 1 {} }",
      "t.proto:2:22: Groups are not supported in proto3 syntax.");
  ERR("syntax = \"proto3\";\nmessage A { int32 foo_bar = 1; int32 fooBar = 2; }",
      "t.proto:2:38: The JSON camel-case name of field \"fooBar\" conflicts with field "
      "\"foo_bar\". This is not allowed in proto3.");
  ERR("syntax = \"proto3\";\nenum E { option allow_alias = true; A = 0; B = 1; }\n",
      "t.proto:3:1: \"E\" declares support for enum aliases but no enum values share field "
      "numbers. Please remove the unnecessary 'option allow_alias = true;' declaration.");
  ERR("syntax = \"proto2\";\nmessage M { optional uint32 a = 1 [default = -1]; }",
      "t.proto:2:47: Unsigned field can't have negative default value.");
  ERR("syntax = \"proto3\";\nmessage M { oneof o { map<int32,int32> m = 1; } }",
      "t.proto:2:26: Map fields are not allowed in oneofs.");
  ERR("syntax = \"proto2\";\nmessage M { extensions 10 to 20; }\n"
      "extend M { optional int32 e = 10 [json_name = \"x\"]; }",
      "t.proto:3:35: option json_name is not allowed on extension fields.");
  ERR("syntax = \"proto3\";\nmessage M { option message_set_wire_format = true; }",
      "t.proto:2:9: MessageSet is not supported in proto3.");
  ERR("syntax = \"proto3\";\nimport \"google/protobuf/descriptor.proto\";\n"
      "message M {}\nextend M { int32 e = 1; }",
      "t.proto:4:22: \"M\" does not declare 1 as an extension number.");
  ERR("syntax = \"proto3\";\nimport \"t.proto\";",
      "File recursively imports itself: t.proto -> t.proto");
  ERR("syntax = \"proto3\";\nmessage M { int32 a = 09; }",
      "t.proto:2:24: Numbers starting with leading zero must be in octal.");
  ERR("syntax = \"proto3\";\noption java_package.x = \"a\";",
      "t.proto:2:8: Option \"java_package\" is an atomic type, not a message.");
  ERR("syntax = \"proto3\";\nmessage M { extensions 10 to 20; }",
      "t.proto:2:9: Extension ranges are not allowed in proto3.");
}

static const pc_MessageDesc *msg(const pc_FileDesc *f, const char *name) {
  for (size_t i = 0; i < f->message_count; i++)
    if (strcmp(f->messages[i].name, name) == 0) return &f->messages[i];
  return NULL;
}

static const char kShapes[] =
    "syntax = \"proto3\";\n"
    "package demo.v1;\n"
    "import public \"google/protobuf/timestamp.proto\";\n"
    "/* block */ // line\n"
    "message M {\n"
    "  map<string, google.protobuf.Timestamp> times = 1;\n"
    "  optional int32 count = 2;\n"
    "  oneof _count { int32 c3 = 3; }\n"
    "  optional string name = 4 [json_name = \"NAME\", deprecated = true];\n"
    "  oneof kind { bytes raw = 5; M sub = 6; }\n"
    "  reserved 10 to max;\n"
    "  repeated sint64 packed = 7 [packed = false];\n"
    "}\n";

static const char kLiterals[] =
    "syntax = \"proto2\";\n"
    "message L {\n"
    "  optional string s = 1 [default = \"a\\x41\\101\\u00e9\" 'b\\n'];\n"
    "  optional bytes b = 2 [default = \"\\0\\377q\"];\n"
    "  optional int32 h = 3 [default = 0x1F];\n"
    "  optional int64 o = 4 [default = -017];\n"
    "  optional double d = 5 [default = -inf];\n"
    "  optional float f = 6 [default = 0.1];\n"
    "  optional double n = 7 [default = nan];\n"
    "  optional double e = 8 [default = 1e300];\n"
    "  optional group G = 9 { optional int32 x = 1; }\n"
    "  extensions 100 to max;\n"
    "}\n";

static void shapes(void) {
  Mem files[] = {{"s.proto", kShapes}, {"l.proto", kLiterals}, {NULL, NULL}};
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_ProtoSet set = {0};
  pc_Error err;
  pc_Error_Init(&err);
  pc_FileDesc *f = pc_LoadProto(a, &set, "s.proto", mem_source, files, &err);
  CHECK(f != NULL);
  if (f == NULL) {
    fprintf(stderr, "%s\n", err.msg);
    pc_Arena_Free(a);
    return;
  }
  CHECK(set.count == 2 && strcmp(set.files[0]->name, "google/protobuf/timestamp.proto") == 0);
  CHECK(f->public_dependency_count == 1 && f->public_dependencies[0] == 0);
  const pc_MessageDesc *m = msg(f, "M");
  CHECK(m != NULL && m->field_count == 7 && m->nested_count == 1);
  const pc_MessageDesc *e = &m->nested[0];
  CHECK(strcmp(e->name, "TimesEntry") == 0 && e->map_entry && e->options.size == 2);
  CHECK(strcmp(e->fields[1].type_name, ".google.protobuf.Timestamp") == 0);
  CHECK(e->fields[1].type == kPc_Type_Message && e->fields[0].type == kPc_Type_String);
  CHECK(m->fields[0].label == kPc_Label_Repeated &&
        strcmp(m->fields[0].type_name, ".demo.v1.M.TimesEntry") == 0);
  /* real oneofs first, then synthetic ones; "_count" is taken by a oneof */
  CHECK(m->oneof_count == 4 && strcmp(m->oneofs[0].name, "_count") == 0);
  CHECK(strcmp(m->oneofs[1].name, "kind") == 0 && m->fields[2].oneof_index == 0);
  CHECK(strcmp(m->oneofs[2].name, "X_count") == 0 && m->fields[1].oneof_index == 2);
  CHECK(strcmp(m->oneofs[3].name, "_name") == 0 && m->fields[1].proto3_optional);
  CHECK(strcmp(m->fields[3].json_name, "NAME") == 0 && m->fields[3].deprecated == 1);
  CHECK(m->fields[4].oneof_index == 1 && m->fields[5].type == kPc_Type_Message);
  CHECK(m->reserved_range_count == 1 && m->reserved_ranges[0].end == 536870912);
  CHECK(m->fields[6].packed == 0 && m->fields[6].options.size == 2);
  CHECK(m->fields[0].line == 6 && m->fields[0].column == 42);

  f = pc_LoadProto(a, &set, "l.proto", mem_source, files, &err);
  CHECK(f != NULL);
  if (f != NULL) {
    const pc_MessageDesc *l = msg(f, "L");
    CHECK(strcmp(l->fields[0].default_value, "aAA\xc3\xa9"
                                             "b\n") == 0);
    CHECK(strcmp(l->fields[1].default_value, "\\000\\377q") == 0);
    CHECK(strcmp(l->fields[2].default_value, "31") == 0);
    CHECK(strcmp(l->fields[3].default_value, "-15") == 0);
    CHECK(strcmp(l->fields[4].default_value, "-inf") == 0);
    CHECK(strcmp(l->fields[5].default_value, "0.1") == 0);
    CHECK(strcmp(l->fields[6].default_value, "nan") == 0);
    CHECK(strcmp(l->fields[7].default_value, "1e+300") == 0);
    CHECK(l->fields[8].type == kPc_Type_Group && strcmp(l->fields[8].name, "g") == 0);
    CHECK(strcmp(l->fields[8].type_name, ".L.G") == 0 && l->nested_count == 1);
    CHECK(l->extension_ranges[0].range.end == 536870912);
  }
  pc_Arena_Free(a);
}

/* Where a method's custom options were set: each extension's first, at
 * its name; none for a method without one. */
static void option_positions(void) {
  static const char src[] =
      "syntax = \"proto3\";\n"
      "import \"google/protobuf/descriptor.proto\";\n"
      "extend google.protobuf.MethodOptions { string tag = 50001; int32 n = 50002; }\n"
      "message R {}\n"
      "service S {\n"
      "  rpc A(R) returns (R) {\n"
      "    option (tag) = \"a\";\n"
      "      option deprecated = true; option (n) = 1;\n"
      "  }\n"
      "  rpc B(R) returns (R) { option deprecated = true; }\n"
      "}\n";
  Mem files[] = {{"o.proto", src}, {NULL, NULL}};
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_ProtoSet set = {0};
  pc_Error err;
  pc_Error_Init(&err);
  pc_FileDesc *f = pc_LoadProto(a, &set, "o.proto", mem_source, files, &err);
  CHECK(f != NULL && f->service_count == 1 && f->services[0].method_count == 2);
  if (f == NULL) {
    fprintf(stderr, "%s\n", err.msg);
    pc_Arena_Free(a);
    return;
  }
  const pc_MethodDesc *m = &f->services[0].methods[0];
  CHECK(m->option_position_count == 2);
  CHECK(m->option_positions[0].number == 50001 && m->option_positions[0].line == 7 &&
        m->option_positions[0].column == 12);
  CHECK(m->option_positions[1].number == 50002 && m->option_positions[1].line == 8 &&
        m->option_positions[1].column == 40);
  CHECK(f->services[0].methods[1].option_position_count == 0);
  pc_Arena_Free(a);
}

static void builtins(void) {
  size_t n = 0;
  for (; pc_Wkt_Name(n); n++) CHECK(pc_Wkt_Source(pc_Wkt_Name(n), NULL) != NULL);
  CHECK(n == 14);
  CHECK(pc_Wkt_Source("google/protobuf/nope.proto", NULL) == NULL);
  CHECK(pc_Wkt_Source("grpc/health/v1/health.proto", NULL) != NULL);
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_ProtoSet set = {0};
  pc_Error err;
  pc_Error_Init(&err);
  CHECK(pc_LoadProto(a, &set, "google/protobuf/api.proto", NULL, NULL, &err) != NULL);
  CHECK(set.count == 4); /* source_context, any, type, api */
  pc_Arena_Free(a);
}

static const char kCustom[] =
    "syntax = \"proto2\";\n"
    "import \"google/protobuf/descriptor.proto\";\n"
    "import \"s.proto\";\n"
    "message R { repeated int32 n = 1; optional R r = 2; }\n"
    "extend google.protobuf.MessageOptions { optional R r = 50000; optional int32 i = 50001; }\n"
    "message C { option (r) = { n: [1, 2] r { n: 3 } }; option (i) = -1; option (r).n = 4; }\n";

static void no_leak(void) {
  Mem files[] = {{"s.proto", kShapes}, {"c.proto", kCustom}, {NULL, NULL}};
  for (long n = 1;; n++) {
    fail_reset(n);
    pc_Arena *a = pc_Arena_New(fail_alloc, NULL);
    pc_Error err;
    pc_Error_Init(&err);
    if (a != NULL) {
      pc_ProtoSet set = {0};
      pc_FileDesc *f = pc_LoadProto(a, &set, "c.proto", mem_source, files, &err);
      CHECK(f != NULL || strcmp(err.msg, "out of memory") == 0);
      if (f != NULL) CHECK(f->messages[1].options.size == 31); /* as protoc */
      pc_Arena_Free(a);
    }
    CHECK(fail_live == 0);
    if (!fail_hit) break;
  }
}

int main(void) {
  errors();
  import_errors();
  shapes();
  option_positions();
  builtins();
  no_leak();
  return CHECK_DONE();
}
