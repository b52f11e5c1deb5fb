/* Messages as CEL reads them (ctest cel.message), over a schema compiled
 * here with the core's .proto compiler: every field kind, proto2 and proto3
 * presence for has(), oneofs, defaults, repeated fields and maps (keys of
 * every kind, heterogeneous numeric lookups), the well-known types
 * (Timestamp, Duration, wrappers, Struct, Value, ListValue, Any), enum
 * constants and type names from the pool, fields found while compiling and
 * the fallback when a value's type is not the declared one, getField, and
 * the binding API (pc_CelEval_MessageValue, FieldValue, ElemValue). */
#include "base/arena.h"
#include "cel/test_internal.h"
#include "compiler/import.h"
#include "json/json.h"
#include "testing/check.h"

#include <stdio.h>
#include <string.h>

static const char kProto[] =
    "syntax = \"proto3\";\n"
    "package t;\n"
    "import \"google/protobuf/any.proto\";\n"
    "import \"google/protobuf/duration.proto\";\n"
    "import \"google/protobuf/struct.proto\";\n"
    "import \"google/protobuf/timestamp.proto\";\n"
    "import \"google/protobuf/wrappers.proto\";\n"
    "import \"p2.proto\";\n"
    "enum Color { NONE = 0; RED = 1; BLUE = 2; }\n"
    "message Inner { int32 id = 1; string name = 2; }\n"
    "message Msg {\n"
    "  int32 i32 = 1; int64 i64 = 2; uint32 u32 = 3; uint64 u64 = 4; sint32 s32 = 5;\n"
    "  sint64 s64 = 6; fixed32 f32 = 7; fixed64 f64 = 8; sfixed32 sf32 = 9; sfixed64 sf64 = 10;\n"
    "  float fl = 11; double db = 12; bool b = 13; string s = 14; bytes by = 15;\n"
    "  Color color = 16; Inner inner = 17; repeated int64 ri64 = 18; repeated Inner rinner = 19;\n"
    "  map<string, int64> msi = 20; map<int32, string> mis = 21; map<uint64, bool> mub = 22;\n"
    "  map<bool, Inner> mbi = 23; map<sint64, string> mss = 24;\n"
    "  google.protobuf.Timestamp ts = 25; google.protobuf.Duration dur = 26;\n"
    "  google.protobuf.Int64Value wi64 = 27; google.protobuf.StringValue ws = 28;\n"
    "  google.protobuf.FloatValue wf = 29; google.protobuf.UInt32Value wu32 = 30;\n"
    "  google.protobuf.Struct st = 31; google.protobuf.Value val = 32;\n"
    "  google.protobuf.ListValue lv = 33; google.protobuf.Any any = 34;\n"
    "  optional int32 opt = 35; oneof kind { string o_s = 36; Inner o_m = 37; }\n"
    "  Msg child = 38; repeated google.protobuf.Timestamp rts = 39; repeated Color rcolor = 40;\n"
    "  p2.Old old = 41; repeated google.protobuf.Value rval = 42;\n"
    "}\n"
    "message Other { string pad = 1; string s = 2; }\n";

static const char kProto2[] = "syntax = \"proto2\";\n"
                              "package p2;\n"
                              "message Old {\n"
                              "  optional int32 a = 1 [default = 7];\n"
                              "  optional string b = 2 [default = \"dflt\"];\n"
                              "  optional int32 c = 3;\n"
                              "  repeated int32 r = 4;\n"
                              "  optional Old sub = 5;\n"
                              "  extensions 100 to 200;\n"
                              "}\n"
                              "extend Old { optional int32 ext = 100; }\n";

static pc_Pool *pool;
static const pc_MessageDef *msg_type, *other_type, *old_type;
static pc_Arena *arena;

static int source(void *ud, const char *name, const char **src, size_t *len, pc_Error *err) {
  (void)ud;
  (void)err;
  if (strcmp(name, "p2.proto") == 0) {
    *src = kProto2;
    *len = strlen(kProto2);
    return 1;
  }
  return 0;
}

