/* The web's RPC protocols beside gRPC, as pure functions over bytes:
 * gRPC-Web (grpc/grpc-web doc/PROTOCOL-WEB.md) and the Connect protocol
 * (connectrpc.com/docs/protocol). No HTTP here: the server engine
 * (server.c, over HTTP/2) picks a call's protocol with pc_Web_Classify and
 * frames its bodies and status with the functions below, and an HTTP/1.1
 * connection (http1.h) can do the same with its own head and body.
 *
 * What each protocol puts where:
 * - gRPC-Web: the request and response messages are gRPC's 5-byte
 *   length-prefixed messages; the status and trailers go as one last
 *   message whose flags byte is 0x80 and whose body is HTTP/1 header lines
 *   (pc_Web_GrpcWebTrailers), or in the response headers when nothing else
 *   was sent (trailers-only). gRPC-Web-Text is the same body in base64,
 *   which the client may split anywhere across its writes
 *   (pc_WebBase64_Decode keeps the characters of an unfinished group) and
 *   pad in each of them.
 * - Connect unary: the body is the message itself (no prefix),
 *   Content-Encoding gzips it; an error is the JSON body of
 *   pc_Connect_ErrorJson with the HTTP status of pc_Connect_HttpStatus;
 *   response trailers are headers named "trailer-" and the key.
 * - Connect streaming: the same 5-byte envelopes (flag 0x01 compressed),
 *   the last one flagged 0x02 with the end-of-stream JSON
 *   (pc_Connect_EndStream: the error, if any, and the trailers).
 *
 * Nothing here raises, prints or holds state beyond its arguments. */
#ifndef PC_NET_WEB_H
#define PC_NET_WEB_H

#include "base/arena.h"
#include "net/grpc.h"

#include <stddef.h>

/* A call's protocol, from its request method and content-type. */
typedef enum {
  kPc_WebProtocol_None = 0,      /* not one of ours: HTTP 415 */
  kPc_WebProtocol_Grpc,          /* application/grpc[+...] (+json: JSON) */
  kPc_WebProtocol_GrpcWeb,       /* application/grpc-web[+proto|+json] */
  kPc_WebProtocol_GrpcWebText,   /* application/grpc-web-text[+proto|+json] */
  kPc_WebProtocol_ConnectUnary,  /* POST application/proto or application/json */
  kPc_WebProtocol_ConnectStream, /* application/connect+proto or +json */
  kPc_WebProtocol_Http,          /* none of these, served as plain HTTP (REST transcoding):
                                  * never from pc_Web_Classify, the server engine's with
                                  * plain_http (server.h) */
} pc_WebProtocol;

/* The content types pc_Web_Classify takes, as an HTTP 415's Accept-Post
 * lists them (connect-go's answer to a request with none of them). */
#define PC_WEB_ACCEPT_POST                                                                         \
  "application/grpc, application/grpc+proto, application/grpc+json, application/grpc-web, "        \
  "application/grpc-web+proto, application/grpc-web+json, application/grpc-web-text, "             \
  "application/grpc-web-text+proto, application/grpc-web-text+json, "                              \
  "application/connect+proto, application/connect+json, application/proto, application/json"

/* How the messages are written: protobuf's binary form or its JSON form. */
typedef enum { kPc_WebCodec_Proto = 0, kPc_WebCodec_Json } pc_WebCodec;

/* The protocol of a request with method 'method' (NUL-terminated, NULL:
 * POST) and content-type 'ct' of 'ctn' bytes (NULL: none), and in
 * '*codec' its codec. Media types compare without regard to case;
 * parameters after ';' are ignored. gRPC takes any subtype, "json" as
 * the JSON codec (as connect-go serves application/grpc+json), any other
 * as protobuf (as before); the others take "proto" and "json" only
 * (grpc-web without a subtype is proto). Connect unary needs POST (GET
 * requests are not served yet). */
pc_WebProtocol pc_Web_Classify(const char *method, const char *ct, size_t ctn, pc_WebCodec *codec);

/* The protocol's name: "grpc", "grpc-web", "grpc-web-text", "connect" or
 * "connect" (streaming), "http"; "" for None. */
const char *pc_WebProtocol_Name(pc_WebProtocol p);

/* -- base64 across writes ------------------------------------------------- */

/* A base64 decoder fed in pieces: the characters of a group not yet whole
 * wait for the next piece. Padding ends a group, and a new one may follow
 * (gRPC-Web-Text bodies are base64 chunks, each padded). CR and LF are
 * skipped wherever they come (encoders such as coreutils base64 wrap
 * lines, RFC 2045); any other character outside the alphabet is refused.
 * Zero it to start. */
typedef struct {
  unsigned char q[4];
  unsigned n, pad; /* characters of the group, '=' after them */
} pc_WebBase64;

/* Decodes the 'len' characters at 'in' into 'out' (room for len / 4 * 3 +
 * 3 bytes). Returns the bytes written, or (size_t)-1 at a character that
 * is not of the standard alphabet or padding where it cannot be ('*at':
 * its offset in 'in'). */
size_t pc_WebBase64_Decode(pc_WebBase64 *b, const char *in, size_t len, unsigned char *out,
                           size_t *at);

/* Characters of an unfinished group (0 when the input so far is whole). */
size_t pc_WebBase64_Pending(const pc_WebBase64 *b);

/* Padded base64 of the 'len' bytes at 'in' into 'out' (room for
 * (len + 2) / 3 * 4 bytes). Returns the length written. */
size_t pc_Web_Base64Encode(const unsigned char *in, size_t len, char *out);

