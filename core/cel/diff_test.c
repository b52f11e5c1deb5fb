/* The differential test of the CEL evaluator (ctest cel.diff) against
 * protovalidate-es's CEL (@bufbuild/cel, with protovalidate's functions and
 * the strings extension, as protovalidate-es sets it up) and against the
 * expected values of cel-spec's conformance suite (@bufbuild/cel-spec):
 * spec/node/cel_diff.mjs writes a seeded corpus of expressions (with
 * bindings: CEL literals, or messages of the schema below as JSON), this
 * program evaluates each one, and the script compares, listing every
 * difference with its reason and failing on one it cannot explain.
 * Without node or the npm packages (.ci/install-deps runs npm ci) the test
 * is skipped, or fails when CI is set.
 *
 *   PC_DIFF_SEED=n   another seed (the default is fixed, so runs repeat)
 *   PC_DIFF_COUNT=n  generated cases (default 4000) */
#include "base/arena.h"
#include "cel/test_internal.h"
#include "compiler/import.h"
#include "json/json.h"
#include "testing/check.h"
#include "testing/corpus.h"
#include "wire/descriptor_set.h"
#include "wire/descriptor_write.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOOL PC_SOURCE_DIR "/spec/node/cel_diff.mjs"

/* The messages the corpus binds (spec/node/cel_diff.mjs knows them). */
static const char kProto[] =
    "syntax = \"proto3\";\n"
    "package cel.test;\n"
    "import \"google/protobuf/any.proto\";\n"
    "import \"google/protobuf/duration.proto\";\n"
    "import \"google/protobuf/struct.proto\";\n"
    "import \"google/protobuf/timestamp.proto\";\n"
    "import \"google/protobuf/wrappers.proto\";\n"
    "enum Color { COLOR_UNSPECIFIED = 0; RED = 1; GREEN = 2; BLUE = 3; }\n"
    "message Inner { int32 id = 1; string name = 2; repeated string tags = 3; }\n"
    "message Msg {\n"
    "  int32 i32 = 1; int64 i64 = 2; uint32 u32 = 3; uint64 u64 = 4; sint32 s32 = 5;\n"
    "  sint64 s64 = 6; fixed32 f32 = 7; fixed64 f64 = 8; sfixed32 sf32 = 9; sfixed64 sf64 = 10;\n"
    "  float fl = 11; double db = 12; bool b = 13; string s = 14; bytes by = 15;\n"
    "  Color color = 16; Inner inner = 17;\n"
    "  repeated int64 ri64 = 18; repeated string rs = 19; repeated Inner rinner = 20;\n"
    "  repeated double rdb = 21; repeated bytes rby = 22; repeated Color rcolor = 23;\n"
    "  map<string, int64> msi = 24; map<int32, string> mis = 25; map<bool, Inner> mbi = 26;\n"
    "  map<uint64, double> mud = 27;\n"
    "  google.protobuf.Timestamp ts = 28; google.protobuf.Duration dur = 29;\n"
    "  google.protobuf.Int64Value wi64 = 30; google.protobuf.StringValue ws = 31;\n"
    "  google.protobuf.BoolValue wb = 32; google.protobuf.DoubleValue wd = 33;\n"
    "  google.protobuf.UInt32Value wu32 = 34; google.protobuf.BytesValue wby = 35;\n"
    "  google.protobuf.FloatValue wf = 36; google.protobuf.Int32Value wi32 = 37;\n"
    "  google.protobuf.UInt64Value wu64 = 38;\n"
    "  google.protobuf.Struct st = 39; google.protobuf.Value val = 40;\n"
    "  google.protobuf.ListValue lv = 41; google.protobuf.Any any = 42;\n"
    "  optional int32 opt = 43;\n"
    "  oneof kind { string o_s = 44; int64 o_i = 45; Inner o_m = 46; }\n"
    "  repeated google.protobuf.Timestamp rts = 47; Msg child = 48;\n"
    "}\n"
    /* what protovalidate's rules messages look like, for its expressions */
    "message Rules {\n"
    "  optional int64 const = 1; optional int64 lt = 2; optional int64 lte = 3;\n"
    "  optional int64 gt = 4; optional int64 gte = 5; repeated int64 in = 6;\n"
    "  repeated int64 not_in = 7; optional double dlt = 8; optional double dgt = 9;\n"
    "  optional bool finite = 10; optional uint64 min_len = 11; optional uint64 max_len = 12;\n"
    "  optional string pattern = 13; optional string prefix = 14; optional string suffix = 15;\n"
    "  optional string contains = 16; optional bool email = 17; optional bool hostname = 18;\n"
    "  optional bool ip = 19; optional bool uri = 20; optional bool unique = 21;\n"
    "  optional google.protobuf.Duration within = 22; optional bool strict = 23;\n"
    "  optional int32 well_known_regex = 24; repeated string sin = 25;\n"
    "}\n";