static void load(void) {
  pool = pc_Pool_New(NULL, NULL);
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_ImportCtx c;
  memset(&c, 0, sizeof c);
  c.arena = a;
  pc_Error err;
  pc_Error_Init(&err);
  c.main_name = "p2.proto";
  c.main_source = kProto2;
  c.main_len = strlen(kProto2);
  CHECK(pc_Import(pool, &c, "p2.proto", &err));
  c.main_name = "t.proto";
  c.main_source = kProto;
  c.main_len = strlen(kProto);
  CHECK(pc_Import(pool, &c, "t.proto", &err));
  if (err.set) fprintf(stderr, "%s\n", err.msg);
  pc_Arena_Free(a);
  (void)source;
  msg_type = pc_Pool_FindMessage(pool, "t.Msg");
  other_type = pc_Pool_FindMessage(pool, "t.Other");
  old_type = pc_Pool_FindMessage(pool, "p2.Old");
  CHECK(msg_type != NULL && other_type != NULL && old_type != NULL);
}

static pc_Message *from_json(const pc_MessageDef *m, const char *json) {
  pc_Message *msg = pc_Message_New(m, arena);
  pc_Error err;
  pc_Error_Init(&err);
  if (pc_Json_Read(json, strlen(json), msg, m, arena, NULL, &err) != kPc_JsonStatus_Ok)
    fprintf(stderr, "%s: %s\n", json, err.msg);
  return msg;
}

/* 'expr' with `this` (declared of type 'decl') bound to the message of
 * type 'm' that 'json' describes. */
static const char *eval_msg(const pc_MessageDef *decl, const pc_MessageDef *m, const char *json,
                            const char *expr) {
  pc_CelVar var = {"this", decl};
  pc_CelEnv env;
  memset(&env, 0, sizeof env);
  env.pool = pool;
  env.container = "t";
  env.vars = &var;
  env.var_count = 1;
  pc_CelValue v;
  memset(&v, 0, sizeof v);
  v.kind = kPc_Cel_Message;
  v.v.m.msg = from_json(m, json);
  v.v.m.def = m;
  return eval_text_env(&env, expr, &v);
}

static void expect(const char *json, const char *expr, const char *want) {
  const char *got = eval_msg(msg_type, msg_type, json, expr);
  int ok = strncmp(want, "error", 5) == 0 ? strncmp(got, want, strlen(want)) == 0
                                          : strcmp(got, want) == 0;
  if (!ok) fprintf(stderr, "%s  [%s]\n  got:  %s\n  want: %s\n", expr, json, got, want);
  CHECK(ok);
}

static const char kFull[] =
    "{\"i32\": -1, \"i64\": \"-9223372036854775808\", \"u32\": 4294967295, \"u64\": "
    "\"18446744073709551615\","
    " \"s32\": -2, \"s64\": \"-3\", \"f32\": 4, \"f64\": \"5\", \"sf32\": -6, \"sf64\": \"-7\","
    " \"fl\": 1.5, \"db\": 2.25, \"b\": true, \"s\": \"h\xc3\xa9\", \"by\": \"/w==\", \"color\": "
    "\"BLUE\","
    " \"inner\": {\"id\": 9, \"name\": \"in\"}, \"ri64\": [\"1\", \"2\", \"3\"],"
    " \"rinner\": [{\"id\": 1}, {\"id\": 1}], \"msi\": {\"a\": \"1\", \"b\": \"2\"},"
    " \"mis\": {\"-1\": \"m\", \"7\": \"s\"}, \"mub\": {\"18446744073709551615\": true},"
    " \"mbi\": {\"true\": {\"id\": 3}}, \"mss\": {\"-5\": \"neg\"},"
    " \"ts\": \"2009-02-13T23:31:30.5Z\", \"dur\": \"-1.5s\", \"wi64\": \"0\", \"ws\": \"w\","
    " \"wf\": 0.5, \"wu32\": 3,"
    " \"st\": {\"a\": 1, \"n\": null, \"l\": [true, \"x\"], \"o\": {\"k\": \"v\"}},"
    " \"val\": {\"x\": [1, 2]}, \"lv\": [1, \"a\", null],"
    " \"any\": {\"@type\": \"type.googleapis.com/t.Inner\", \"id\": 4},"
    " \"opt\": 0, \"oS\": \"one\", \"rts\": [\"1970-01-01T00:00:01Z\"], \"rcolor\": [\"RED\", 5],"
    " \"old\": {\"a\": 7, \"r\": [1]}, \"rval\": [1, \"a\", true, null, {\"k\": []}]}";

