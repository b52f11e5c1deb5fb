#include "compiler/lex_internal.h"
#include "base/utf8.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pc_Lexer_Init(pc_Lexer *lx, const char *src, size_t len) {
  lx->p = src;
  lx->end = src + len;
  lx->line = 0;
  lx->col = 0;
  lx->error = NULL;
  lx->error_line = lx->error_column = 0;
  lx->ident_end = NULL;
}

void pc_Lexer_SkipBom(pc_Lexer *lx) {
  if (lx->end - lx->p >= 3 && memcmp(lx->p, "\xef\xbb\xbf", 3) == 0) {
    lx->p += 3;
    lx->col += 3;
  }
}

static int is_letter(int c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static int is_digit(int c) {
  return c >= '0' && c <= '9';
}
static int is_hex(int c) {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static int hex_value(int c) {
  if (is_digit(c)) return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

/* Moves past one character, counting lines and columns as protoc does. */
static void step(pc_Lexer *lx) {
  char c = *lx->p++;
  if (c == '\n') {
    lx->line++;
    lx->col = 0;
  } else if (c == '\t') {
    lx->col += 8 - (lx->col % 8);
  } else {
    lx->col++;
  }
}

/* Moves to 'to' (at or after lx->p), counting lines; the column is
 * recounted from the last newline, tabs included. */
static void advance_to(pc_Lexer *lx, const char *to) {
  const char *line_start = NULL;
  for (const char *q = lx->p; q < to; q++) {
    if (*q == '\n') {
      lx->line++;
      line_start = q + 1;
    }
  }
  if (line_start != NULL) {
    lx->col = 0;
    lx->p = line_start;
  }
  while (lx->p < to) step(lx);
}

static int fail(pc_Lexer *lx, const char *msg) {
  lx->error = msg;
  lx->error_line = lx->line + 1;
  lx->error_column = lx->col + 1;
  return 0;
}

static int peekc(const pc_Lexer *lx, size_t ahead) {
  return lx->p + ahead < lx->end ? (unsigned char)lx->p[ahead] : -1;
}

/* Whitespace and comments. */
static int skip_space(pc_Lexer *lx) {
  for (;;) {
    int c = peekc(lx, 0);
    if (c == ' ') {
      const char *q = lx->p + 1;
      while (q < lx->end && *q == ' ') q++;
      lx->col += (int)(q - lx->p);
      lx->p = q;
    } else if (c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
      step(lx);
    } else if (c == '/' && peekc(lx, 1) == '/') {
      /* to the end of the line (or a NUL byte, which protoc's tokenizer
       * reads as the end of its buffer); the newline resets the column */
      const char *q = lx->p;
      while (q < lx->end && *q != '\n' && *q != '\0') q++;
      if (q < lx->end && *q == '\n') {
        lx->p = q;
      } else {
        advance_to(lx, q);
      }
    } else if (c == '/' && peekc(lx, 1) == '*') {
      const char *q = lx->p + 2;
      for (;;) {
        if (q >= lx->end || *q == '\0') {
          advance_to(lx, q);
          return fail(lx, "End-of-file inside block comment.");
        }
        if (q + 1 < lx->end && q[0] == '*' && q[1] == '/') break;
        if (q + 1 < lx->end && q[0] == '/' && q[1] == '*') {
          advance_to(lx, q + 1);
          return fail(lx, "\"/*\" inside block comment.  Block comments cannot be nested.");
        }
        q++;
      }
      advance_to(lx, q + 2);
    } else {
      return 1;
    }
  }
}

static int lex_string(pc_Lexer *lx) {
  char quote = *lx->p;
  step(lx);
  for (;;) {
    int c = peekc(lx, 0);
    if (c < 0) return fail(lx, "Unexpected end of string.");
    if (c == '\n') return fail(lx, "String literals cannot cross line boundaries.");
    if (c == quote) {
      step(lx);
      return 1;
    }
    if (c == '\\') {
      step(lx);
      c = peekc(lx, 0);
      if ((c > 0 && strchr("abfnrtv\\?'\"", c) != NULL) || (c >= '0' && c <= '7')) {
        step(lx);
      } else if (c == 'x') { /* lower case only, as protoc */
        step(lx);
        if (!is_hex(peekc(lx, 0))) return fail(lx, "Expected hex digits for escape sequence.");
      } else if (c == 'u') {
        step(lx);
        for (int i = 0; i < 4; i++, step(lx))
          if (!is_hex(peekc(lx, 0)))
            return fail(lx, "Expected four hex digits for \\u escape sequence.");
      } else if (c == 'U') { /* 00 then 0 or 1 then five hex digits: up to 1FFFFF */
        step(lx);
        for (int i = 0; i < 8; i++, step(lx)) {
          int d = peekc(lx, 0);
          if (i < 2 ? d != '0' : i == 2 ? d != '0' && d != '1' : !is_hex(d))
            return fail(lx, "Expected eight hex digits up to 10ffff for \\U escape sequence");
        }
      } else {
        return fail(lx, "Invalid escape sequence in string literal.");
      }
    } else {
      step(lx);
    }
  }
}

static int lex_number(pc_Lexer *lx, pc_Token *t) {
  int is_float = 0;
  if (peekc(lx, 0) == '0' && (peekc(lx, 1) == 'x' || peekc(lx, 1) == 'X')) {
    step(lx);
    step(lx);
    if (!is_hex(peekc(lx, 0))) return fail(lx, "\"0x\" must be followed by hex digits.");
    while (is_hex(peekc(lx, 0))) step(lx);
  } else if (peekc(lx, 0) == '0' && is_digit(peekc(lx, 1))) {
    step(lx);
    while (is_digit(peekc(lx, 0))) {
      if (peekc(lx, 0) > '7')
        return fail(lx, "Numbers starting with leading zero must be in octal.");
      step(lx);
    }
  } else {
    if (peekc(lx, 0) == '.') {
      is_float = 1;
      step(lx);
    }
    while (is_digit(peekc(lx, 0))) step(lx);
    if (!is_float && peekc(lx, 0) == '.') {
      is_float = 1;
      step(lx);
      while (is_digit(peekc(lx, 0))) step(lx);
    }
    if (peekc(lx, 0) == 'e' || peekc(lx, 0) == 'E') {
      is_float = 1;
      step(lx);
      if (peekc(lx, 0) == '-' || peekc(lx, 0) == '+') step(lx);
      if (!is_digit(peekc(lx, 0))) return fail(lx, "\"e\" must be followed by exponent.");
      while (is_digit(peekc(lx, 0))) step(lx);
    }
    if (peekc(lx, 0) == '.')
      return fail(lx, "Already saw decimal point or exponent; can't have another one.");
  }
  if (is_letter(peekc(lx, 0))) return fail(lx, "Need space between number and identifier.");
  t->kind = is_float ? kPc_Tok_Float : kPc_Tok_Int;
  return 1;
}

int pc_Lexer_Next(pc_Lexer *lx, pc_Token *t) {
  if (!skip_space(lx)) return 0;
  t->text = lx->p;
  t->line = lx->line + 1;
  t->column = lx->col + 1;
  if (lx->p >= lx->end) {
    t->kind = kPc_Tok_End;
    t->len = 0;
    return 1;
  }
  int c = (unsigned char)*lx->p;
  if (is_letter(c)) {
    const char *q = lx->p + 1;
    while (q < lx->end && (is_letter((unsigned char)*q) || is_digit((unsigned char)*q))) q++;
    lx->col += (int)(q - lx->p);
    lx->p = q;
    lx->ident_end = q;
    t->kind = kPc_Tok_Ident;
  } else if (c == '.' && is_digit(peekc(lx, 1)) && lx->ident_end == lx->p) {
    return fail(lx, "Need space between identifier and decimal point."); /* "a.1" */
  } else if (is_digit(c) || (c == '.' && is_digit(peekc(lx, 1)))) {
    if (!lex_number(lx, t)) return 0;
  } else if (c == '"' || c == '\'') {
    if (!lex_string(lx)) return 0;
    t->kind = kPc_Tok_String;
  } else if (c < 32 || c == 127) {
    return fail(lx, "Invalid control characters encountered in text.");
  } else if (c >= 128) {
    snprintf(lx->error_buf, sizeof lx->error_buf, "Interpreting non ascii codepoint %d.", c);
    return fail(lx, lx->error_buf);
  } else {
    step(lx);
    t->kind = kPc_Tok_Symbol;
  }
  t->len = (size_t)(lx->p - t->text);
  return 1;
}

int pc_Token_Int(const pc_Token *t, uint64_t *out) {
  const char *p = t->text, *e = t->text + t->len;
  uint64_t base = 10, v = 0;
  if (t->len > 1 && p[0] == '0' && (p[1] == 'x' || p[1] == 'X')) {
    base = 16;
    p += 2;
  } else if (t->len > 1 && p[0] == '0') {
    base = 8;
    p++;
  }
  for (; p < e; p++) {
    uint64_t d = (uint64_t)hex_value(*p);
    if (v > (UINT64_MAX - d) / base) return 0;
    v = v * base + d;
  }
  *out = v;
  return 1;
}

double pc_Token_Float(const pc_Token *t) {
  if (t->kind == kPc_Tok_Int) {
    uint64_t v = 0;
    if (!pc_Token_Int(t, &v)) return strtod("1e999", NULL); /* as protoc: too big is inf */
    return (double)v;
  }
  if (t->kind == kPc_Tok_Ident) {
    if (t->len == 3 && memcmp(t->text, "inf", 3) == 0) return INFINITY;
    return NAN;
  }
  char buf[128];
  size_t n = t->len < sizeof buf - 1 ? t->len : sizeof buf - 1;
  memcpy(buf, t->text, n);
  buf[n] = '\0';
  return strtod(buf, NULL);
}

size_t pc_Token_Unescape(const pc_Token *t, char *out) {
  const char *p = t->text + 1, *e = t->text + t->len - 1;
  size_t n = 0;
  while (p < e) {
    if (*p != '\\') {
      out[n++] = *p++;
      continue;
    }
    p++;
    char c = *p++;
    switch (c) {
    case 'a': out[n++] = '\a'; break;
    case 'b': out[n++] = '\b'; break;
    case 'f': out[n++] = '\f'; break;
    case 'n': out[n++] = '\n'; break;
    case 'r': out[n++] = '\r'; break;
    case 't': out[n++] = '\t'; break;
    case 'v': out[n++] = '\v'; break;
    case 'x': {
      int v = 0;
      for (int i = 0; i < 2 && p < e && is_hex(*p); i++) v = v * 16 + hex_value(*p++);
      out[n++] = (char)v;
      break;
    }
    case 'u':
    case 'U': {
      uint32_t cp = 0;
      int digits = c == 'u' ? 4 : 8;
      for (int i = 0; i < digits && p < e; i++) cp = cp * 16 + (uint32_t)hex_value(*p++);
      if (cp >= 0xD800 && cp <= 0xDBFF && e - p >= 6 && p[0] == '\\' && p[1] == 'u' &&
          is_hex(p[2]) && is_hex(p[3]) && is_hex(p[4]) && is_hex(p[5])) {
        uint32_t trail = 0;
        for (int i = 2; i < 6; i++) trail = trail * 16 + (uint32_t)hex_value(p[i]);
        if (trail >= 0xDC00 && trail <= 0xDFFF) { /* a UTF-16 pair */
          cp = 0x10000 + ((cp - 0xD800) << 10) + (trail - 0xDC00);
          p += 6;
        }
      }
      if (cp > 0x10FFFF) { /* protoc writes the escape back, 10 bytes as read */
        char text[11];
        snprintf(text, sizeof text, "\\U%08x", (unsigned)cp);
        memcpy(out + n, text, 10);
        n += 10;
      } else {
        n += pc_Utf8_Put(cp, out + n);
      }
      break;
    }
    default:
      if (c >= '0' && c <= '7') {
        int v = c - '0';
        for (int i = 0; i < 2 && p < e && *p >= '0' && *p <= '7'; i++) v = v * 8 + (*p++ - '0');
        out[n++] = (char)v;
      } else {
        out[n++] = c; /* \\ \' \" \? */
      }
    }
  }
  return n;
}
