/* HTTP/1.1 messages, sans-I/O (RFC 9112): a parser of requests (a
 * server's) or of responses (a client's), one per connection, and writers
 * of the other direction's heads and chunks. No allocation and no I/O: the
 * caller owns every byte.
 *
 * The parser takes bytes and gives one event per call (pc_Http1Parser_Parse):
 * a message head, body bytes, trailer fields, the end of the message, or
 * an error with its reason and byte offset. It returns how many bytes it
 * consumed; the caller keeps the others and gives them again, first, with
 * whatever it reads next (a head, a chunk-size line and a trailer section
 * are parsed only whole, so they may have to be given more than once; what
 * was already checked is not scanned again). Every pointer an event holds
 * (method, target, fields, body bytes) points into the bytes of the call
 * that gave it: zero-copy, valid as long as the caller keeps those bytes.
 * Field slots come from the caller (pc_Http1Parser_Init), their count is the
 * limit on fields per head or trailer section; the trailers reuse the slots
 * of the head's fields, so a caller keeping those copies them first.
 *
 * At the end of a message the parser stops (kPc_Http1Event_Paused, nothing
 * consumed) until the caller is done with it and calls pc_Http1Parser_Next:
 * pipelined bytes wait in the caller's buffer, so a server answers requests
 * one at a time and reads no more than it can hold.
 *
 * The rules, strict where a lenient reading lets two parsers disagree on
 * where a message ends (request smuggling, RFC 9112 sections 6.3 and 11.2):
 * - Lines end with CRLF; a bare LF or a bare CR is an error (RFC 9112 2.2
 *   allows accepting a bare LF; we do not, anywhere). Empty lines before a
 *   request line are skipped (2.2).
 * - Field names are tokens, the colon follows at once (whitespace before it
 *   is an error, 5.1); values are VCHAR, obs-text, SP and HTAB, surrounding
 *   whitespace removed; any other control byte (NUL, CR, LF among them) is
 *   an error. A line starting with SP or HTAB (obs-fold) is an error (5.2).
 * - Requests are HTTP/1.1 or HTTP/1.0 (another HTTP/x.y: BadVersion, HTTP
 *   505); an HTTP/1.1 request has exactly one Host field, an HTTP/1.0 one
 *   at most one.
 * - Body framing: Transfer-Encoding must be one field whose value is
 *   "chunked" (any other coding, or several fields, is an error; HTTP 501);
 *   Transfer-Encoding with Content-Length is an error (the strict choice of
 *   6.1: the message is refused rather than framed by Transfer-Encoding);
 *   Transfer-Encoding in an HTTP/1.0 message is an error (6.1);
 *   Content-Length is 1*DIGIT, a list or repeated fields only of identical
 *   values ("42, 42"), and no more than max_content_length when it frames a
 *   body (HTTP 413). Chunk sizes are hex digits up to max_content_length,
 *   chunk extensions are skipped (their bytes checked), whitespace only
 *   before a ';'; the trailer section is delivered as fields.
 * - Requests without Transfer-Encoding or Content-Length have no body.
 *   Responses: 1xx, 204, 304 and those to a HEAD request have none; then
 *   chunked, Content-Length, or else the body runs until the connection
 *   closes. 101 Switching Protocols is an error (nothing here upgrades).
 * - Keep-alive: HTTP/1.1 unless Connection lists "close"; HTTP/1.0 never
 *   (its "keep-alive" option is not honoured); a body read until close.
 *
 * Nothing here raises, prints or allocates. Not thread-safe. */
#ifndef PC_NET_HTTP1_H
#define PC_NET_HTTP1_H

#include "base/error.h"

#include <stddef.h>
#include <stdint.h>

#define PC_HTTP1_DEFAULT_MAX_START_LINE     ((size_t)8 * 1024)
#define PC_HTTP1_DEFAULT_MAX_HEAD           ((size_t)16 * 1024)
#define PC_HTTP1_DEFAULT_MAX_CHUNK_LINE     ((size_t)1024)
#define PC_HTTP1_DEFAULT_MAX_TRAILERS       ((size_t)8 * 1024)
#define PC_HTTP1_DEFAULT_MAX_CONTENT_LENGTH ((uint64_t)64 * 1024 * 1024)

/* Limits, each 0 for its default above. Body bytes are the caller's to
 * count (it sees them); a declared length above max_content_length is
 * refused before any is read. */
typedef struct {
  size_t max_start_line;       /* request or status line, CRLF excluded */
  size_t max_head;             /* start line, fields and the blank line */
  size_t max_chunk_line;       /* chunk size and extensions, CRLF excluded */
  size_t max_trailers;         /* the trailer section and its blank line */
  uint64_t max_content_length; /* a Content-Length or one chunk's size */
} pc_Http1Options;

