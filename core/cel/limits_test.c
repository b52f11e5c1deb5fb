/* The budget and hostile expressions (ctest cel.limits): each part of
 * pc_CelLimits stops what would exceed it (exponential macros, string and
 * list growth, huge ranges), regular expressions stay linear and bounded,
 * an allocation failing anywhere in compiling or evaluating ends in
 * NoMemory with nothing leaked (the failing allocator of
 * core/testing/failalloc.h), and one program serves several threads. */
#include "cel/test_internal.h"
#include "testing/check.h"
#include "testing/failalloc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Evaluates 'expr' with one variable 'x' (may be NULL) under 'limits';
 * returns the status, the error text in 'msg'. */
static pc_CelStatus run(const char *expr, const pc_CelValue *x, const pc_CelLimits *limits,
                        char *msg) {
  pc_CelVar var = {"x", NULL};
  pc_CelEnv env;
  memset(&env, 0, sizeof env);
  env.vars = &var;
  env.var_count = 1;
  pc_Error err;
  pc_Error_Init(&err);
  pc_CelProgram *p;
  pc_CelStatus st = pc_CelProgram_New(&env, expr, strlen(expr), NULL, NULL, &p, &err);
  if (st == kPc_CelStatus_Ok) {
    pc_CelEval *ev = pc_CelEval_New(NULL, NULL);
    pc_CelEval_SetLimits(ev, limits);
    pc_CelValue out;
    st = pc_CelProgram_Eval(p, ev, x, &out, &err);
    pc_CelEval_Free(ev);
    pc_CelProgram_Free(p);
  }
  snprintf(msg, PC_ERROR_MAX, "%s", err.msg);
  return st;
}

static pc_CelValue string_of(char c, size_t n) {
  char *s = malloc(n + 1);
  memset(s, c, n);
  s[n] = '\0';
  pc_CelValue v;
  memset(&v, 0, sizeof v);
  v.kind = kPc_Cel_String;
  v.v.s.data = s;
  v.v.s.size = n;
  return v;
}

