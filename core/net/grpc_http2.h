/* gRPC over HTTP/2 through libcurl (built with nghttp2): the bytes level.
 *
 * A channel is one target ("http://host:port" for h2c with prior knowledge,
 * "https://host:port" for TLS with verification on) with one curl multi
 * handle, so every call on it shares one multiplexed connection that is
 * reused across calls. A call sends one request message and reads response
 * messages one at a time (unary = exactly one, server streaming = any
 * number), then ends with a status.
 *
 * Implements grpc/grpc doc/PROTOCOL-HTTP2.md (framing, grpc-timeout,
 * metadata, status from trailers or a Trailers-Only response),
 * http-grpc-status-mapping.md, compression.md (gzip) and the
 * grpc-retry-pushback-ms trailer of gRFC A6. See GRPC-TRANSPORT-NOTES.md
 * for what libcurl does with trailers, RST_STREAM and GOAWAY.
 *
 * Debian's libcurl 7.88.1 has two HTTP/2 bugs that grpc_http2.c works
 * around ("connection reuse"): prior knowledge breaks a reused h2c
 * connection, and a response that arrives before the request body is
 * lost (the call is run again on a new connection; no handler saw it).
 *
 * Nothing here raises or prints; failures of a call become its status. Not
 * thread-safe: a channel and its calls belong to one thread. */
#ifndef PC_GRPC_HTTP2_H
#define PC_GRPC_HTTP2_H

#include "base/arena.h"
#include "base/error.h"
#include "base/status.h"
#include "net/grpc.h"

#include <stddef.h>

#define PC_GRPC_MIN_UNREAD ((size_t)1024 * 1024)

typedef struct pc_GrpcChannel pc_GrpcChannel;
typedef struct pc_GrpcCall pc_GrpcCall;

typedef struct {
  const char *target;     /* "http://host:port" or "https://host:port[/]" */
  const char *ca_file;    /* PEM bundle for https; NULL: the system store */
  const char *user_agent; /* NULL: "protocall" */
  size_t max_receive;     /* largest response message in bytes; 0: 4 MiB */
  size_t max_unread;      /* per call, bytes received but not yet read; 0: the
                           * larger of 4 x max_receive and 1 MiB. Never below
                           * max_receive + 5 + 256 KiB (one whole message and
                           * one read). See pc_GrpcCall_Next. */
} pc_GrpcChannelOptions;

/* A channel for opts->target; NULL (with 'err' set) when the target is not
 * an http:// or https:// URL, or on allocation failure. 'alloc' NULL means
 * pc_DefaultAlloc. No connection is made until the first call. */
pc_GrpcChannel *pc_GrpcChannel_New(const pc_GrpcChannelOptions *opts, pc_Alloc *alloc, void *ud,
                                   pc_Error *err);

/* Closes the connection and frees the channel; when calls on it are still
 * alive, that happens when the last one is freed. NULL is allowed. */
void pc_GrpcChannel_Free(pc_GrpcChannel *ch);

/* Starts a call of 'path' ("/pkg.Service/Method") sending the 'len' bytes
 * at 'request' as its one request message. Returns NULL (with 'err' set)
 * only on misuse (invalid metadata) or allocation failure; a call that
 * cannot reach the server still starts and ends with a status. The request
 * bytes are copied. */
pc_GrpcCall *pc_GrpcCall_Start(pc_GrpcChannel *ch, const char *path, const void *request,
                               size_t len, const pc_GrpcCallSettings *settings, pc_Error *err);

/* Waits for the next response message: returns 1 and points '*data' and
 * '*len' at it (valid until the next pc_GrpcCall_Next or _Free), or 0 when
 * the call has ended (see pc_GrpcCall_Status). Never blocks past the call's
 * deadline.
 *
 * Every call on a channel is read whenever any of them is driven, so a
 * server stream its consumer leaves unread fills up while other calls run.
 * When data read for it while another call's pc_GrpcCall_Next runs would
 * take its received-but-unread bytes past the channel's max_unread, the
 * call fails with RESOURCE_EXHAUSTED (local = 1, "server stream: N
 * bytes received but not read (limit M bytes): the consumer fell too far
 * behind"), its buffer is freed (messages not yet read are lost) and the
 * stream is cancelled (RST_STREAM); the connection and other calls go on.
 * Its own pc_GrpcCall_Next reads only when no whole message is held, so
 * a consumer reading alone is never failed, however slow. This is a hard
 * bound, not flow control: libcurl 7.88's pause
 * (CURL_WRITEFUNC_PAUSE) makes other streams on the connection lose their
 * trailers. */
int pc_GrpcCall_Next(pc_GrpcCall *call, const char **data, size_t *len);

/* Bytes the call holds (allocated) for response data received but not yet
 * read; 0 once a call failed for passing max_unread. */
size_t pc_GrpcCall_Buffered(const pc_GrpcCall *call);

/* The status once pc_GrpcCall_Next has returned 0; NULL before. */
const pc_GrpcStatus *pc_GrpcCall_Status(const pc_GrpcCall *call);

/* Response headers ('trailers' 0) or trailers (1) received so far: the
 * count, and entry 'i' (values of "-bin" keys base64-decoded). Pseudo
 * headers are not included. */
size_t pc_GrpcCall_MetadataCount(const pc_GrpcCall *call, int trailers);
const pc_GrpcPair *pc_GrpcCall_Metadata(const pc_GrpcCall *call, int trailers, size_t i);

/* Cancels the call if still running (RST_STREAM) and frees it. NULL is
 * allowed. */
void pc_GrpcCall_Free(pc_GrpcCall *call);

#endif
