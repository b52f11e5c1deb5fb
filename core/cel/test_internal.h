/* What the C tests of core/cel share: values as one canonical text (the
 * same that spec/node/cel_diff.mjs writes for protovalidate-es's CEL), and
 * evaluating an expression to that text. Private to core/cel's tests. */
#ifndef PC_CEL_TEST_INTERNAL_H
#define PC_CEL_TEST_INTERNAL_H

#include "cel/cel.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char *s;
  size_t n, cap;
} tbuf;

static void tb_add(tbuf *b, const char *s, size_t n) {
  if (b->n + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->n + n + 1) cap *= 2;
    char *p = realloc(b->s, cap);
    if (p == NULL) abort();
    b->s = p;
    b->cap = cap;
  }
  memcpy(b->s + b->n, s, n);
  b->n += n;
  b->s[b->n] = '\0';
}

static void tb_str(tbuf *b, const char *s) {
  tb_add(b, s, strlen(s));
}

/* JavaScript's number text (cel_double_text's rule), with ".0" when it
 * reads as an integer, so 1.0 and 1 differ. */
static void tb_double(tbuf *b, double d) {
  char tmp[64];
  if (isnan(d)) {
    tb_str(b, "NaN");
    return;
  }
  if (isinf(d)) {
    tb_str(b, d < 0 ? "-Infinity" : "Infinity");
    return;
  }
  if (d == 0) {
    tb_str(b, signbit(d) ? "-0.0" : "0.0");
    return;
  }
  int prec;
  for (prec = 1; prec <= 17; prec++) {
    snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
    if (strtod(tmp, NULL) == d) break;
  }
  char digits[32] = {0}; /* 17 at most, and n <= 21 */
  int k = 0;
  const char *p = tmp;
  int neg = *p == '-';
  if (neg) p++;
  for (; *p != 'e'; p++)
    if (*p != '.') digits[k++] = *p;
  while (k > 1 && digits[k - 1] == '0') k--;
  int n = (int)strtol(p + 1, NULL, 10) + 1;
  if (neg) tb_str(b, "-");
  if (k <= n && n <= 21) {
    tb_add(b, digits, (size_t)k);
    for (int i = k; i < n; i++) tb_str(b, "0");
    tb_str(b, ".0");
  } else if (0 < n && n <= 21) {
    tb_add(b, digits, (size_t)n);
    tb_str(b, ".");
    tb_add(b, digits + n, (size_t)(k - n));
  } else if (-6 < n && n <= 0) {
    tb_str(b, "0.");
    for (int i = 0; i < -n; i++) tb_str(b, "0");
    tb_add(b, digits, (size_t)k);
  } else {
    tb_add(b, digits, 1);
    if (k > 1) {
      tb_str(b, ".");
      tb_add(b, digits + 1, (size_t)(k - 1));
    }
    snprintf(tmp, sizeof tmp, "e%c%d", n - 1 < 0 ? '-' : '+', n - 1 < 0 ? 1 - n : n - 1);
    tb_str(b, tmp);
  }
}

/* A string quoted as JSON quotes it (non-ASCII left as is). */
static void tb_quoted(tbuf *b, const char *s, size_t n) {
  tb_str(b, "\"");
  for (size_t i = 0; i < n; i++) {
    unsigned char c = (unsigned char)s[i];
    char tmp[8];
    if (c == '"' || c == '\\') {
      tmp[0] = '\\';
      tmp[1] = (char)c;
      tb_add(b, tmp, 2);
    } else if (c < 0x20 || c == 0x7F) {
      snprintf(tmp, sizeof tmp, "\\u%04x", c);
      tb_str(b, tmp);
    } else {
      tb_add(b, (const char *)&c, 1);
    }
  }
  tb_str(b, "\"");
}

static void tb_time(tbuf *b, const pc_CelValue *v) {
  char tmp[96];
  if (v->kind == kPc_Cel_Duration) {
    int64_t s = v->v.t.seconds;
    int32_t ns = v->v.t.nanos;
    int neg = s < 0 || ns < 0;
    snprintf(tmp, sizeof tmp, "duration(\"%s%lld.%09ds\")", neg ? "-" : "",
             (long long)(neg ? -s : s), (int)(neg ? -ns : ns));
  } else {
    snprintf(tmp, sizeof tmp, "timestamp(%lld.%09d)", (long long)v->v.t.seconds, (int)v->v.t.nanos);
  }
  tb_str(b, tmp);
}

typedef struct {
  char *key, *value;
} tpair;

static int tpair_cmp(const void *x, const void *y) {
  return strcmp(((const tpair *)x)->key, ((const tpair *)y)->key);
}

static int tb_value(tbuf *b, pc_CelEval *ev, const pc_CelValue *v);