static void budget(void) {
  char msg[PC_ERROR_MAX];
  pc_CelLimits dflt = PC_CEL_DEFAULT_LIMITS, l;
  /* exponential time: nested macros */
  const char *ten = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9]";
  char expr[1024];
  snprintf(expr, sizeof expr,
           "%s.all(a, %s.all(b, %s.all(c, %s.all(d, %s.all(e, %s.all(f, true))))))", ten, ten, ten,
           ten, ten, ten);
  CHECK(run(expr, NULL, NULL, msg) == kPc_CelStatus_Limit);
  CHECK(strstr(msg, "evaluation limit reached: ") != NULL);
  /* iterations */
  l = dflt;
  l.iterations = 15;
  CHECK(run("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(a, [1, 2].map(b, a))", NULL, &l, msg) ==
        kPc_CelStatus_Limit);
  if (strcmp(msg, "1:33: evaluation limit reached: iterations") != 0) fprintf(stderr, "%s\n", msg);
  CHECK(strcmp(msg, "1:33: evaluation limit reached: iterations") == 0);
  l.iterations = 30;
  CHECK(run("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(a, [1, 2].map(b, a))", NULL, &l, msg) ==
        kPc_CelStatus_Ok);
  /* steps */
  l = dflt;
  l.steps = 10;
  CHECK(run("1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1", NULL, &l, msg) == kPc_CelStatus_Limit);
  CHECK(strstr(msg, "evaluation limit reached: steps") != NULL);
  /* a limit is not absorbed by || or all */
  CHECK(run("true || [1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(a, true)", NULL, &l, msg) ==
        kPc_CelStatus_Ok);
  CHECK(run("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].all(a, true) || true", NULL, &l, msg) ==
        kPc_CelStatus_Limit);
  /* string growth: the size of one value, the bytes of the evaluation */
  pc_CelValue big = string_of('a', 600000);
  CHECK(run("x + x", &big, NULL, msg) == kPc_CelStatus_Limit);
  CHECK(strcmp(msg, "1:3: evaluation limit reached: size") == 0);
  CHECK(run("size(x + 'b')", &big, NULL, msg) == kPc_CelStatus_Ok);
  l = dflt;
  l.bytes = 1000000;
  CHECK(run("[1, 2].map(i, x + 'b').size()", &big, &l, msg) == kPc_CelStatus_Limit);
  CHECK(strstr(msg, "evaluation limit reached: bytes") != NULL);
  CHECK(run("'%s%s'.format([x, x])", &big, NULL, msg) == kPc_CelStatus_Limit);
  CHECK(run("[x, x].join()", &big, NULL, msg) == kPc_CelStatus_Limit);
  if (run("x.replace('a', 'bb')", &big, NULL, msg) != kPc_CelStatus_Limit)
    fprintf(stderr, "replace: %s\n", msg);
  CHECK(run("x.replace('a', 'bb')", &big, NULL, msg) == kPc_CelStatus_Limit);
  /* scanning costs steps: a long string's size, contains, matches */
  l = dflt;
  l.steps = 1000;
  CHECK(run("x.size()", &big, &l, msg) == kPc_CelStatus_Limit);
  CHECK(run("x.contains('b')", &big, &l, msg) == kPc_CelStatus_Limit);
  CHECK(run("x.matches('b')", &big, &l, msg) == kPc_CelStatus_Limit);
  free((char *)big.v.s.data);
  /* searching is linear (memmem) and charged so: 4 MB for 1,000 bytes is
     250,000 steps, within the default budget (charged as a scan, 4 MB x
     62 runs of 16 bytes, it reached the limit; it took 0.1 s) */
  big = string_of('a', 4000000);
  char needle[1100];
  snprintf(needle, sizeof needle, "x.contains('%0999db')", 0);
  memset(needle + strlen("x.contains('"), 'a', 999);
  CHECK(run(needle, &big, NULL, msg) == kPc_CelStatus_Ok);
  snprintf(needle, sizeof needle, "x.indexOf('%0999db') == -1", 0);
  memset(needle + strlen("x.indexOf('"), 'a', 999);
  CHECK(run(needle, &big, NULL, msg) == kPc_CelStatus_Ok);
  snprintf(needle, sizeof needle, "x.lastIndexOf('b%0999d') == -1", 0);
  memset(needle + strlen("x.lastIndexOf('b"), 'a', 999);
  CHECK(run(needle, &big, NULL, msg) == kPc_CelStatus_Ok);
  snprintf(needle, sizeof needle, "x.split('%0999db').size() == 1", 0);
  memset(needle + strlen("x.split('"), 'a', 999);
  CHECK(run(needle, &big, NULL, msg) == kPc_CelStatus_Ok);
  free((char *)big.v.s.data);
  /* a needle that starts with a continuation byte (a string that is not
     UTF-8: a proto2 field) matches inside each code point of 'é...': each
     match is refused as not at a code point's start (in constant time:
     bench/validate_hostile_bench.lua's lastIndexOf row, where a walk from
     the start for each took minutes) */
  big = string_of('x', 1 + 2 * 30000);
  ((char *)big.v.s.data)[0] = (char)0xa9;
  for (size_t i = 1; i < big.v.s.size; i += 2) memcpy((char *)big.v.s.data + i, "\xc3\xa9", 2);
  CHECK(run("x.lastIndexOf(x.charAt(0)) == 0 || size(x) / 0 == 1", &big, NULL, msg) ==
        kPc_CelStatus_Ok);
  CHECK(run("x.lastIndexOf(x.charAt(0), 20000) == 0 || size(x) / 0 == 1", &big, NULL, msg) ==
        kPc_CelStatus_Ok);
  CHECK(run("x.indexOf(x.charAt(0), 1) == -1 || size(x) / 0 == 1", &big, NULL, msg) ==
        kPc_CelStatus_Ok);
  free((char *)big.v.s.data);
  /* each match refused as inside a code point is a search begun again
     (memmem's set-up: the needle's size), charged a step and one per 16
     bytes of the needle: 50,000 of them here (charged as a scan of 100 KB,
     they cost some 6,000 steps and took 5 times a step's time) */
  big = string_of('x', 1 + 2 * 50000);
  ((char *)big.v.s.data)[0] = (char)0xa9;
  for (size_t i = 1; i < big.v.s.size; i += 2) memcpy((char *)big.v.s.data + i, "\xc3\xa9", 2);
  l = dflt;
  l.steps = 40000;
  CHECK(run("x.indexOf(x.charAt(0), 1) == -1", &big, &l, msg) == kPc_CelStatus_Limit);
  CHECK(run("x.lastIndexOf(x.charAt(0)) == 0", &big, &l, msg) == kPc_CelStatus_Limit);
  CHECK(run("x.split(x.charAt(0)).size() == 2", &big, &l, msg) == kPc_CelStatus_Limit);
  CHECK(run("x.replace(x.charAt(0), '').size() == 50000", &big, &l, msg) == kPc_CelStatus_Limit);
  l.steps = 200000;
  CHECK(run("x.indexOf(x.charAt(0), 1) == -1 || size(x) / 0 == 1", &big, &l, msg) ==
        kPc_CelStatus_Ok);
  CHECK(run("x.lastIndexOf(x.charAt(0)) == 0 || size(x) / 0 == 1", &big, &l, msg) ==
        kPc_CelStatus_Ok);
  CHECK(run("x.split(x.charAt(0)).size() == 2 || size(x) / 0 == 1", &big, &l, msg) ==
        kPc_CelStatus_Ok);
  CHECK(run("x.replace(x.charAt(0), '').size() == 50000 || size(x) / 0 == 1", &big, &l, msg) ==
        kPc_CelStatus_Ok);
  free((char *)big.v.s.data);
  /* lastIndexOf reads reversed copies of windows of the text, from its
     end, not a copy of it (a copy of 9 MB for each of two reached the 16 MB
     of bytes); a match across two windows (64 KB and the needle) is found */
  big = string_of('a', 9000000);
  l = dflt;
  l.steps = 100000000;
  CHECK(run("x.lastIndexOf('b') == -1 && x.lastIndexOf('c') == -1", &big, &l, msg) ==
        kPc_CelStatus_Ok);
  free((char *)big.v.s.data);
  big = string_of('a', 3 * 65536 + 100);
  const size_t at[] = {0,      1,      65630,  65631,  65632,  65633,  65634,  65635,  65636, 65637,
                       131166, 131167, 131168, 131169, 131170, 131171, 131172, 131173, 196705};
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
    memcpy((char *)big.v.s.data + at[i], "bcd", 3);
    snprintf(expr, sizeof expr, "x.lastIndexOf('bcd') == %zu || size(x) / 0 == 1", at[i]);
    CHECK(run(expr, &big, NULL, msg) == kPc_CelStatus_Ok);
    snprintf(expr, sizeof expr, "x.lastIndexOf('bcd', %zu) == %zu || size(x) / 0 == 1", at[i] + 1,
             at[i]);
    CHECK(run(expr, &big, NULL, msg) == kPc_CelStatus_Ok);
    memcpy((char *)big.v.s.data + at[i], "aaa", 3);
  }
  free((char *)big.v.s.data);
  /* list growth */
  l = dflt;
  l.max_size = 100;
  CHECK(run("[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map(a, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]).size()", NULL,
            &l, msg) == kPc_CelStatus_Ok);
  CHECK(run("'a,b'.split(',') + 'a,b,c'.split(',')", NULL, &l, msg) == kPc_CelStatus_Ok);
  pc_CelEval *ev = pc_CelEval_New(NULL, NULL);
  pc_CelValue items[200], list;
  for (int i = 0; i < 200; i++) {
    memset(&items[i], 0, sizeof items[i]);
    items[i].kind = kPc_Cel_Int;
    items[i].v.i = i;
  }
  memset(&list, 0, sizeof list);
  list.kind = kPc_Cel_List;
  list.v.list = pc_CelEval_NewList(ev, items, 200);
  CHECK(run("x.map(i, i)", &list, &l, msg) == kPc_CelStatus_Limit);
  if (strcmp(msg, "1:3: evaluation limit reached: size") != 0) fprintf(stderr, "%s\n", msg);
  CHECK(strcmp(msg, "1:3: evaluation limit reached: size") == 0);
  CHECK(run("x.filter(i, false)", &list, &l, msg) ==
        kPc_CelStatus_Limit); /* room for all is reserved */
  CHECK(run("x + x", &list, &l, msg) == kPc_CelStatus_Limit);
  CHECK(run("x.exists(i, i == 199)", &list, &l, msg) == kPc_CelStatus_Ok); /* nothing made */
  pc_CelEval_Free(ev);
  /* what an evaluation used */
  ev = pc_CelEval_New(NULL, NULL);
  pc_CelProgram *p;
  pc_CelEnv env;
  memset(&env, 0, sizeof env);
  const char *text = "[1, 2, 3].map(x, x * 2)";
  CHECK(pc_CelProgram_New(&env, text, strlen(text), NULL, NULL, &p, NULL) == kPc_CelStatus_Ok);
  pc_CelValue out;
  CHECK(pc_CelProgram_Eval(p, ev, NULL, &out, NULL) == kPc_CelStatus_Ok);
  pc_CelLimits used;
  pc_CelEval_Used(ev, &used);
  CHECK(used.iterations == 3 && used.steps >= 13 && used.bytes > 0 && used.max_size == 3);
  l = used;
  pc_CelEval_SetLimits(ev, &l); /* exactly enough */
  CHECK(pc_CelProgram_Eval(p, ev, NULL, &out, NULL) == kPc_CelStatus_Ok);
  l.steps--;
  pc_CelEval_SetLimits(ev, &l);
  CHECK(pc_CelProgram_Eval(p, ev, NULL, &out, NULL) == kPc_CelStatus_Limit);
  pc_CelEval_SetLimits(ev, NULL);
  CHECK(pc_CelProgram_Eval(p, ev, NULL, &out, NULL) == kPc_CelStatus_Ok);
  pc_CelProgram_Free(p);
  pc_CelEval_Free(ev);
}