typedef struct {
  char *fields[32];
  int n;
} Row;

/* Splits a line at tabs and undoes the escapes (\\ \t \n \r). */
static void split_row(char *line, Row *r) {
  r->n = 0;
  char *f = line;
  for (;;) {
    char *tab = strchr(f, '\t');
    if (tab != NULL) *tab = '\0';
    if (r->n < 32) r->fields[r->n++] = f;
    char *o = f;
    for (char *i = f; *i; i++) {
      if (*i == '\\' && i[1] != '\0') {
        i++;
        *o++ = *i == 't' ? '\t' : *i == 'n' ? '\n' : *i == 'r' ? '\r' : *i;
      } else {
        *o++ = *i;
      }
    }
    *o = '\0';
    if (tab == NULL) break;
    f = tab + 1;
  }
}

static void put_escaped(FILE *o, const char *s) {
  for (; *s; s++) {
    if (*s == '\\')
      fputs("\\\\", o);
    else if (*s == '\t')
      fputs("\\t", o);
    else if (*s == '\n')
      fputs("\\n", o);
    else if (*s == '\r')
      fputs("\\r", o);
    else
      fputc(*s, o);
  }
}

static pc_Pool *load_schema(void) {
  pc_Pool *pool = pc_Pool_New(NULL, NULL);
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_ImportCtx c;
  memset(&c, 0, sizeof c);
  c.arena = a;
  c.main_name = "cel_test.proto";
  c.main_source = kProto;
  c.main_len = strlen(kProto);
  pc_Error err;
  pc_Error_Init(&err);
  if (!pc_Import(pool, &c, "cel_test.proto", &err)) {
    fprintf(stderr, "the test schema: %s\n", err.msg);
    CHECK(0);
  }
  pc_Arena_Free(a);
  return pool;
}

/* The pool's files as a FileDescriptorSet, imports first. */
static int write_descriptors(const pc_Pool *pool, const char *path) {
  pc_WireWriter w;
  pc_WireWriter_Init(&w, NULL, NULL);
  int ok = 1;
  for (size_t i = pc_Pool_FileCount(pool); i-- > 0 && ok;) {
    size_t before = pc_WireWriter_Size(&w);
    ok = pc_FileDesc_Write(pc_Pool_File(pool, i)->desc, &w, NULL) &&
         pc_WireWriter_PutVarint(&w, pc_WireWriter_Size(&w) - before) &&
         pc_WireWriter_PutTag(&w, 1, kPc_Wire_Len);
  }
  FILE *f = ok ? fopen(path, "wb") : NULL;
  if (f != NULL) {
    ok = fwrite(pc_WireWriter_Data(&w), 1, pc_WireWriter_Size(&w), f) == pc_WireWriter_Size(&w);
    ok = fclose(f) == 0 && ok;
  } else {
    ok = 0;
  }
  pc_WireWriter_Free(&w);
  return ok;
}

/* A binding: "expr" (a CEL literal, evaluated here) or "msg:<type>" (JSON of
 * a message of the schema). 0 with 'why' when it cannot be made. */
static int bind(pc_CelEval *ev, pc_Arena *a, const pc_Pool *pool, const char *kind,
                const char *data, pc_CelValue *out, pc_CelProgram **prog, char *why, size_t room) {
  pc_Error err;
  pc_Error_Init(&err);
  if (strcmp(kind, "expr") == 0) {
    pc_CelEnv env;
    memset(&env, 0, sizeof env);
    env.pool = pool;
    /* the value may point at the program's literals: it lives as long */
    if (pc_CelProgram_New(&env, data, strlen(data), NULL, NULL, prog, &err) != kPc_CelStatus_Ok) {
      snprintf(why, room, "binding: %s", err.msg);
      return 0;
    }
    int ok = pc_CelProgram_Eval(*prog, ev, NULL, out, &err) == kPc_CelStatus_Ok;
    if (!ok) snprintf(why, room, "binding: %s", err.msg);
    return ok;
  }
  if (strncmp(kind, "msg:", 4) == 0) {
    const pc_MessageDef *m = pc_Pool_FindMessage(pool, kind + 4);
    if (m == NULL) {
      snprintf(why, room, "binding: no type %s", kind + 4);
      return 0;
    }
    pc_Message *msg = pc_Message_New(m, a);
    if (pc_Json_Read(data, strlen(data), msg, m, a, NULL, &err) != kPc_JsonStatus_Ok) {
      snprintf(why, room, "binding: %s", err.msg);
      return 0;
    }
    if (pc_CelEval_MessageValue(ev, msg, m, out, &err) != kPc_CelStatus_Ok) {
      snprintf(why, room, "binding: %s", err.msg);
      return 0;
    }
    return 1;
  }
  snprintf(why, room, "binding: unknown kind %s", kind);
  return 0;
}

