/* The parser (ctest cel.parse): every construct of cel-spec's grammar, its
 * precedence and associativity, literals of every form, and each syntax
 * error with its line and column (columns in code points); the limits of
 * length and nesting; what compiling refuses (names, functions, argument
 * counts, message literals). */
#include "cel/test_internal.h"
#include "testing/check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void expect(const char *expr, const char *want) {
  const char *got = eval_text(expr);
  int ok = strncmp(want, "error", 5) == 0 ? strncmp(got, want, strlen(want)) == 0
                                          : strcmp(got, want) == 0;
  if (!ok) fprintf(stderr, "%s\n  got:  %s\n  want: %s\n", expr, got, want);
  CHECK(ok);
}

static void grammar(void) {
  /* precedence, lowest first: ?: || && relations + - * / % unary member */
  expect("1 + 2 * 3", "7");
  expect("(1 + 2) * 3", "9");
  expect("10 - 2 - 3", "5"); /* left to right */
  expect("100 / 10 / 5", "2");
  expect("2 * 3 % 4", "2");
  expect("-2 * 3", "-6");
  expect("!true || true", "true");
  expect("true || false && false", "true");
  expect("1 < 2 == true", "true");
  expect("1 + 1 in [2]", "true");
  expect("false ? 1 : 2 + 3", "5");
  expect("true ? 1 : false ? 2 : 3", "1"); /* right to left */
  expect("--1", "1");
  expect("!!true", "true");
  expect("-(1)", "-1");
  expect("[[1, 2], [3]][0][1]", "2");
  expect("{'a': {'b': 1}}.a.b", "1");
  expect("{'a': [1, {'c': 2}]}['a'][1].c", "2");
  expect("'abc'.size() + size('de')", "5");
  expect("[1, 2].map(x, x).size()", "2");
  expect("{'a': 1}.`a`", "1");
  expect("{'x-y z/w.v': 1}.`x-y z/w.v`", "1");
  expect("has({'a-b': 1}.`a-b`)", "true");
  expect("{'as': 1}.as + {'while': 2}.while", "3");
  /* the spec's required minimums, and more */
  expect("((((((((((((((((((((((((((((((((7))))))))))))))))))))))))))))))))", "7");
  expect("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]][0][0][0][0][0][0][0][0]"
         "[0][0][0][0]"
         "[0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0][0]",
         "1");
  expect("1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + "
         "1 + 1 + 1 + "
         "1 + 1 + 1 + 1 + 1 + 1 + 1 + 1",
         "33");
}