/* pc_CelRegex_FullMatch: the whole text, as "^(?:p)$" would, for patterns
 * up to PC_CEL_MAX_PATTERN bytes themselves (the wrapped form of one of
 * 8,187 bytes or more would be refused as too long). */
static void full_match(void) {
  char why[256];
  pc_CelRegex *re = pc_CelRegex_New("a|ab", 4, why, sizeof why);
  CHECK(re != NULL);
  if (re == NULL) return;
  CHECK(pc_CelRegex_FullMatch(re, "ab", 2) == 1);
  CHECK(pc_CelRegex_FullMatch(re, "a", 1) == 1);
  CHECK(pc_CelRegex_FullMatch(re, "abc", 3) == 0);
  CHECK(pc_CelRegex_FullMatch(re, "xab", 3) == 0);
  CHECK(pc_CelRegex_Match(re, "xab", 3) == 1);
  pc_CelRegex_Free(re);
  char *text = malloc(PC_CEL_MAX_PATTERN + 2);
  CHECK(text != NULL);
  if (text == NULL) return;
  memset(text, 'a', PC_CEL_MAX_PATTERN + 1);
  for (size_t len = PC_CEL_MAX_PATTERN - 5; len <= PC_CEL_MAX_PATTERN; len++) {
    re = pc_CelRegex_New(text, len, why, sizeof why);
    CHECK(re != NULL);
    if (re == NULL) continue;
    CHECK(pc_CelRegex_FullMatch(re, text, len) == 1);
    CHECK(pc_CelRegex_FullMatch(re, text, len - 1) == 0);
    CHECK(pc_CelRegex_FullMatch(re, text, len + 1) == 0);
    CHECK(pc_CelRegex_Match(re, text, len + 1) == 1);
    pc_CelRegex_Free(re);
  }
  CHECK(pc_CelRegex_New(text, PC_CEL_MAX_PATTERN + 1, why, sizeof why) == NULL);
  CHECK(strcmp(why, "pattern too long") == 0);
  free(text);
}