/* One case: "id, container, expr, n, (name, kind, data) * n" -> the
 * canonical text of the result, or "error <message>". */
static void run_case(const pc_Pool *pool, Row *r, tbuf *out) {
  out->n = 0;
  tb_str(out, "");
  if (r->n < 4) {
    tb_str(out, "bad case");
    return;
  }
  int nvars = atoi(r->fields[3]);
  if (nvars < 0 || nvars > 8 || r->n < 4 + 3 * nvars) {
    tb_str(out, "bad case");
    return;
  }
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_CelEval *ev = pc_CelEval_New(NULL, NULL);
  pc_CelVar vars[8];
  pc_CelValue vals[8];
  pc_CelProgram *progs[8] = {NULL};
  char why[PC_ERROR_MAX + 32];
  int ok = 1;
  for (int i = 0; i < nvars && ok; i++) {
    const char *kind = r->fields[5 + 3 * i];
    vars[i].name = r->fields[4 + 3 * i];
    vars[i].type = strncmp(kind, "msg:", 4) == 0 ? pc_Pool_FindMessage(pool, kind + 4) : NULL;
    ok = bind(ev, a, pool, kind, r->fields[6 + 3 * i], &vals[i], &progs[i], why, sizeof why);
  }
  if (!ok) {
    tb_str(out, "error ");
    tb_str(out, why);
  } else {
    pc_CelEnv env;
    memset(&env, 0, sizeof env);
    env.pool = pool;
    env.container = r->fields[1];
    env.vars = vars;
    env.var_count = (size_t)nvars;
    const char *text = eval_text_env(&env, r->fields[2], vals);
    if (strncmp(text, "error: ", 7) == 0) {
      tb_str(out, "error ");
      tb_str(out, text + 7);
    } else {
      tb_str(out, text);
    }
  }
  for (int i = 0; i < nvars; i++) pc_CelProgram_Free(progs[i]);
  pc_CelEval_Free(ev);
  pc_Arena_Free(a);
}

int main(void) {
  if (access("/usr/bin/node", X_OK) != 0 && system("command -v node >/dev/null 2>&1") != 0)
    return corpus_missing("node");
  if (access(PC_SOURCE_DIR "/node_modules/@bufbuild/cel/package.json", R_OK) != 0)
    return corpus_missing("the npm package @bufbuild/cel (.ci/install-deps runs npm ci)");
  const char *seed = getenv("PC_DIFF_SEED") ? getenv("PC_DIFF_SEED") : "36";
  const char *count = getenv("PC_DIFF_COUNT") ? getenv("PC_DIFF_COUNT") : "4000";
  pc_Pool *pool = load_schema();
  CHECK(write_descriptors(pool, "cel_diff.pb"));
  char cmd[1024];
  printf("seed %s\n", seed);
  fflush(stdout);
  snprintf(cmd, sizeof cmd,
           "TZ=UTC node %s gen cel_diff_cases.tsv --seed %s --count %s --descriptors cel_diff.pb",
           TOOL, seed, count);
  if (system(cmd) != 0) {
    fprintf(stderr, "the generator failed\n");
    pc_Pool_Free(pool);
    return 1;
  }
  size_t size;
  /* the conformance suite's schemas (TestAllTypes, GlobalEnum) */
  char *set = slurp("cel_diff_cases.tsv.conformance.pb", &size);
  if (set != NULL) {
    pc_Error err;
    pc_Error_Init(&err);
    size_t first;
    if (pc_Pool_AddDescriptorSet(pool, set, size, &first, &err) < 0) {
      fprintf(stderr, "the conformance schemas: %s\n", err.msg);
      CHECK(0);
    }
    free(set);
  }
  char *text = slurp("cel_diff_cases.tsv", &size);
  FILE *o = fopen("cel_diff_ours.tsv", "w");
  CHECK(text != NULL && o != NULL);
  if (text == NULL || o == NULL) return CHECK_DONE();
  tbuf out = {0};
  int cases = 0;
  for (char *line = text, *end; *line; line = end) {
    end = strchr(line, '\n');
    if (end != NULL)
      *end++ = '\0';
    else
      end = line + strlen(line);
    if (*line == '\0') continue;
    Row r;
    split_row(line, &r);
    run_case(pool, &r, &out);
    fputs(r.fields[0], o);
    fputc('\t', o);
    put_escaped(o, out.s);
    fputc('\n', o);
    cases++;
  }
  fclose(o);
  free(text);
  free(out.s);
  pc_Pool_Free(pool);
  printf("%d cases evaluated\n", cases);
  CHECK(cases >= 1000);
  snprintf(cmd, sizeof cmd,
           "TZ=UTC node %s check cel_diff_cases.tsv cel_diff_ours.tsv --descriptors cel_diff.pb",
           TOOL);
  fflush(stdout);
  CHECK(system(cmd) == 0);
  return CHECK_DONE();
}
