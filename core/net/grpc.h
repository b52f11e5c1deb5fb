/* gRPC over HTTP/2: the types and helpers every part of core/net shares
 * (engine.h, server.h, channel.h): metadata, timeouts, percent and base64
 * coding, gzip of a message, blocks for nghttp2 and zlib.
 *
 * Implements grpc/grpc doc/PROTOCOL-HTTP2.md (grpc-timeout, metadata
 * names and -bin values, grpc-message percent-encoding). */
#ifndef PC_NET_GRPC_H
#define PC_NET_GRPC_H

#include "base/arena.h"
#include "base/error.h"
#include "base/status.h"

#include <stddef.h>
#include <stdint.h>

#define PC_GRPC_DEFAULT_MAX_RECEIVE       ((size_t)4 * 1024 * 1024)
/* Flow-control windows when the options say 0 (bytes), client and server. */
#define PC_GRPC_DEFAULT_STREAM_WINDOW     ((uint32_t)1024 * 1024)
#define PC_GRPC_DEFAULT_CONNECTION_WINDOW ((uint32_t)16 * 1024 * 1024)

/* One metadata entry. Keys are lowercase; a key ending in "-bin" has a
 * binary value (base64 on the wire, raw bytes here). */
typedef struct {
  const char *key;
  size_t key_len;
  const char *value;
  size_t value_len;
} pc_GrpcPair;

typedef struct {
  double timeout;              /* seconds; < 0: no deadline */
  const pc_GrpcPair *metadata; /* request metadata, 'metadata_count' entries */
  size_t metadata_count;
  int gzip; /* non-zero: compress the request messages with gzip */
  /* > 0: sent as grpc-previous-rpc-attempts, the attempts of this call made
   * before this one (a retry or a hedge; gRFC A6 "Exposed Retry Metadata") */
  unsigned previous_attempts;
  /* The protocol (a pc_WebProtocol of web.h; engine.h): 0 or gRPC,
   * gRPC-Web (binary), gRPC-Web-Text (both bodies in base64: each request
   * message padded, the response decoded across DATA frames) or Connect
   * (unary or streaming). */
  int protocol;
  int json; /* gRPC-Web and Connect: the messages are JSON (+json, application/json) */
  /* Connect unary only: send the call as Connect's GET (web_http.h; for a
   * method with no side effects): the request goes, with the first message
   * pc_GrpcStream_Send gives, as the query of "GET path?connect=v1&..."
   * (proto in base64url, JSON percent-encoded, never compressed). */
  int get;
  /* Engine streams only (pc_GrpcEngine_Open; a channel's calls lend their
   * own): NULL, or an arena that outlives the stream, which then holds the
   * stream itself and what it keeps (its request fields, the received
   * metadata, the status text) instead of an arena of its own; the
   * stream's end frees nothing of it. */
  pc_Arena *arena;
} pc_GrpcCallSettings;

/* The end of a call. 'message' is percent-decoded grpc-message (or a
 * description of a local or connection failure), 'details' the raw bytes
 * of grpc-status-details-bin (a google.rpc.Status), both NUL-terminated
 * and valid until the call is freed. */
typedef struct {
  pc_Code code;
  const char *message;
  size_t message_len;
  const char *details;
  size_t details_len;
  int local;          /* raised on this side for a failure that would recur */
  int unsent;         /* UNAVAILABLE before anything of the call reached the peer (its connection
                       * attempt failed, the reconnection backoff, a closed channel): another
                       * backend may take it */
  int lost;           /* UNAVAILABLE because its connection failed or was lost under it (closed or
                       * reset by the peer, an HTTP/2 connection error, a keepalive timeout, a
                       * failed attempt: pc_GrpcEngine_Lost), not a status the server sent: a
                       * balancer marks the backend failed by it */
  int peer;           /* the status the server sent (grpc-status, Connect's error), not one this
                       * side made: a gateway passes it to its client as it is */
  int has_pushback;   /* grpc-retry-pushback-ms was present */
  int no_retry;       /* ...and negative or malformed: do not retry (A6) */
  double retry_delay; /* ...and valid: the delay in seconds */
} pc_GrpcStatus;

/* Checks one request metadata entry: the key is 1+ chars of [0-9a-z_.-],
 * not reserved (starting with "grpc-" or one of content-type, te,
 * user-agent); a non-"-bin" value is printable ASCII. Returns 0 and writes
 * the reason to 'err' when invalid. */
int pc_GrpcPair_Check(const pc_GrpcPair *p, pc_Error *err);