static void regexes(void) {
  char msg[PC_ERROR_MAX];
  /* a pattern that backtracking engines take exponential time over */
  pc_CelValue x = string_of('a', 100000);
  ((char *)x.v.s.data)[99999] = 'b';
  CHECK(run("x.matches('^(a+)+$')", &x, NULL, msg) == kPc_CelStatus_Ok);
  CHECK(run("x.matches('(a|aa)*c')", &x, NULL, msg) == kPc_CelStatus_Ok);
  CHECK(run("x.matches('(x+x+)+y')", &x, NULL, msg) == kPc_CelStatus_Ok);
  /* patterns too long, too deep, too big */
  char *long_pattern = malloc(PC_CEL_MAX_PATTERN + 32);
  snprintf(long_pattern, 16, "x.matches('");
  memset(long_pattern + 11, 'a', PC_CEL_MAX_PATTERN + 1);
  strcpy(long_pattern + 11 + PC_CEL_MAX_PATTERN + 1, "')");
  CHECK(run(long_pattern, &x, NULL, msg) == kPc_CelStatus_Compile);
  CHECK(strcmp(msg, "1:11: invalid regular expression: pattern too long") == 0);
  pc_CelValue pat = string_of('a', PC_CEL_MAX_PATTERN + 1);
  CHECK(run("'a'.matches(x)", &pat, NULL, msg) == kPc_CelStatus_Error);
  CHECK(strcmp(msg, "1:13: invalid regular expression: pattern too long") == 0);
  free((char *)pat.v.s.data);
  char deep[700] = "x.matches('";
  size_t n = strlen(deep);
  for (int i = 0; i < 150; i++) deep[n++] = '(';
  deep[n++] = 'a';
  for (int i = 0; i < 150; i++) deep[n++] = ')';
  strcpy(deep + n, "')");
  CHECK(run(deep, &x, NULL, msg) == kPc_CelStatus_Compile);
  CHECK(strcmp(msg, "1:11: invalid regular expression: pattern nested too deeply") == 0);
  CHECK(run("x.matches('((((((((a{1000}){1000}){1000}){1000}){1000}){1000}){1000}){1000})')", &x,
            NULL, msg) == kPc_CelStatus_Compile);
  CHECK(run("x.matches('\\\\pL{1000}\\\\pL{1000}\\\\pL{1000}\\\\pL{1000}\\\\pL{1000}')", &x, NULL,
            msg) == kPc_CelStatus_Compile);
  CHECK(strcmp(msg, "1:11: invalid regular expression: pattern too large - compile failed") == 0);
  free((char *)x.v.s.data);
  free(long_pattern);
  /* compiling patterns made while evaluating is charged to the budget:
     20,000 distinct patterns, or patterns RE2 gives up on as too large
     (an error absorbed by ||), reach the step limit */
  enum { NPAT = 20000 };
  pc_CelValue *pats = malloc(NPAT * sizeof *pats);
  char *texts = malloc(NPAT * 32);
  for (int i = 0; i < NPAT; i++) {
    memset(&pats[i], 0, sizeof pats[i]);
    pats[i].kind = kPc_Cel_String;
    pats[i].v.s.data = texts + 32 * i;
    pats[i].v.s.size = (size_t)snprintf(texts + 32 * i, 32, "a|%d", i);
  }
  for (int big = 0; big < 2; big++) {
    pc_CelEval *pev = pc_CelEval_New(NULL, NULL);
    pc_CelValue list;
    memset(&list, 0, sizeof list);
    list.kind = kPc_Cel_List;
    if (big)
      for (int i = 0; i < 100; i++)
        pats[i].v.s.size = (size_t)snprintf(texts + 32 * i, 32, "\\pL{100}%d", i);
    list.v.list = pc_CelEval_NewList(pev, pats, big ? 100 : NPAT);
    pc_CelVar var = {"x", NULL};
    pc_CelEnv penv;
    memset(&penv, 0, sizeof penv);
    penv.vars = &var;
    penv.var_count = 1;
    const char *t = big ? "x.all(p, 'a'.matches(p) || true)" : "x.all(p, 'a'.matches(p))";
    pc_CelProgram *pp;
    CHECK(pc_CelProgram_New(&penv, t, strlen(t), NULL, NULL, &pp, NULL) == kPc_CelStatus_Ok);
    pc_CelValue out;
    pc_Error err;
    pc_Error_Init(&err);
    pc_CelStatus st = pc_CelProgram_Eval(pp, pev, &list, &out, &err);
    if (st != kPc_CelStatus_Limit) fprintf(stderr, "patterns %d: %d %s\n", big, st, err.msg);
    CHECK(st == kPc_CelStatus_Limit);
    CHECK(strstr(err.msg, "evaluation limit reached: steps") != NULL);
    pc_CelProgram_Free(pp);
    pc_CelEval_Free(pev);
  }
  free(pats);
  free(texts);
  /* patterns made while evaluating are cached in the context: more than
     the cache holds, over and over */
  pc_CelEval *ev = pc_CelEval_New(NULL, NULL);
  pc_CelEnv env;
  memset(&env, 0, sizeof env);
  pc_CelProgram *p;
  const char *text = "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]"
                     ".all(i, string(i).matches('^' + string(i) + '$'))";
  CHECK(pc_CelProgram_New(&env, text, strlen(text), NULL, NULL, &p, NULL) == kPc_CelStatus_Ok);
  for (int round = 0; round < 3; round++) {
    pc_CelValue out;
    CHECK(pc_CelProgram_Eval(p, ev, NULL, &out, NULL) == kPc_CelStatus_Ok &&
          out.kind == kPc_Cel_Bool && out.v.b);
    pc_CelEval_Reset(ev);
  }
  pc_CelProgram_Free(p);
  pc_CelEval_Free(ev);
}