static void scalars(void) {
  expect(kFull, "[this.i32, this.i64, this.s32, this.s64, this.sf32, this.sf64]",
         "[-1, -9223372036854775808, -2, -3, -6, -7]");
  expect(kFull, "[this.u32, this.u64, this.f32, this.f64]",
         "[4294967295u, 18446744073709551615u, 4u, 5u]");
  expect(kFull, "[this.fl, this.db, this.b, this.s, this.by]",
         "[1.5, 2.25, true, \"h\xc3\xa9\", b\"ff\"]");
  expect(kFull, "this.s.size()", "2");
  expect(kFull, "this.color", "2");
  expect(kFull,
         "this.color == t.Color.BLUE && this.color == Color.BLUE && this.color == .t.Color.BLUE",
         "true");
  expect(kFull, "type(this.color)", "type(int)");
  expect(kFull, "type(this) == t.Msg && type(this.inner) == Inner", "true");
  expect(kFull, "type(this)", "type(t.Msg)");
  expect(kFull, "t.Color", "type(t.Color)");
  expect(kFull, "t.Color.GREEN",
         "error: compile error: 1:1: undeclared reference to 't.Color.GREEN'");
  expect(kFull, "t.Color.RED.x",
         "error: compile error: 1:1: undeclared reference to 't.Color.RED.x'");
  /* proto3 defaults, and presence */
  expect("{}", "[this.i32, this.u64, this.db, this.b, this.s, this.by, this.color]",
         "[0, 0u, 0.0, false, \"\", b\"\", 0]");
  expect("{}", "has(this.i32) || has(this.s) || has(this.inner) || has(this.ri64) || has(this.msi)",
         "false");
  expect(kFull,
         "has(this.i32) && has(this.s) && has(this.inner) && has(this.ri64) && has(this.msi)",
         "true");
  expect("{\"i32\": 0, \"opt\": 0}", "[has(this.i32), has(this.opt), this.opt]",
         "[false, true, 0]");
  expect("{}", "has(this.opt)", "false");
  /* oneofs */
  expect(kFull, "[has(this.o_s), has(this.o_m), this.o_s, this.o_m.id]",
         "[true, false, \"one\", 0]");
  expect("{\"oM\": {}}", "[has(this.o_s), has(this.o_m)]", "[false, true]");
  /* proto2: presence is set-or-not, defaults are the declared ones */
  expect(kFull, "[has(this.old.a), this.old.a, has(this.old.b), this.old.b, has(this.old.c)]",
         "[true, 7, false, \"dflt\", false]");
  expect("{}", "[this.old.a, this.old.b, this.old.sub.sub.a]", "[7, \"dflt\", 7]");
  /* fields a type lacks: found while compiling */
  expect(kFull, "this.nope", "error: compile error: 1:6: no such field 'nope' in t.Msg");
  expect(kFull, "has(this.inner.nope)",
         "error: compile error: 1:1: no such field 'nope' in t.Inner");
  expect(kFull, "this.rinner.all(x, x.nope == 1)",
         "error: compile error: 1:22: no such field 'nope' in t.Inner");
  expect(kFull, "dyn(this).nope", "error: evaluation error: 1:11: no such field 'nope' in t.Msg");
  expect(kFull, "getField(this, 'i32')", "-1");
  expect(kFull, "getField(this, 'ri64')", "[1, 2, 3]");
  expect(kFull, "getField(this, 'wi64')", "0");
  expect("{}", "getField(this, 'wi64')", "null");
  expect("{}", "getField(this, 'inner')", "message(t.Inner)");
  expect(kFull, "getField(this, 'nope')",
         "error: evaluation error: 1:1: field nope not found on t.Msg");
}

