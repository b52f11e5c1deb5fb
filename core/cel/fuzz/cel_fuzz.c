/* libFuzzer target for CEL: any bytes as an expression, compiled against
 * variables of every kind (`this`, a message of cel_fuzz.proto's schema
 * below with every field kind and well-known type set; `s` a string; `l` a
 * list; `m` a map; `now` a timestamp), then evaluated twice within a small
 * budget. Compiling may fail only with a status; an evaluation must stay
 * within its budget, give the same result twice, and a result must read
 * back through the public API. Crashes, leaks, undefined behaviour, a
 * budget overrun and a difference between the two runs are findings. */
#include "base/arena.h"
#include "cel/cel.h"
#include "compiler/import.h"
#include "json/json.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char kProto[] =
    "syntax = \"proto3\";\n"
    "package f;\n"
    "import \"google/protobuf/any.proto\";\n"
    "import \"google/protobuf/duration.proto\";\n"
    "import \"google/protobuf/struct.proto\";\n"
    "import \"google/protobuf/timestamp.proto\";\n"
    "import \"google/protobuf/wrappers.proto\";\n"
    "enum E { Z = 0; A = 1; }\n"
    "message M {\n"
    "  int32 i32 = 1; int64 i64 = 2; uint32 u32 = 3; uint64 u64 = 4; double d = 5; float f = 6;\n"
    "  bool b = 7; string s = 8; bytes by = 9; E e = 10; M m = 11; repeated int64 ri = 12;\n"
    "  repeated string rs = 13; repeated M rm = 14; map<string, int64> msi = 15;\n"
    "  map<int64, M> mim = 16; google.protobuf.Timestamp ts = 17; google.protobuf.Duration du = "
    "18;\n"
    "  google.protobuf.Int64Value wi = 19; google.protobuf.StringValue ws = 20;\n"
    "  google.protobuf.Struct st = 21; google.protobuf.Value v = 22;\n"
    "  google.protobuf.ListValue lv = 23; google.protobuf.Any any = 24; optional int32 o = 25;\n"
    "  oneof k { string ks = 26; int64 ki = 27; }\n"
    "}\n";

static const char kJson[] =
    "{\"i32\": -5, \"i64\": \"9223372036854775807\", \"u32\": 7, \"u64\": \"18446744073709551615\","
    " \"d\": 2.5, \"f\": -0.5, \"b\": true, \"s\": \"h\xc3\xa9llo\", \"by\": \"AP8=\", \"e\": "
    "\"A\","
    " \"m\": {\"i32\": 1, \"m\": {\"s\": \"deep\"}}, \"ri\": [\"1\", \"-2\", \"3\"], \"rs\": "
    "[\"a\", \"\"],"
    " \"rm\": [{\"i32\": 2}, {}], \"msi\": {\"a\": \"1\", \"b\": \"2\"}, \"mim\": {\"-1\": {\"b\": "
    "true}},"
    " \"ts\": \"2009-02-13T23:31:30.5Z\", \"du\": \"-1.5s\", \"wi\": \"3\", \"ws\": \"w\","
    " \"st\": {\"a\": [1, {\"b\": null}], \"c\": \"d\"}, \"v\": [true, 1.5], \"lv\": [\"x\"],"
    " \"any\": {\"@type\": \"type.googleapis.com/f.M\", \"i32\": 9}, \"o\": 0, \"ks\": \"k\"}";

static pc_Pool *pool;
static pc_Arena *keep; /* the message's, as long as the process */
static const pc_MessageDef *type;
static pc_Message *msg;

static void setup(void) {
  if (pool != NULL) return;
  pool = pc_Pool_New(NULL, NULL);
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  keep = pc_Arena_New(NULL, NULL);
  pc_ImportCtx c;
  memset(&c, 0, sizeof c);
  c.arena = a;
  c.main_name = "f.proto";
  c.main_source = kProto;
  c.main_len = strlen(kProto);
  if (pool == NULL || a == NULL || keep == NULL || !pc_Import(pool, &c, "f.proto", NULL)) abort();
  pc_Arena_Free(a);
  type = pc_Pool_FindMessage(pool, "f.M");
  msg = type != NULL ? pc_Message_New(type, keep) : NULL;
  if (msg == NULL ||
      pc_Json_Read(kJson, strlen(kJson), msg, type, keep, NULL, NULL) != kPc_JsonStatus_Ok)
    abort();
}