/* unique() over 100,000 values whose low bits are all alike (doubles 1..n,
 * floats, ints that are multiples of 2^32): each element is found or placed
 * in a few probes, and every probe is charged, so the list finishes within
 * three steps an element. */
static void unique_spread(void) {
  enum { N = 100000 };
  pc_CelValue *items = malloc(N * sizeof *items);
  for (int shape = 0; shape < 4; shape++) {
    memset(items, 0, N * sizeof *items);
    for (int i = 0; i < N; i++) {
      switch (shape) {
      case 0: items[i].kind = kPc_Cel_Double, items[i].v.d = i + 1; break;
      case 1: items[i].kind = kPc_Cel_Double, items[i].v.d = (double)(float)(i + 1) / 1024; break;
      case 2: items[i].kind = kPc_Cel_Int, items[i].v.i = (int64_t)(i + 1) << 32; break;
      default: items[i].kind = kPc_Cel_Uint, items[i].v.u = (uint64_t)(i + 1) << 40; break;
      }
    }
    pc_CelEval *ev = pc_CelEval_New(NULL, NULL);
    pc_CelLimits l = PC_CEL_DEFAULT_LIMITS;
    l.steps = 3 * N;
    pc_CelEval_SetLimits(ev, &l);
    pc_CelValue x;
    memset(&x, 0, sizeof x);
    x.kind = kPc_Cel_List;
    x.v.list = pc_CelEval_NewList(ev, items, N);
    CHECK(x.v.list != NULL);
    pc_CelVar var = {"x", NULL};
    pc_CelEnv env;
    memset(&env, 0, sizeof env);
    env.vars = &var;
    env.var_count = 1;
    pc_CelProgram *p;
    CHECK(pc_CelProgram_New(&env, "x.unique()", 10, NULL, NULL, &p, NULL) == kPc_CelStatus_Ok);
    pc_CelValue out;
    pc_Error err;
    pc_Error_Init(&err);
    pc_CelStatus st = pc_CelProgram_Eval(p, ev, &x, &out, &err);
    if (st != kPc_CelStatus_Ok) fprintf(stderr, "unique shape %d: %s\n", shape, err.msg);
    CHECK(st == kPc_CelStatus_Ok && out.kind == kPc_Cel_Bool && out.v.b);
    pc_CelLimits used;
    pc_CelEval_Used(ev, &used);
    CHECK(used.steps >= N && used.steps <= 3 * N);
    pc_CelProgram_Free(p);
    pc_CelEval_Free(ev);
  }
  free(items);
}