static void sub_messages(void) {
  expect(kFull, "this.inner.id + this.inner.name.size()", "11");
  expect("{}", "this.inner.id", "0");
  expect("{}", "this.child.child.child.inner.name", "\"\"");
  expect("{}", "has(this.child.child)", "false");
  expect("{\"child\": {\"child\": {}}}", "has(this.child.child)", "true");
  expect(kFull, "this.inner == this.inner", "true");
  expect(kFull, "this.rinner[0] == this.rinner[1]", "true");
  expect(kFull, "this.rinner[0] == this.inner", "false");
  expect("{}", "this.inner == this.child.inner", "true"); /* both empty */
  expect("{\"inner\": {}}", "this.inner == this.child.inner", "true");
  expect("{\"inner\": {\"id\": 1}}", "this.inner == this.child.inner", "false");
  expect(kFull, "this.inner == this.old", "false");
  expect(kFull, "this == this", "true");
}

static void repeated_and_maps(void) {
  expect(kFull, "[this.ri64, size(this.ri64), this.ri64[1], 3 in this.ri64, 3.0 in this.ri64]",
         "[[1, 2, 3], 3, 2, true, true]");
  expect(kFull, "this.ri64.map(x, x * 2)", "[2, 4, 6]");
  expect(kFull, "this.ri64 == [1, 2, 3] && this.ri64 != [1, 2]", "true");
  expect(kFull, "this.ri64[3]",
         "error: evaluation error: 1:10: invalid_argument: index 3 out of range");
  expect(kFull, "this.rinner.map(x, x.id)", "[1, 1]");
  expect(kFull, "this.rcolor", "[1, 5]");
  expect(kFull, "this.rts[0]", "timestamp(1.000000000)");
  expect(kFull, "this.rval", "[1.0, \"a\", true, null, {\"k\": []}]");
  expect("{}", "[this.ri64, this.rinner, this.msi]", "[[], [], {}]");
  expect(kFull, "this.msi", "{\"a\": 1, \"b\": 2}");
  expect(kFull, "[this.msi.a, this.msi['b'], 'a' in this.msi, 'z' in this.msi, has(this.msi.z)]",
         "[1, 2, true, false, false]");
  expect(kFull, "this.msi.z", "error: evaluation error: 1:10: no such key: 'z'");
  expect(kFull,
         "[this.mis[-1], this.mis[7u], this.mis[7.0], -1 in this.mis, 2147483648 in this.mis]",
         "[\"m\", \"s\", \"s\", true, false]");
  expect(kFull, "this.mis[1.5]", "error: evaluation error: 1:9: no such key");
  expect(kFull, "[this.mub[18446744073709551615u], -1 in this.mub, 'a' in this.mub]",
         "[true, false, false]");
  expect(kFull, "[this.mbi[true].id, false in this.mbi]", "[3, false]");
  expect(kFull, "[this.mss[-5], this.mss[-5.0]]", "[\"neg\", \"neg\"]");
  expect(kFull, "this.msi.map(k, k)", "[\"a\", \"b\"]");
  expect(kFull, "this.msi.all(k, this.msi[k] > 0)", "true");
  expect(kFull, "this.msi == {'b': 2, 'a': 1}", "true");
  expect(kFull, "this.msi == {'b': 2, 'a': 1.0}", "true");
  expect(kFull, "this.mis == {-1: 'm', 7: 's'}", "true");
  expect(kFull, "size(this.msi) + this.mis.size()", "4");
}