static void syntax_errors(void) {
  expect("", "error: syntax error: 1:1: unexpected end of the expression");
  expect("1 +", "error: syntax error: 1:4: unexpected end of the expression");
  expect("(1 + 2", "error: syntax error: 1:7: expected ')', found the end of the expression");
  expect("1 2", "error: syntax error: 1:3: unexpected a number");
  expect("[1, 2", "error: syntax error: 1:6: expected ',' or ']'");
  expect("{1: 2", "error: syntax error: 1:6: expected ',' or '}'");
  expect("{1 2}", "error: syntax error: 1:4: expected ':', found a number");
  expect("a.", "error: syntax error: 1:3: expected a field or method name after '.'");
  expect("a.1", "error: syntax error: 1:2: unexpected a number"); /* .1 is a number */
  expect("a.+", "error: syntax error: 1:3: expected a field or method name after '.', found '+'");
  expect("1 = 2", "error: syntax error: 1:3: unexpected '=' (did you mean '=='?)");
  expect("a & b", "error: syntax error: 1:3: unexpected '&' (did you mean '&&'?)");
  expect("a | b", "error: syntax error: 1:3: unexpected '|' (did you mean '||'?)");
  expect("1 ? 2", "error: syntax error: 1:6: expected ':'");
  expect("f(1,", "error: syntax error: 1:5: unexpected end of the expression");
  expect("f(1 2)", "error: syntax error: 1:5: expected ',' or ')'");
  expect("#", "error: syntax error: 1:1: unexpected '#'");
  expect("1 + \x01", "error: syntax error: 1:5: unexpected character");
  expect("`a`", "error: syntax error: 1:1: unexpected a quoted field name");
  expect("{'a': 1}.`a", "error: syntax error: 1:10: invalid quoted field name");
  expect("{'a': 1}.`a!`", "error: syntax error: 1:10: invalid quoted field name");
  expect("{'a': 1}.`a`()", "error: syntax error: 1:13: unexpected '('");
  expect(".", "error: syntax error: 1:2: expected an identifier after '.'");
  expect("while", "error: syntax error: 1:1: reserved identifier 'while'");
  expect("a.in", "error: syntax error: 1:3: reserved identifier 'in'");
  expect("a.true", "error: syntax error: 1:3: reserved identifier 'true'");
  /* literals */
  expect("'abc", "error: syntax error: 1:1: unterminated string literal");
  expect("'''abc''", "error: syntax error: 1:1: unterminated string literal");
  expect("'a\nb'", "error: syntax error: 1:3: newline in a string literal");
  expect("'\\q'", "error: syntax error: 1:2: invalid escape sequence");
  expect("'\\x4'", "error: syntax error: 1:2: invalid escape sequence");
  expect("'\\400'", "error: syntax error: 1:2: invalid escape sequence");
  expect("'\\ud800'", "error: syntax error: 1:2: invalid code point in escape sequence");
  expect("'\\U00110000'", "error: syntax error: 1:2: invalid code point in escape sequence");
  expect("b'\\u00e9'", "error: syntax error: 1:3: \\u escape in a bytes literal");
  expect("9223372036854775808", "error: syntax error: 1:1: integer literal out of range");
  expect("-(9223372036854775808)", "error: syntax error: 1:3: integer literal out of range");
  expect("[9223372036854775808]", "error: syntax error: 1:2: integer literal out of range");
  expect("18446744073709551616u", "error: syntax error: 1:1: integer literal out of range");
  expect("0x10000000000000000", "error: syntax error: 1:1: integer literal out of range");
  expect("0x", "error: syntax error: 1:1: invalid hexadecimal literal");
  /* macros */
  expect("has(a)", "error: syntax error: 1:5: invalid argument to has() macro");
  expect("has(1 + 1)", "error: syntax error: 1:7: invalid argument to has() macro");
  expect("[1].all(x.y, true)", "error: syntax error: 1:11: argument must be a simple name");
  expect("[1].map(.x, true)", "error: syntax error: 1:10: argument must be a simple name");
  expect("[1].all(x, x, x)", "error: syntax error: 1:12: duplicate variable name 'x'");
  /* positions: lines, and columns counted in code points */
  expect("'\xc3\xa9\xf0\x9f\x90\xb1' + )", "error: syntax error: 1:8: unexpected ')'");
  expect("1 +\n  )", "error: syntax error: 2:3: unexpected ')'");
  expect("1 +\r\n\r\n )", "error: syntax error: 3:2: unexpected ')'");
  expect("1 +\r )", "error: syntax error: 2:2: unexpected ')'");
  expect("'''a\nb''' + )", "error: syntax error: 2:8: unexpected ')'");
  expect("'\xff'", "error: syntax error: 1:2: invalid UTF-8");
  expect("1 + '\xe2\x82'", "error: syntax error: 1:6: invalid UTF-8");
}

static void compile_errors(void) {
  expect("x", "error: compile error: 1:1: undeclared reference to 'x'");
  expect("1 + x.y", "error: compile error: 1:5: undeclared reference to 'x'");
  expect("f(1)", "error: compile error: 1:1: undeclared reference to 'f'");
  expect("1.f()", "error: compile error: 1:3: undeclared reference to 'f'");
  expect("size()", "error: compile error: 1:1: wrong number of arguments to 'size'");
  expect("'a'.size(1)", "error: compile error: 1:5: wrong number of arguments to 'size'");
  expect("contains('a', 'b')",
         "error: compile error: 1:1: 'contains' is a method: call it as value.contains(...)");
  expect("1.int()", "error: compile error: 1:3: 'int' is a function: call it as int(...)");
  expect("'a'.matches('(')",
         "error: compile error: 1:13: invalid regular expression: missing ): (");
  expect("dyn", "error: compile error: 1:1: undeclared reference to 'dyn'");
  expect("Msg{a: 1}", "error: compile error: 1:4: message literals (Msg{...}) are not supported");
  expect("a.b.Msg{}",
         "error: compile error: 1:8: message literals (a.b.Msg{...}) are not supported");
  expect(".a.Msg{`f`: 1,}",
         "error: compile error: 1:7: message literals (.a.Msg{...}) are not supported");
  expect("Msg{1: 2}", "error: syntax error: 1:5: expected a field name, found a number");
}