/* Values nested as deep as expressions may be, compared and printed. */
static size_t nested_list(char *out, int depth) {
  size_t n = 0;
  for (int i = 0; i < depth; i++) out[n++] = '[';
  out[n++] = '1';
  for (int i = 0; i < depth; i++) out[n++] = ']';
  out[n] = '\0';
  return n;
}

static void deep_values(void) {
  char expr[4096], msg[PC_ERROR_MAX];
  nested_list(expr, PC_CEL_MAX_DEPTH);
  CHECK(run(expr, NULL, NULL, msg) == kPc_CelStatus_Limit);
  nested_list(expr, PC_CEL_MAX_DEPTH - 1);
  CHECK(run(expr, NULL, NULL, msg) == kPc_CelStatus_Ok);
  size_t n = nested_list(expr, PC_CEL_MAX_DEPTH - 2);
  memcpy(expr + n, " == ", 4);
  nested_list(expr + n + 4, PC_CEL_MAX_DEPTH - 2);
  CHECK(run(expr, NULL, NULL, msg) == kPc_CelStatus_Ok);
  memcpy(expr, "'%s'.format([", 13);
  n = 13 + nested_list(expr + 13, PC_CEL_MAX_DEPTH - 3);
  strcpy(expr + n, "])");
  CHECK(run(expr, NULL, NULL, msg) == kPc_CelStatus_Ok);
}

/* Every allocation of compiling and evaluating fails in turn: the result
 * is NoMemory (never a wrong value), and nothing leaks. */
static const char *const kExprs[] = {
    "[1, 2, 3].map(x, x * 2).filter(y, y > 2)",
    "{'a': [1, 2], 'b': {'c': 'd'}}.all(k, k.size() == 1) && x.startsWith('ab')",
    "'%s-%d-%x'.format([x, 42, b'\\x01']) + string(1.5) + "
    "string(timestamp('2009-02-13T23:31:30Z'))",
    "x.matches('^a.c$') && x.matches(x) && 'a.b.c'.split('.').join('/') == 'a/b/c'",
    "[0, 1].exists(i, 1 / i == 1) || [1u, 2u].unique() && 'h\\u00e9'.charAt(1) == '\\u00e9'",
    "x.replace('b', 'bb').substring(1).upperAscii().trim() + strings.quote(x)",
    "{1: 'a'}.transformMap(k, v, v + v)[1] == 'aa' && [1, 2].transformList(i, v, v * i) == [0, 2]",
    "'192.168.0.1/24'.isIpPrefix() && 'https://a.b/c'.isUri() && 'a@b.c'.isEmail()",
    "1 +",
    "undeclared",
    "[[1], [2]].map(l, l + [3]).exists(l, l == [2, 3])",
};