static void well_known_types(void) {
  expect(kFull, "this.ts", "timestamp(1234567890.500000000)");
  expect(kFull, "this.dur", "duration(\"-1.500000000s\")");
  expect(kFull, "this.ts + this.dur", "timestamp(1234567889.000000000)");
  expect(kFull, "this.ts.getFullYear()", "2009");
  expect("{}", "[this.ts, this.dur]", "[timestamp(0.000000000), duration(\"0.000000000s\")]");
  expect(kFull, "[this.wi64, this.ws, this.wf, this.wu32]", "[0, \"w\", 0.5, 3u]");
  expect("{}", "[this.wi64, this.ws, this.wf, this.wu32]", "[null, null, null, null]");
  expect("{}", "this.wi64 == null && !has(this.wi64)", "true");
  expect(kFull, "this.wi64 == null || has(this.wi64) && this.wi64 + 1 == 1", "true");
  expect(
      "{}", "this.wi64 + 1",
      "error: evaluation error: 1:11: no matching overload for '_+_' applied to (null_type, int)");
  expect(kFull, "this.st",
         "{\"a\": 1.0, \"l\": [true, \"x\"], \"n\": null, \"o\": {\"k\": \"v\"}}");
  expect(kFull, "[this.st.a, this.st.o.k, this.st['l'][1], has(this.st.n), has(this.st.z)]",
         "[1.0, \"v\", \"x\", true, false]");
  expect(kFull, "this.val", "{\"x\": [1.0, 2.0]}");
  expect(kFull, "this.lv", "[1.0, \"a\", null]");
  expect("{}", "[this.st, this.val, this.lv]", "[{}, null, []]");
  expect("{\"val\": \"s\"}", "this.val", "\"s\"");
  expect("{\"val\": false}", "this.val", "false");
  expect("{\"val\": 2.5}", "this.val + 1.0", "3.5");
  expect("{\"val\": null}", "this.val == null", "true");
  expect(kFull, "this.any", "message(t.Inner)");
  expect(kFull, "this.any.id", "4");
  expect(kFull, "this.any == this.inner", "false");
  expect(
      "{\"any\": {\"@type\": \"type.googleapis.com/google.protobuf.Duration\", \"value\": \"2s\"}}",
      "this.any", "duration(\"2.000000000s\")");
  expect("{\"any\": {\"@type\": \"type.googleapis.com/google.protobuf.Int64Value\", \"value\": "
         "\"7\"}}",
         "this.any + 1", "8");
  expect("{\"any\": {\"@type\": \"type.googleapis.com/google.protobuf.Struct\", \"value\": {\"a\": "
         "1}}}",
         "this.any.a", "1.0");
  expect("{}", "this.any",
         "error: evaluation error: 1:6: google.protobuf.Any with the type URL ''");
  expect("{}", "has(this.any) || this.s == ''", "true");
}

/* A value whose type is not the one declared: fields are then found by
 * name (never read at the declared type's offsets). */
static void wrong_type(void) {
  const char *got = eval_msg(msg_type, other_type, "{\"pad\": \"p\", \"s\": \"other\"}", "this.s");
  CHECK(strcmp(got, "\"other\"") == 0);
  got = eval_msg(msg_type, other_type, "{}", "has(this.s)");
  CHECK(strcmp(got, "false") == 0);
  got = eval_msg(msg_type, other_type, "{}", "this.i32");
  CHECK(strcmp(got, "error: evaluation error: 1:6: no such field 'i32' in t.Other") == 0);
  /* an undeclared type reads every field by name */
  got = eval_msg(NULL, msg_type, kFull, "this.inner.name + this.s");
  CHECK(strcmp(got, "\"inh\xc3\xa9\"") == 0);
}

static const char *text_of(tbuf *b, pc_CelEval *ev, const pc_CelValue *v) {
  b->n = 0;
  tb_str(b, "");
  tb_value(b, ev, v);
  return b->s != NULL ? b->s : "";
}

