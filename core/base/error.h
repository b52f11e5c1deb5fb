/* Error details out of the core: the first error wins (upb, nanopb).
 *
 * Core functions return a status and, when given a non-NULL pc_Error*, write
 * a readable message naming the subject and the place
 * ("demo.User.name: truncated varint at offset 17",
 * "a.proto:3:10: expected \";\""). A later pc_Error_Set on the same error
 * does nothing, so the innermost (first) cause is the one reported. */
#ifndef PC_ERROR_H
#define PC_ERROR_H

#include <stdarg.h>
#include <stddef.h>

#define PC_ERROR_MAX 512

typedef struct {
  int set;                /* non-zero once a message is written */
  char msg[PC_ERROR_MAX]; /* NUL-terminated; truncated to fit */
} pc_Error;

/* Clears 'e' (NULL allowed). */
void pc_Error_Init(pc_Error *e);

/* printf-style message into 'e' unless 'e' is NULL or already set. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void pc_Error_Set(pc_Error *e, const char *fmt, ...);

/* "file:line:col: <message>" (just "file: <message>" when 'line' <= 0),
 * as .proto errors read, into 'e' unless it is NULL or already set. */
void pc_Error_SetAtV(pc_Error *e, const char *file, int line, int col, const char *fmt, va_list ap);

/* How pc_Error_Quote escapes: as in a JSON string ('"', '\\', control bytes
 * as \u00XX, a byte that is not UTF-8 as \xNN) or as in a Lua literal ('"',
 * '\\', control bytes, DEL and a byte that is not UTF-8 as \ddd, three
 * digits before a digit). */
typedef enum { kPc_Quote_Json, kPc_Quote_Lua } pc_QuoteStyle;

/* Input text in an error message: the 'n' bytes at 's' escaped in 'style',
 * so a NUL shows instead of ending the text and the message is UTF-8 (RFC
 * 3629) whatever the input, as many as fit in 'room' - 4 bytes, then "..."
 * (never within an escape or a UTF-8 sequence). Written into 'buf' ('room'
 * >= 8 bytes, NUL-terminated); returns it. */
const char *pc_Error_Quote(char *buf, size_t room, const char *s, size_t n, pc_QuoteStyle style);

#endif