static void failing_allocator(void) {
  pc_CelValue x;
  memset(&x, 0, sizeof x);
  x.kind = kPc_Cel_String;
  x.v.s.data = "abc";
  x.v.s.size = 3;
  pc_CelVar var = {"x", NULL};
  pc_CelEnv env;
  memset(&env, 0, sizeof env);
  env.vars = &var;
  env.var_count = 1;
  for (size_t k = 0; k < sizeof kExprs / sizeof kExprs[0]; k++) {
    const char *expr = kExprs[k];
    /* the expected outcome, without failures */
    pc_CelStatus want = kPc_CelStatus_Ok;
    char want_text[1024] = "";
    {
      pc_CelProgram *p;
      want = pc_CelProgram_New(&env, expr, strlen(expr), NULL, NULL, &p, NULL);
      if (want == kPc_CelStatus_Ok) {
        pc_CelEval *ev = pc_CelEval_New(NULL, NULL);
        pc_CelValue out;
        want = pc_CelProgram_Eval(p, ev, &x, &out, NULL);
        tbuf b = {0};
        tb_value(&b, ev, &out);
        snprintf(want_text, sizeof want_text, "%s", b.s);
        free(b.s);
        pc_CelEval_Free(ev);
        pc_CelProgram_Free(p);
      }
    }
    int runs = 0;
    for (long n = 1;; n++) {
      fail_reset(n);
      pc_CelProgram *p = NULL;
      pc_CelStatus st = pc_CelProgram_New(&env, expr, strlen(expr), fail_alloc, NULL, &p, NULL);
      if (st == kPc_CelStatus_Ok) {
        pc_CelEval *ev = pc_CelEval_New(fail_alloc, NULL);
        if (ev != NULL) {
          pc_CelValue out;
          st = pc_CelProgram_Eval(p, ev, &x, &out, NULL);
          if (st == kPc_CelStatus_Ok) {
            tbuf b = {0};
            tb_value(&b, ev, &out);
            CHECK(strcmp(b.s, want_text) == 0);
            free(b.s);
          }
          /* a second evaluation in the same context, with the memory left */
          pc_CelEval_Reset(ev);
          pc_CelStatus again = pc_CelProgram_Eval(p, ev, &x, &out, NULL);
          CHECK(again == want || again == kPc_CelStatus_NoMemory);
          pc_CelEval_Free(ev);
        } else {
          st = kPc_CelStatus_NoMemory;
        }
        pc_CelProgram_Free(p);
      } else {
        CHECK(p == NULL);
      }
      CHECK(st == want || (fail_hit && st == kPc_CelStatus_NoMemory));
      if (fail_live != 0)
        fprintf(stderr, "%s: %lld bytes leaked failing allocation %ld\n", expr, fail_live, n);
      CHECK(fail_live == 0);
      runs++;
      if (!fail_hit) break;
    }
    CHECK(runs > 1);
  }
  fail_reset(0);
}

/* One program, several threads, each with its context. */
static pc_CelProgram *shared;

static void *worker(void *arg) {
  (void)arg;
  pc_CelEval *ev = pc_CelEval_New(NULL, NULL);
  int ok = 1;
  for (int i = 0; i < 300 && ok; i++) {
    pc_CelValue out;
    ok = pc_CelProgram_Eval(shared, ev, NULL, &out, NULL) == kPc_CelStatus_Ok &&
         out.kind == kPc_Cel_Bool && out.v.b;
    pc_CelEval_Reset(ev);
  }
  pc_CelEval_Free(ev);
  return ok ? arg : NULL;
}

static void threads(void) {
  pc_CelEnv env;
  memset(&env, 0, sizeof env);
  const char *text = "['ab', 'abc'].all(s, s.matches('^ab') && s.matches('^' + s + '$')) && "
                     "[1, 2, 3].map(x, x * x) == [1, 4, 9]";
  CHECK(pc_CelProgram_New(&env, text, strlen(text), NULL, NULL, &shared, NULL) == kPc_CelStatus_Ok);
  pthread_t t[4];
  static int tag;
  for (int i = 0; i < 4; i++) CHECK(pthread_create(&t[i], NULL, worker, &tag) == 0);
  for (int i = 0; i < 4; i++) {
    void *r;
    CHECK(pthread_join(t[i], &r) == 0 && r == &tag);
  }
  pc_CelProgram_Free(shared);
}