/* -- gRPC-Web -------------------------------------------------------------- */

/* Appends to 'out' the trailers message of a gRPC-Web response: flags
 * 0x80, the length, then "grpc-status:N\r\n", "grpc-message:..." (when
 * there is one, percent-encoded), "grpc-status-details-bin:..." (when
 * 'st' has details) and the 'n' trailers of 'md' ("-bin" values in
 * base64), each line ending in CRLF. Returns 0 when memory runs out. */
int pc_Web_GrpcWebTrailers(pc_Alloc *alloc, void *ud, pc_GrpcBuf *out, const pc_GrpcStatus *st,
                           const pc_GrpcPair *md, size_t n);

/* -- Connect --------------------------------------------------------------- */

/* Connect's name of 'code' ("canceled", "invalid_argument", ...;
 * "unknown" for a code out of range). */
const char *pc_Connect_CodeName(pc_Code code);

/* The HTTP status of a Connect unary error with 'code' (200 for OK): 499
 * canceled, 400 invalid_argument, failed_precondition and out_of_range,
 * 504 deadline_exceeded, 404 not_found, 409 already_exists and aborted,
 * 403 permission_denied, 429 resource_exhausted, 501 unimplemented, 503
 * unavailable, 401 unauthenticated, else 500. */
int pc_Connect_HttpStatus(pc_Code code);

/* Parses Connect-Timeout-Ms ('s' of 'len' bytes: 1 to 10 digits) into
 * seconds; -1 when it is malformed. */
double pc_Connect_ParseTimeout(const char *s, size_t len);

/* Appends Connect's error JSON for 'st' to 'out':
 * {"code":"...","message":"...","details":[{"type":"...","value":"..."}]}
 * (the details are the google.rpc.Any entries of st->details, a
 * google.rpc.Status, the type without its URL prefix, the value in base64
 * without padding; "message" and "details" only when there are some).
 * Returns 0 when memory runs out. */
int pc_Connect_ErrorJson(pc_Alloc *alloc, void *ud, pc_GrpcBuf *out, const pc_GrpcStatus *st);

/* Appends the end-of-stream message of a Connect streaming response: flags
 * 0x02, the length, then {"error":{...}} (pc_Connect_ErrorJson, when
 * st->code is not OK) and "metadata" with the 'n' trailers of 'md', each
 * key's values in a list ("-bin" values in base64). Returns 0 when memory
 * runs out. */
int pc_Connect_EndStream(pc_Alloc *alloc, void *ud, pc_GrpcBuf *out, const pc_GrpcStatus *st,
                         const pc_GrpcPair *md, size_t n);

/* Appends the google.rpc.Status JSON of 'st' as grpc-gateway writes an
 * error body, every field present: {"code":5,"message":"...","details":[]}
 * (the details are not written: a server that has them writes its own
 * body). Returns 0 when memory runs out. */
int pc_Web_StatusJson(pc_Alloc *alloc, void *ud, pc_GrpcBuf *out, const pc_GrpcStatus *st);

/* -- the client's direction ----------------------------------------------- */

/* A Connect error read back: the error JSON of a unary response or the
 * "error" of an end-of-stream message. 'message' and 'details' (a
 * google.rpc.Status: the code, the message and each detail as a
 * google.protobuf.Any of type URL "type.googleapis.com/" + "type", value
 * the base64-decoded "value") are NUL-terminated, in the arena given. */
typedef struct {
  int present; /* an error was there (else the call succeeded) */
  pc_Code code;
  const char *message;
  size_t message_len;
  const char *details;
  size_t details_len;
} pc_ConnectError;

/* Called for each value of each key of an end-of-stream message's
 * "metadata" (the value as it was written: "-bin" values in base64);
 * returns 0 to stop (the parse fails). */
typedef int pc_ConnectPairFn(void *ud, const char *key, size_t key_len, const char *value,
                             size_t value_len);

/* Parses Connect's error JSON ('json' of 'len' bytes) into '*out': a code
 * name that is not Connect's reads as unknown, a missing "code" leaves
 * out->code as the caller set it (the code of the HTTP status). Returns 1,
 * or 0 with why in 'err' when it is not a JSON object of that shape
 * (nesting deeper than 64, a detail's value not base64, out of memory in
 * 'arena'). */
int pc_Connect_ParseError(pc_Arena *arena, const char *json, size_t len, pc_ConnectError *out,
                          pc_Error *err);

/* Parses the body of a Connect end-of-stream message: {"error":{...}}
 * into '*out' (out->present 0 without one) and each "metadata" value
 * through 'pair'. Returns 1, or 0 with why in 'err'. */
int pc_Connect_ParseEndStream(pc_Arena *arena, const char *json, size_t len, pc_ConnectError *out,
                              pc_ConnectPairFn *pair, void *ud, pc_Error *err);

/* Parses the body of a gRPC-Web trailers message (HTTP/1 header lines
 * "key: value" ending in CRLF or LF; keys lowercased into 'arena' before
 * they are given) through 'pair'. Returns 1, or 0 with why in 'err' at a
 * line without ':' or an empty key. */
int pc_Web_ParseGrpcWebTrailers(pc_Arena *arena, const char *body, size_t len,
                                pc_ConnectPairFn *pair, void *ud, pc_Error *err);

/* The Connect-Timeout-Ms value for 'seconds' (>= 0) into 'out' (at least
 * 12 bytes): milliseconds rounded up, at least 1, at most 10 digits.
 * Returns the length written. */
size_t pc_Connect_FormatTimeout(double seconds, char *out);

#endif