/* A result's canonical walk: every element and entry read back. */
static void walk(pc_CelEval *ev, const pc_CelValue *v, int depth, unsigned long *sum) {
  *sum = *sum * 31 + (unsigned long)v->kind;
  if (depth > 300) return;
  if (v->kind == kPc_Cel_List) {
    for (size_t i = 0; i < pc_CelList_Size(v->v.list); i++) {
      pc_CelValue x;
      if (pc_CelEval_ListGet(ev, v->v.list, i, &x, NULL) != kPc_CelStatus_Ok) abort();
      walk(ev, &x, depth + 1, sum);
    }
  } else if (v->kind == kPc_Cel_Map) {
    for (size_t i = 0; i < pc_CelMap_Size(v->v.map); i++) {
      pc_CelValue k, x;
      if (pc_CelEval_MapEntry(ev, v->v.map, i, &k, &x, NULL) != kPc_CelStatus_Ok) abort();
      walk(ev, &k, depth + 1, sum);
      walk(ev, &x, depth + 1, sum);
    }
  } else if (v->kind == kPc_Cel_Int || v->kind == kPc_Cel_Uint) {
    *sum = *sum * 31 + (unsigned long)v->v.u;
  } else if (v->kind == kPc_Cel_String || v->kind == kPc_Cel_Bytes) {
    *sum = *sum * 31 + v->v.s.size;
  }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  setup();
  pc_CelVar vars[] = {{"this", type}, {"s", NULL}, {"l", NULL}, {"m", NULL}, {"now", NULL}};
  pc_CelEnv env;
  memset(&env, 0, sizeof env);
  env.pool = pool;
  env.container = "f";
  env.vars = vars;
  env.var_count = 5;
  env.max_length = 4096;
  pc_CelProgram *p;
  pc_Error err;
  pc_Error_Init(&err);
  pc_CelStatus st = pc_CelProgram_New(&env, (const char *)data, size, NULL, NULL, &p, &err);
  if (st == kPc_CelStatus_Ok) {
    if (p == NULL) abort();
  } else if (p != NULL || !err.set ||
             (st != kPc_CelStatus_Syntax && st != kPc_CelStatus_Compile &&
              st != kPc_CelStatus_Limit)) {
    abort();
  }
  if (p == NULL) return 0;
  static const pc_CelLimits limits = {20000, 2000, (size_t)1 << 20, (size_t)1 << 16};
  unsigned long sums[2] = {0, 0};
  pc_CelStatus sts[2];
  for (int round = 0; round < 2; round++) {
    pc_CelEval *ev = pc_CelEval_New(NULL, NULL);
    if (ev == NULL) abort();
    pc_CelEval_SetLimits(ev, &limits);
    pc_CelValue args[5], out;
    memset(args, 0, sizeof args);
    if (pc_CelEval_MessageValue(ev, msg, type, &args[0], NULL) != kPc_CelStatus_Ok) abort();
    args[1].kind = kPc_Cel_String;
    args[1].v.s.data = "ab\xc3\xa9";
    args[1].v.s.size = 4;
    pc_CelValue items[3];
    memset(items, 0, sizeof items);
    items[0].kind = kPc_Cel_Int;
    items[0].v.i = 1;
    items[1] = args[1];
    items[2].kind = kPc_Cel_Double;
    items[2].v.d = 0.5;
    args[2].kind = kPc_Cel_List;
    args[2].v.list = pc_CelEval_NewList(ev, items, 3);
    if (args[2].v.list == NULL) abort();
    if (pc_CelEval_FieldValue(ev, msg, pc_MessageDef_FindFieldByName(type, "msi", 3), &args[3],
                              NULL) != kPc_CelStatus_Ok)
      abort();
    args[4].kind = kPc_Cel_Timestamp;
    args[4].v.t.seconds = 1700000000;
    pc_Error_Init(&err);
    sts[round] = pc_CelProgram_Eval(p, ev, args, &out, &err);
    pc_CelLimits used;
    pc_CelEval_Used(ev, &used);
    if (sts[round] == kPc_CelStatus_Ok) {
      if (used.steps > limits.steps || used.iterations > limits.iterations ||
          used.bytes > limits.bytes || used.max_size > limits.max_size)
        abort(); /* over the budget, and still an answer */
      walk(ev, &out, 0, &sums[round]);
    } else if (!err.set || sts[round] == kPc_CelStatus_Syntax ||
               sts[round] == kPc_CelStatus_Compile) {
      abort();
    }
    pc_CelEval_Free(ev);
  }
  if (sts[0] != sts[1] || sums[0] != sums[1]) abort();
  pc_CelProgram_Free(p);
  return 0;
}
