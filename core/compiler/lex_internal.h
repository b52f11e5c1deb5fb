/* The .proto tokenizer of the .proto parser (compiler/parse.c); aggregate
 * option values are text format, read by core/text's own tokenizer.
 *
 * Follows protoc's io::Tokenizer: identifiers [A-Za-z_][A-Za-z0-9_]*,
 * integers (decimal, 0x hex, leading-0 octal), floats (digits with '.' or
 * an exponent, or starting with '.'), strings in '...' or "..." (validated
 * here, decoded by pc_Token_Unescape), every other printable character a
 * one-character symbol; // and slash-star comments skipped (a NUL byte
 * ends a // comment and is then an invalid character; in a block comment
 * it reads as the end of input, as in protoc). Lines and
 * columns are 1-based as protoc prints them; a tab advances the column to
 * the next multiple of 8, as protoc counts. No allocation. */
#ifndef PC_PROTO_LEX_H
#define PC_PROTO_LEX_H

#include <stddef.h>
#include <stdint.h>

typedef enum {
  kPc_Tok_End,
  kPc_Tok_Ident,
  kPc_Tok_Int,
  kPc_Tok_Float,
  kPc_Tok_String,
  kPc_Tok_Symbol
} pc_TokKind;

typedef struct {
  pc_TokKind kind;
  const char *text; /* into the source; strings include their quotes */
  size_t len;
  int line, column;
} pc_Token;

typedef struct {
  const char *p, *end;
  int line, col;                /* 0-based, as protoc keeps them */
  const char *error;            /* set when pc_Lexer_Next fails: protoc's wording */
  int error_line, error_column; /* 1-based */
  char error_buf[64];           /* 'error' when it names a value */
  const char *ident_end;        /* where the last identifier ended */
} pc_Lexer;

/* Starts reading the 'len' bytes at 'src' (not NUL-terminated). */
void pc_Lexer_Init(pc_Lexer *lx, const char *src, size_t len);

/* Skips a UTF-8 byte order mark at the start of a file, counting its three
 * bytes as columns (protoc accepts the mark there and only there). */
void pc_Lexer_SkipBom(pc_Lexer *lx);

/* The next token into 't' (kPc_Tok_End at the end of input); 1 on success,
 * 0 on a lexical error (lx->error and its position set). */
int pc_Lexer_Next(pc_Lexer *lx, pc_Token *t);

/* The value of an integer token; 0 when it does not fit 64 bits. */
int pc_Token_Int(const pc_Token *t, uint64_t *out);

/* The value of a float or integer token (integers converted), or of the
 * identifiers "inf" and "nan". */
double pc_Token_Float(const pc_Token *t);

/* Decodes the string token 't' (escapes \a \b \f \n \r \t \v \\ \' \" \?,
 * octal \NNN, hex \xHH, \uXXXX and \UXXXXXXXX as UTF-8, a \u head surrogate
 * followed by a \u trail surrogate as their one code point, a code point
 * past 10FFFF as the text "\U%08x", all as protoc) into 'out', which must
 * hold t->len bytes; returns the decoded length. */
size_t pc_Token_Unescape(const pc_Token *t, char *out);

#endif