/* Checks a method path: "/" then no space, control character, '?', '#'
 * or '%'. Returns 0 and writes the reason to 'err' when invalid. */
int pc_Grpc_PathCheck(const char *path, pc_Error *err);

/* Whether the key 'k' of 'n' bytes ends in "-bin" (a binary value). */
int pc_Grpc_IsBinKey(const char *k, size_t n);

/* The grpc-timeout value for 'seconds' (> 0) into 'out' (at least 10
 * bytes): at most 8 digits and a unit (n, u, m, S, M, H), rounded up so
 * it is never shorter than the time left. Returns the length written. */
size_t pc_Grpc_FormatTimeout(double seconds, char *out);

/* Percent-decodes grpc-message in place ('s' of 'len' bytes); an invalid
 * escape is kept as text. Returns the new length. */
size_t pc_Grpc_PercentDecode(char *s, size_t len);

/* Decodes base64 (standard alphabet, padded or not) from 'in' into 'out'
 * (room for len*3/4+3 bytes). Returns the decoded length or (size_t)-1
 * when 'in' is not base64. */
size_t pc_Grpc_Base64Decode(const char *in, size_t len, unsigned char *out);

/* The value of base64 character 'c' (standard alphabet), -1 for another. */
int pc_Grpc_Base64Value(char c);

/* Unpadded base64 of the 'len' bytes at 'in' into 'out' (room for
 * len*4/3+4 bytes). Returns the length written. */
size_t pc_Grpc_Base64Encode(const unsigned char *in, size_t len, char *out);

/* Parses a grpc-timeout value ('s' of 'len' bytes: 1 to 8 digits and a
 * unit n, u, m, S, M or H) into seconds. Returns -1 when it is malformed. */
double pc_Grpc_ParseTimeout(const char *s, size_t len);

/* Percent-encodes grpc-message: bytes outside printable ASCII and '%'
 * become %XX. 'out' has room for len*3+1 bytes; returns the length
 * written (NUL-terminated). */
size_t pc_Grpc_PercentEncode(const char *s, size_t len, char *out);

/* malloc-style blocks through 'alloc' (the size kept in front of each, as
 * pc_Alloc needs it to free), for nghttp2 and zlib: 'ptr' NULL allocates
 * 'n' bytes, 'n' 0 frees 'ptr' (returning NULL), else resizes. NULL on
 * allocation failure. */
void *pc_Grpc_BlockRealloc(pc_Alloc *alloc, void *ud, void *ptr, size_t n);

/* The bytes of a block of pc_Grpc_BlockRealloc ('ptr' not NULL): the 'n'
 * it was last given. */
size_t pc_Grpc_BlockSize(const void *ptr);

/* A growable byte buffer (the engines' output and partial messages). */
typedef struct {
  char *p;
  size_t len, cap;
} pc_GrpcBuf;

/* Makes room for 'extra' more bytes after b->len through 'alloc' (doubling
 * from 256); 0 when the allocator fails or the size would overflow. */
int pc_GrpcBuf_Reserve(pc_Alloc *alloc, void *ud, pc_GrpcBuf *b, size_t extra);

/* Frees b's bytes and empties it. */
void pc_GrpcBuf_Free(pc_Alloc *alloc, void *ud, pc_GrpcBuf *b);

/* Gunzips the 'len' bytes at 'in' (a gRPC message whose compressed flag is
 * set, grpc-encoding gzip) into '*buf' (of '*cap' bytes, grown through
 * 'alloc'; the caller frees it with 'alloc' and '*cap'), at most 'max'
 * bytes. Returns the decompressed length, or (size_t)-1 when 'in' is not
 * one whole gzip stream, (size_t)-2 when the result exceeds 'max',
 * (size_t)-3 out of memory. */
size_t pc_Grpc_Gunzip(pc_Alloc *alloc, void *ud, const void *in, size_t len, size_t max, char **buf,
                      size_t *cap);

/* Appends one length-prefixed message (PROTOCOL-HTTP2.md
 * "Length-Prefixed-Message") of the 'len' bytes at 'msg' to 'out', through
 * 'alloc': gzipped with the compressed flag set when 'gzip', as it is with
 * the flag clear otherwise. Returns 0 (nothing appended) when memory runs
 * out or the framed message would exceed 2^32-1 bytes. */
int pc_Grpc_FrameMessage(pc_Alloc *alloc, void *ud, pc_GrpcBuf *out, const void *msg, size_t len,
                         int gzip);

#endif