static int tb_value(tbuf *b, pc_CelEval *ev, const pc_CelValue *v) {
  char tmp[64];
  switch (v->kind) {
  case kPc_Cel_Unbound: tb_str(b, "unbound"); return 1;
  case kPc_Cel_Null: tb_str(b, "null"); return 1;
  case kPc_Cel_Bool: tb_str(b, v->v.b ? "true" : "false"); return 1;
  case kPc_Cel_Int:
    snprintf(tmp, sizeof tmp, "%" PRId64, v->v.i);
    tb_str(b, tmp);
    return 1;
  case kPc_Cel_Uint:
    snprintf(tmp, sizeof tmp, "%" PRIu64 "u", v->v.u);
    tb_str(b, tmp);
    return 1;
  case kPc_Cel_Double: tb_double(b, v->v.d); return 1;
  case kPc_Cel_String: tb_quoted(b, v->v.s.data, v->v.s.size); return 1;
  case kPc_Cel_Bytes:
    tb_str(b, "b\"");
    for (size_t i = 0; i < v->v.s.size; i++) {
      snprintf(tmp, sizeof tmp, "%02x", (unsigned char)v->v.s.data[i]);
      tb_str(b, tmp);
    }
    tb_str(b, "\"");
    return 1;
  case kPc_Cel_Type:
    tb_str(b, "type(");
    tb_add(b, v->v.s.data, v->v.s.size);
    tb_str(b, ")");
    return 1;
  case kPc_Cel_Timestamp:
  case kPc_Cel_Duration: tb_time(b, v); return 1;
  case kPc_Cel_Message:
    tb_str(b, "message(");
    tb_str(b, v->v.m.def->full_name);
    tb_str(b, ")");
    return 1;
  case kPc_Cel_List: {
    tb_str(b, "[");
    for (size_t i = 0; i < pc_CelList_Size(v->v.list); i++) {
      pc_CelValue x;
      if (pc_CelEval_ListGet(ev, v->v.list, i, &x, NULL) != kPc_CelStatus_Ok) return 0;
      if (i) tb_str(b, ", ");
      if (!tb_value(b, ev, &x)) return 0;
    }
    tb_str(b, "]");
    return 1;
  }
  case kPc_Cel_Map: {
    size_t n = pc_CelMap_Size(v->v.map);
    tpair *pairs = calloc(n ? n : 1, sizeof *pairs);
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++) {
      pc_CelValue k, x;
      tbuf kb = {0}, vb = {0};
      ok = pc_CelEval_MapEntry(ev, v->v.map, i, &k, &x, NULL) == kPc_CelStatus_Ok &&
           tb_value(&kb, ev, &k) && tb_value(&vb, ev, &x);
      pairs[i].key = kb.s;
      pairs[i].value = vb.s;
    }
    if (ok) {
      qsort(pairs, n, sizeof *pairs, tpair_cmp);
      tb_str(b, "{");
      for (size_t i = 0; i < n; i++) {
        if (i) tb_str(b, ", ");
        tb_str(b, pairs[i].key);
        tb_str(b, ": ");
        tb_str(b, pairs[i].value);
      }
      tb_str(b, "}");
    }
    for (size_t i = 0; i < n; i++) {
      free(pairs[i].key);
      free(pairs[i].value);
    }
    free(pairs);
    return ok;
  }
  }
  return 0;
}

/* The canonical text of 'expr' evaluated with no variables: the value, or
 * "error: <status>: <message>". Static storage. */
static const char *eval_text_env(const pc_CelEnv *env, const char *expr, const pc_CelValue *vars) {
  static tbuf out;
  out.n = 0;
  tb_str(&out, "");
  pc_Error err;
  pc_Error_Init(&err);
  pc_CelProgram *p;
  pc_CelStatus st = pc_CelProgram_New(env, expr, strlen(expr), NULL, NULL, &p, &err);
  if (st != kPc_CelStatus_Ok) {
    tb_str(&out, "error: ");
    tb_str(&out, pc_CelStatus_String(st));
    tb_str(&out, ": ");
    tb_str(&out, err.msg);
    return out.s;
  }
  pc_CelEval *ev = pc_CelEval_New(NULL, NULL);
  pc_CelValue v;
  st = pc_CelProgram_Eval(p, ev, vars, &v, &err);
  if (st != kPc_CelStatus_Ok) {
    tb_str(&out, "error: ");
    tb_str(&out, pc_CelStatus_String(st));
    tb_str(&out, ": ");
    tb_str(&out, err.msg);
  } else if (!tb_value(&out, ev, &v)) {
    tb_str(&out, "error: printing the result failed");
  }
  pc_CelEval_Free(ev);
  pc_CelProgram_Free(p);
  return out.s;
}

static inline const char *eval_text(const char *expr) {
  pc_CelEnv env;
  memset(&env, 0, sizeof env);
  return eval_text_env(&env, expr, NULL);
}

#endif