/* x with murmur3's fmix64 (pc_Hash_Mix64) undone: fmix64(unmix(y)) == y. */
static uint64_t unmix(uint64_t y) {
  y ^= y >> 33;
  y *= 0x9cb4b2f8129337dbull; /* 0xc4ceb9fe1a85ec53's inverse modulo 2^64 */
  y ^= y >> 33;
  y *= 0x4f74430c22a54005ull; /* 0xff51afd7ed558ccd's */
  y ^= y >> 33;
  return y;
}

/* A map made of 5,000 keys picked to share one slot of its index (keys
 * from a request: the index's hash is fmix64, a bijection): each key
 * compared is a step, so the quadratic probes reach the budget. */
static void map_flood(void) {
  enum { N = 5000 };
  pc_CelValue *items = calloc(N, sizeof *items);
  for (int i = 0; i < N; i++) {
    items[i].kind = kPc_Cel_Uint;
    items[i].v.u = unmix((uint64_t)(i + 1) << 14) ^ 0x1000; /* 2^14 slots */
  }
  pc_CelEval *ev = pc_CelEval_New(NULL, NULL);
  pc_CelValue x;
  memset(&x, 0, sizeof x);
  x.kind = kPc_Cel_List;
  x.v.list = pc_CelEval_NewList(ev, items, N);
  CHECK(x.v.list != NULL);
  char *expr = malloc(N * 24 + 8), *o = expr;
  *o++ = '{';
  for (int i = 0; i < N; i++) o += sprintf(o, "%sx[%d]: 0", i ? ", " : "", i);
  strcpy(o, "}.size()");
  pc_CelVar var = {"x", NULL};
  pc_CelEnv env;
  memset(&env, 0, sizeof env);
  env.vars = &var;
  env.var_count = 1;
  pc_CelProgram *p;
  pc_Error err;
  pc_Error_Init(&err);
  CHECK(pc_CelProgram_New(&env, expr, strlen(expr), NULL, NULL, &p, &err) == kPc_CelStatus_Ok);
  pc_CelValue out;
  CHECK(pc_CelProgram_Eval(p, ev, &x, &out, &err) == kPc_CelStatus_Limit);
  CHECK(strstr(err.msg, "evaluation limit reached: steps") != NULL);
  pc_CelProgram_Free(p);
  pc_CelEval_Free(ev);
  free(expr);
  free(items);
}

/* unique() over 100,000 integers picked to share one slot of an unseeded
 * table: each probe is a step, so the list reached the budget (an
 * evaluation error where the items are distinct); the table is seeded. */
static void unique_flood(void) {
  enum { N = 100000 };
  pc_CelValue *items = calloc(N, sizeof *items);
  for (int i = 0; i < N; i++) {
    items[i].kind = kPc_Cel_Uint; /* hash_value: fmix64(kind * golden ^ u); 2^18 slots */
    items[i].v.u = unmix((uint64_t)(i + 1) << 18) ^ (uint64_t)kPc_Cel_Uint * 0x9E3779B97F4A7C15ULL;
  }
  pc_CelEval *ev = pc_CelEval_New(NULL, NULL);
  pc_CelValue x;
  memset(&x, 0, sizeof x);
  x.kind = kPc_Cel_List;
  x.v.list = pc_CelEval_NewList(ev, items, N);
  CHECK(x.v.list != NULL);
  pc_CelVar var = {"x", NULL};
  pc_CelEnv env;
  memset(&env, 0, sizeof env);
  env.vars = &var;
  env.var_count = 1;
  pc_CelProgram *p;
  pc_Error err;
  pc_Error_Init(&err);
  CHECK(pc_CelProgram_New(&env, "x.unique()", 10, NULL, NULL, &p, &err) == kPc_CelStatus_Ok);
  pc_CelValue out;
  CHECK(pc_CelProgram_Eval(p, ev, &x, &out, &err) == kPc_CelStatus_Ok);
  CHECK(out.kind == kPc_Cel_Bool && out.v.b == 1);
  pc_CelProgram_Free(p);
  pc_CelEval_Free(ev);
  free(items);
}

int main(void) {
  budget();
  regexes();
  full_match();
  unique_spread();
  map_flood();
  unique_flood();
  deep_values();
  failing_allocator();
  threads();
  return CHECK_DONE();
}