/* A field: name and value, not NUL-terminated. */
typedef struct {
  const char *name;
  size_t name_len;
  const char *value;
  size_t value_len;
} pc_Http1Header;

typedef enum {
  kPc_Http1Status_Ok = 0,
  kPc_Http1Status_BadStartLine,        /* request line or status line */
  kPc_Http1Status_BadVersion,          /* HTTP/x.y other than 1.0 and 1.1 */
  kPc_Http1Status_BadLineEnd,          /* a bare LF or a bare CR */
  kPc_Http1Status_BadField,            /* a field line's name, colon or value */
  kPc_Http1Status_ObsFold,             /* a line starting with SP or HTAB */
  kPc_Http1Status_StartLineTooLong,    /* over max_start_line */
  kPc_Http1Status_HeadTooLarge,        /* over max_head or max_trailers */
  kPc_Http1Status_TooManyFields,       /* more fields than slots */
  kPc_Http1Status_BadHost,             /* no Host in HTTP/1.1, or several */
  kPc_Http1Status_BadContentLength,    /* not digits, different values, overflow */
  kPc_Http1Status_ContentTooLarge,     /* over max_content_length */
  kPc_Http1Status_BadTransferEncoding, /* not one "chunked", or in HTTP/1.0 */
  kPc_Http1Status_AmbiguousLength,     /* Transfer-Encoding and Content-Length */
  kPc_Http1Status_BadChunk,            /* chunk size line or the CRLF after the data */
  kPc_Http1Status_Truncated,           /* the peer closed inside a message */
  kPc_Http1Status_Unsupported,         /* 101 Switching Protocols */
  kPc_Http1Status_AfterClose,          /* bytes after a message that ends the connection */
} pc_Http1Status;

/* The status's name ("BadField"). */
const char *pc_Http1Status_String(pc_Http1Status s);

/* The HTTP status a server answers a request refused with 's': 414, 431,
 * 413, 501 (a transfer coding other than chunked), 505, else 400. */
int pc_Http1Status_HttpCode(pc_Http1Status s);

typedef enum {
  kPc_Http1Body_None,    /* no body */
  kPc_Http1Body_Length,  /* Content-Length bytes */
  kPc_Http1Body_Chunked, /* chunked transfer coding */
  kPc_Http1Body_Close,   /* until the connection closes (responses) */
} pc_Http1Body;

/* A parsed head; its pointers are into the bytes given to the call. */
typedef struct {
  const char *method; /* requests: the method and the request target */
  size_t method_len;
  const char *target;
  size_t target_len;
  int status;         /* responses: the status code (100..999) */
  const char *reason; /* and the reason phrase (possibly empty) */
  size_t reason_len;
  int minor; /* HTTP/1.<minor>: 0 or 1 */
  const pc_Http1Header *fields;
  size_t nfields;
  pc_Http1Body body;      /* how the body is framed */
  int64_t content_length; /* the declared Content-Length, -1 when none */
  int keep_alive;         /* whether the connection may carry another message */
  int expect_continue;    /* a request with "Expect: 100-continue" (HTTP/1.1) */
} pc_Http1Head;

typedef enum {
  kPc_Http1Event_NeedMore,      /* give the unconsumed bytes and more */
  kPc_Http1Event_Head,          /* a request, or a final response: 'head' */
  kPc_Http1Event_Informational, /* a 1xx response: 'head'; the final one follows */
  kPc_Http1Event_Body,          /* body bytes: 'data', 'len' */
  kPc_Http1Event_Trailers,      /* the trailer fields: 'fields', 'nfields' (never 0) */
  kPc_Http1Event_End,           /* the message is complete */
  kPc_Http1Event_Paused,        /* at a message boundary: pc_Http1Parser_Next */
  kPc_Http1Event_Closed,        /* the connection ended between messages */
  kPc_Http1Event_Error,         /* 'status', 'reason', 'offset'; and every call after */
} pc_Http1EventType;

typedef struct {
  pc_Http1EventType type;
  const pc_Http1Head *head;
  const char *data;
  size_t len;
  const pc_Http1Header *fields;
  size_t nfields;
  pc_Http1Status status;
  const char *reason; /* what broke, a static string ("whitespace before the colon") */
  uint64_t offset;    /* where: bytes of the connection before it */
} pc_Http1Event;

typedef enum { kPc_Http1_Requests, kPc_Http1_Responses } pc_Http1Role;

/* One per connection; caller-allocated (a struct in the caller's own), its
 * members private. */
typedef struct {
  pc_Http1Options o;
  pc_Http1Header *fields; /* the caller's slots */
  size_t cap;
  pc_Http1Role role;
  int state;
  int eof;          /* the peer closed: what is given is all there is */
  int head_request; /* the response to come answers a HEAD request */
  int interim;      /* a 1xx came: the final response is still due */
  size_t scan;      /* head or trailers: the lines already checked end here */
  size_t nscan;     /* fields in them */
  size_t seek;      /* the search for the next LF got this far */
  uint64_t remaining;
  uint64_t offset; /* bytes consumed so far */
  pc_Http1Head head;
  pc_Http1Status status;
  const char *reason;
  uint64_t error_at;
} pc_Http1Parser;