/* Text too long or nested too deep is refused before it can run the
 * parser's or the evaluator's stack out. */
static void limits(void) {
  pc_CelEnv env;
  memset(&env, 0, sizeof env);
  pc_CelProgram *p = NULL;
  pc_Error err;
  size_t n = 200000;
  char *big = malloc(n + 1);
  for (size_t i = 0; i < n; i++) big[i] = i % 2 ? '1' : '+';
  big[0] = '1';
  big[n] = '\0';
  pc_Error_Init(&err);
  CHECK(pc_CelProgram_New(&env, big, n, NULL, NULL, &p, &err) == kPc_CelStatus_Limit && p == NULL);
  CHECK(strcmp(err.msg, "expression too long (200000 bytes, at most 100000)") == 0);
  env.max_length = 10;
  pc_Error_Init(&err);
  CHECK(pc_CelProgram_New(&env, "1 + 2 + 3 + 4", 13, NULL, NULL, &p, &err) == kPc_CelStatus_Limit);
  env.max_length = 0;
  /* nesting of every kind, 5000 levels deep */
  static const char *const kOpen[] = {"(", "[", "{1: ", "-", "!", "f(", "[1].map(x, "};
  for (size_t k = 0; k < sizeof kOpen / sizeof kOpen[0]; k++) {
    size_t m = 0, w = strlen(kOpen[k]);
    for (int i = 0; i < 5000 && m + w < n; i++, m += w) memcpy(big + m, kOpen[k], w);
    big[m++] = '1';
    big[m] = '\0';
    pc_Error_Init(&err);
    pc_CelStatus st = pc_CelProgram_New(&env, big, m, NULL, NULL, &p, &err);
    if (st != kPc_CelStatus_Limit || strstr(err.msg, "expression nested too deeply") == NULL)
      fprintf(stderr, "%s...: %s\n", kOpen[k], err.msg);
    CHECK(st == kPc_CelStatus_Limit && strstr(err.msg, "expression nested too deeply") != NULL);
  }
  /* a long chain of one operator makes a deep tree too */
  size_t m = 0;
  for (int i = 0; i < 400; i++) {
    memcpy(big + m, "1 + ", 4);
    m += 4;
  }
  big[m++] = '1';
  big[m] = '\0';
  pc_Error_Init(&err);
  CHECK(pc_CelProgram_New(&env, big, m, NULL, NULL, &p, &err) == kPc_CelStatus_Limit);
  if (strcmp(err.msg, "1:999: expression nested too deeply (more than 250 levels)") != 0)
    fprintf(stderr, "%s\n", err.msg);
  CHECK(strcmp(err.msg, "1:999: expression nested too deeply (more than 250 levels)") == 0);
  /* within the limit it runs */
  m = 0;
  for (int i = 0; i < 200; i++) {
    memcpy(big + m, "1 + ", 4);
    m += 4;
  }
  big[m++] = '1';
  big[m] = '\0';
  CHECK(strcmp(eval_text(big), "201") == 0);
  /* a smaller limit of the environment's */
  env.max_depth = 3;
  pc_Error_Init(&err);
  CHECK(pc_CelProgram_New(&env, "1 + 1 + 1", 9, NULL, NULL, &p, &err) == kPc_CelStatus_Ok);
  pc_CelProgram_Free(p);
  CHECK(pc_CelProgram_New(&env, "1 + 1 + 1 + 1", 13, NULL, NULL, &p, &err) == kPc_CelStatus_Limit);
  free(big);
}

int main(void) {
  grammar();
  syntax_errors();
  compile_errors();
  limits();
  return CHECK_DONE();
}