static void binding_api(void) {
  pc_Message *msg = from_json(msg_type, kFull);
  pc_CelEval *ev = pc_CelEval_New(NULL, NULL);
  pc_CelValue v;
  pc_Error err;
  pc_Error_Init(&err);
  tbuf b = {0};
#define FIELD(name) pc_MessageDef_FindFieldByName(msg_type, name, strlen(name))
#define TEXT(v)     text_of(&b, ev, &(v))
  CHECK(pc_CelEval_FieldValue(ev, msg, FIELD("ri64"), &v, &err) == kPc_CelStatus_Ok);
  CHECK(strcmp(TEXT(v), "[1, 2, 3]") == 0);
  CHECK(pc_CelEval_FieldValue(ev, msg, FIELD("ws"), &v, &err) == kPc_CelStatus_Ok);
  CHECK(strcmp(TEXT(v), "\"w\"") == 0);
  CHECK(pc_CelEval_FieldValue(ev, NULL, FIELD("ws"), &v, &err) == kPc_CelStatus_Ok &&
        v.kind == kPc_Cel_Null);
  CHECK(pc_CelEval_FieldValue(ev, msg, FIELD("st"), &v, &err) == kPc_CelStatus_Ok &&
        v.kind == kPc_Cel_Map);
  CHECK(pc_CelEval_FieldValue(ev, msg, FIELD("color"), &v, &err) == kPc_CelStatus_Ok);
  CHECK(v.kind == kPc_Cel_Int && v.v.i == 2);
  /* the elements of a repeated field and of a map, as protovalidate's
     items, keys and values rules see them */
  const pc_FieldDef *rinner = FIELD("rinner"), *mis = FIELD("mis");
  pc_Value arr = pc_Message_Get(msg, rinner);
  CHECK(pc_CelEval_ElemValue(ev, rinner, pc_Array_Get(arr.a, 0, kPc_Slot_Message), &v, &err) ==
        kPc_CelStatus_Ok);
  CHECK(v.kind == kPc_Cel_Message && strcmp(pc_CelValue_TypeName(&v), "t.Inner") == 0);
  pc_Value map = pc_Message_Get(msg, mis);
  CHECK(pc_CelEval_ElemValue(ev, pc_FieldDef_MapKey(mis), map.map->entries[0].key, &v, &err) ==
        kPc_CelStatus_Ok);
  CHECK(v.kind == kPc_Cel_Int && v.v.i == -1);
  CHECK(pc_CelEval_ElemValue(ev, pc_FieldDef_MapValue(mis), map.map->entries[0].value, &v, &err) ==
        kPc_CelStatus_Ok);
  CHECK(strcmp(TEXT(v), "\"m\"") == 0);
  /* a well-known type as a whole */
  const pc_FieldDef *ts = FIELD("ts");
  CHECK(pc_CelEval_MessageValue(ev, pc_Message_Get(msg, ts).m, ts->message, &v, &err) ==
        kPc_CelStatus_Ok);
  CHECK(v.kind == kPc_Cel_Timestamp && v.v.t.seconds == 1234567890 && v.v.t.nanos == 500000000);
  CHECK(strcmp(pc_CelValue_TypeName(&v), "google.protobuf.Timestamp") == 0);
  CHECK(pc_CelEval_MessageValue(ev, NULL, FIELD("any")->message, &v, &err) == kPc_CelStatus_Error);
  CHECK(strcmp(err.msg, "google.protobuf.Any with the type URL ''") == 0);
  /* a raw well-known message bound to a variable reads as CEL reads it */
  pc_CelVar var = {"d", NULL};
  pc_CelEnv env;
  memset(&env, 0, sizeof env);
  env.vars = &var;
  env.var_count = 1;
  memset(&v, 0, sizeof v);
  v.kind = kPc_Cel_Message;
  v.v.m.msg = pc_Message_Get(msg, FIELD("dur")).m;
  v.v.m.def = FIELD("dur")->message;
  CHECK(strcmp(eval_text_env(&env, "d + duration('2s')", &v), "duration(\"0.500000000s\")") == 0);
  /* an extension through the field API */
  pc_Message *old = from_json(old_type, "{\"[p2.ext]\": 5}");
  const pc_FieldDef *ext = pc_Pool_FindExtension(pool, "p2.ext");
  CHECK(ext != NULL && pc_CelEval_FieldValue(ev, old, ext, &v, &err) == kPc_CelStatus_Ok);
  CHECK(v.kind == kPc_Cel_Int && v.v.i == 5);
  free(b.s);
  pc_CelEval_Free(ev);
}

int main(void) {
  arena = pc_Arena_New(NULL, NULL);
  load();
  scalars();
  sub_messages();
  repeated_and_maps();
  well_known_types();
  wrong_type();
  binding_api();
  pc_Arena_Free(arena);
  pc_Pool_Free(pool);
  return CHECK_DONE();
}