/* Starts 'p' parsing requests or responses with 'opts' (NULL: defaults),
 * filling 'fields' (max_fields slots, the limit on fields per head and per
 * trailer section). */
void pc_Http1Parser_Init(pc_Http1Parser *p, pc_Http1Role role, const pc_Http1Options *opts,
                         pc_Http1Header *fields, size_t max_fields);

/* Parses from 'data' ('len' bytes: those left unconsumed by the previous
 * call first, then new ones) until one event, written to '*ev'; returns the
 * bytes consumed. NeedMore asks for more bytes (the unconsumed ones are
 * still needed); after Error every call gives the same error. */
size_t pc_Http1Parser_Parse(pc_Http1Parser *p, const char *data, size_t len, pc_Http1Event *ev);

/* The peer closed the connection: the bytes of later calls are all there
 * are. A body read until close ends (kPc_Http1Event_End), a message cut
 * short is an error (Truncated), nothing pending is kPc_Http1Event_Closed. */
void pc_Http1Parser_Eof(pc_Http1Parser *p);

/* The caller is done with the message that ended (Paused): returns 1 and
 * the parser reads the next one, or 0 when the connection must close (the
 * message asked for it, HTTP/1.0, a body until close, an error; or the
 * caller left a message unfinished, which it may do only to close). Before
 * a message has begun it returns 1 and changes nothing. */
int pc_Http1Parser_Next(pc_Http1Parser *p);

/* Responses: the next response answers a HEAD request (no body, whatever
 * its fields say). Call before its bytes; it holds until its End. */
void pc_Http1Parser_ExpectHead(pc_Http1Parser *p);

/* The error, if any: its status, and in 'err' (when not NULL) "HTTP/1.1
 * request: <reason> at offset N". kPc_Http1Status_Ok when none. */
pc_Http1Status pc_Http1Parser_Error(const pc_Http1Parser *p, pc_Error *err);

/* -- writing ------------------------------------------------------------- */

/* A head to write. A request when 'method' is not NULL (HTTP/1.1, with
 * exactly one Host among 'fields'), else a response with 'status' (100..999;
 * the reason phrase is the standard one, or none). 'body' sets the framing
 * field: Length writes Content-Length: 'content_length', Chunked writes
 * Transfer-Encoding: chunked, None and Close write neither (a response
 * framed by Close also gets Connection: close). 'close' adds Connection:
 * close. 'fields' may not hold Content-Length, Transfer-Encoding or
 * Connection (the writer owns framing). */
typedef struct {
  const char *method; /* NUL-terminated token */
  const char *target; /* NUL-terminated, VCHAR only */
  int status;
  const pc_Http1Header *fields;
  size_t nfields;
  pc_Http1Body body;
  uint64_t content_length;
  int close;
} pc_Http1Out;

/* The longest chunk head pc_Http1_ChunkHead writes (16 hex digits, CRLF). */
#define PC_HTTP1_CHUNK_HEAD_MAX 18

/* Writes the head 'h' into 'buf' when it fits in 'cap' bytes; returns its
 * size either way (call with 'cap' 0 to measure), or 0 with 'err' set when
 * 'h' is invalid: a field name not a token, a value with a control byte or
 * surrounding whitespace, a framing field in 'fields', a request without
 * its one Host, a body where the status allows none (1xx, 204; 304 takes
 * no chunked body). */
size_t pc_Http1_WriteHead(char *buf, size_t cap, const pc_Http1Out *h, pc_Error *err);

/* The head of a chunk of 'size' bytes ("1f\r\n") into 'out'; returns its
 * length. The chunk is that, the 'size' bytes, then CRLF. 'size' 0 would
 * end the body: use pc_Http1_WriteLastChunk. */
size_t pc_Http1_ChunkHead(char out[PC_HTTP1_CHUNK_HEAD_MAX], uint64_t size);

/* A whole chunk of 'len' bytes (head, data, CRLF) into 'buf' when it fits
 * in 'cap'; returns its size either way; 0 when 'len' is 0 (no chunk). */
size_t pc_Http1_WriteChunk(char *buf, size_t cap, const void *data, size_t len);

/* The last chunk ("0\r\n"), the trailer fields and the blank line into
 * 'buf' when they fit in 'cap'; returns their size either way, or 0 with
 * 'err' set on an invalid field (as pc_Http1_WriteHead; Content-Length,
 * Transfer-Encoding and Host are not trailers). */
size_t pc_Http1_WriteLastChunk(char *buf, size_t cap, const pc_Http1Header *trailers, size_t n,
                               pc_Error *err);

#endif
