/* A sans-I/O gRPC client engine on one HTTP/2 connection (nghttp2's
 * session API): bytes from the peer go in (pc_GrpcEngine_Recv), bytes for
 * the peer come out (pc_GrpcEngine_Output / _Wrote), and the state of
 * every stream goes up as events and as what pc_GrpcStream_* report. The
 * engine knows no sockets and no clock: a driver (channel.h) moves the
 * bytes and tells it when time is up.
 *
 * Implements grpc/grpc doc/PROTOCOL-HTTP2.md (request headers, 5-byte
 * length-prefixed messages and their compressed flag, status from trailers
 * or a Trailers-Only response, RST_STREAM codes to status; 1xx blocks
 * before the response skipped, RFC 9113 8.1),
 * http-grpc-status-mapping.md, compression.md (gzip through zlib), the
 * grpc-retry-pushback-ms trailer of gRFC A6, and HTTP/2 flow control (RFC
 * 9113 section 5.2): a stream's window opens only as its messages are
 * read, so an unread stream holds at most its window.
 *
 * A call may speak gRPC-Web or Connect instead (pc_GrpcCallSettings'
 * 'protocol', web.h): the same streams, events and statuses, the
 * protocol's headers, bodies and end message read and written with web.h
 * (core/net/README.md says how).
 *
 * Nothing here raises or prints; failures of a stream become its status.
 * Not thread-safe: an engine and its streams belong to one thread. */
#ifndef PC_NET_ENGINE_H
#define PC_NET_ENGINE_H

#include "base/arena.h"
#include "net/grpc.h"

#include <stddef.h>
#include <stdint.h>

/* The header list limit advertised (SETTINGS_MAX_HEADER_LIST_SIZE) and
 * enforced per response header block when the options say 0. */
#define PC_GRPC_DEFAULT_MAX_HEADER_LIST ((size_t)64 * 1024)

typedef struct pc_GrpcEngine pc_GrpcEngine;
typedef struct pc_GrpcStream pc_GrpcStream;

typedef enum {
  kPc_GrpcEvent_Headers,  /* response headers arrived */
  kPc_GrpcEvent_Message,  /* a whole response message is ready to read */
  kPc_GrpcEvent_Writable, /* bytes of the stream's send buffer went out (flow control) */
  kPc_GrpcEvent_End,      /* the stream ended: its status is final */
  kPc_GrpcEvent_Goaway    /* the peer sent GOAWAY ('stream' NULL) */
} pc_GrpcEvent;

/* Called for each event, from inside pc_GrpcEngine_Recv, _Output, _Lost
 * or a stream function; it must not free the engine or the stream. */
typedef void pc_GrpcEventFn(void *ud, pc_GrpcStream *stream, pc_GrpcEvent event);

typedef struct {
  const char *authority;      /* ":authority", "host:port" */
  int tls;                    /* ":scheme" https (else http) */
  const char *user_agent;     /* NULL: "protocall" */
  size_t max_receive;         /* largest response message in bytes; 0: 4 MiB */
  size_t max_header_list;     /* bytes of one response header block (names,
                               * values, 32 each as RFC 9113 6.5.2 counts);
                               * 0: PC_GRPC_DEFAULT_MAX_HEADER_LIST */
  uint32_t stream_window;     /* per-stream receive window; 0: the default */
  uint32_t connection_window; /* connection receive window; 0: the default */
  pc_GrpcEventFn *on_event;   /* may be NULL */
  void *event_ud;
  /* Non-zero: the connection speaks HTTP/1.1 (http1_client.h) for
   * gRPC-Web and Connect: one stream at a time (the peer's
   * SETTINGS_MAX_CONCURRENT_STREAMS is 1), each request written whole
   * once it ended, or chunked as it is sent when it goes on past a write
   * (a client stream), the response read as it comes; Output and Recv
   * carry HTTP/1.1 bytes, pc_GrpcEngine_Lost ends a response framed by the
   * connection's close first. PINGs are answered in memory (no keepalive
   * check). */
  int http1;
} pc_GrpcEngineOptions;

/* A new engine (the client preface and SETTINGS are its first output), or
 * NULL with 'err' set on allocation failure. 'alloc' NULL means
 * pc_DefaultAlloc. */
pc_GrpcEngine *pc_GrpcEngine_New(const pc_GrpcEngineOptions *opts, pc_Alloc *alloc, void *ud,
                                 pc_Error *err);

/* Ends every stream still running (as pc_GrpcEngine_Lost with "connection
 * closed") and frees the engine; the streams stay valid, detached, until
 * freed. NULL is allowed. */
void pc_GrpcEngine_Free(pc_GrpcEngine *e);

/* Feeds 'len' bytes read from the peer. Returns 1, or 0 when they broke
 * the connection (bad HTTP/2, a peer that is not HTTP/2): every stream has
 * then ended (UNAVAILABLE, or INTERNAL for a protocol error, with what
 * nghttp2 said) and the engine is dead (pc_GrpcEngine_Usable 0). */
int pc_GrpcEngine_Recv(pc_GrpcEngine *e, const void *data, size_t len);

/* Points '*data' at the bytes to send to the peer and returns how many (0:
 * nothing to send now). They stay valid until pc_GrpcEngine_Wrote. */
size_t pc_GrpcEngine_Output(pc_GrpcEngine *e, const char **data);

/* As pc_GrpcEngine_Output, and what nghttp2 has to send is added to output
 * still unwritten (up to about 64 KB in all): one write then carries the
 * frames of every stream opened since the last write. '*data' stays valid
 * only until the next call on the engine (the buffer may move). */
size_t pc_GrpcEngine_OutputAll(pc_GrpcEngine *e, const char **data);

/* Tells the engine that 'n' bytes of its output were sent. */
void pc_GrpcEngine_Wrote(pc_GrpcEngine *e, size_t n);

/* The connection is gone ('why' says how, e.g. "connection closed by the
 * peer"): every running stream ends UNAVAILABLE with 'why', the engine is
 * dead. 'unsent' non-zero: the connection was never ready (its attempt
 * failed), so none of the streams reached the peer (pc_GrpcStatus.unsent). */
void pc_GrpcEngine_Lost(pc_GrpcEngine *e, const char *why, int unsent);

/* Whether a new stream may be opened now: not dead, no GOAWAY received,
 * fewer streams open than the peer's SETTINGS_MAX_CONCURRENT_STREAMS. */
int pc_GrpcEngine_CanOpen(const pc_GrpcEngine *e);

/* Whether the connection is still alive (bytes may be read and written). */
int pc_GrpcEngine_Alive(const pc_GrpcEngine *e);

/* Streams started on the engine and not yet ended. */
size_t pc_GrpcEngine_Running(const pc_GrpcEngine *e);

/* Whether the peer sent GOAWAY. */
int pc_GrpcEngine_GoawayReceived(const pc_GrpcEngine *e);

/* Whether the peer's first SETTINGS frame arrived (RFC 9113 section 3.4:
 * the server's connection preface), so it speaks HTTP/2; over HTTP/1.1
 * ('http1') at once, as the engine makes one up. A channel bounds the wait
 * for it (channel.h, connect_timeout). */
int pc_GrpcEngine_SettingsReceived(const pc_GrpcEngine *e);

/* Queues an HTTP/2 PING (RFC 9113 section 6.7; gRPC's keepalive) unless
 * one sent before still awaits its ACK or the engine is dead. Returns 1
 * when one was queued. The driver times the answer
 * (pc_GrpcEngine_PingPending). */
int pc_GrpcEngine_Ping(pc_GrpcEngine *e);

/* Whether the PING of pc_GrpcEngine_Ping awaits its ACK. */
int pc_GrpcEngine_PingPending(const pc_GrpcEngine *e);

/* Starts a call of 'path' ("/pkg.Service/Method"): the request headers are
 * queued, messages follow with pc_GrpcStream_Send. Returns NULL with 'err'
 * set on misuse (bad path, invalid metadata), allocation failure, or when
 * pc_GrpcEngine_CanOpen is 0. 'settings->timeout' (>= 0) becomes
 * grpc-timeout; the engine itself keeps no clock. 'user' is handed back by
 * pc_GrpcStream_User.
 *
 * The header block is checked before anything is sent: one the connection
 * cannot carry (over the peer's SETTINGS_MAX_HEADER_LIST_SIZE, or over the
 * 64 KiB nghttp2 sends as one block, as it estimates the encoding) gives a
 * stream that has already ended RESOURCE_EXHAUSTED, local, with the sizes
 * in its message (no End event for it). Until the peer's SETTINGS arrive a
 * header list over 8 KiB waits for them, then is checked (its End event
 * then comes from pc_GrpcEngine_Recv). */
pc_GrpcStream *pc_GrpcEngine_Open(pc_GrpcEngine *e, const char *path,
                                  const pc_GrpcCallSettings *settings, void *user, pc_Error *err);

/* Queues one request message of 'len' bytes (copied; gzip when the
 * settings asked). Returns 1, or 0 when the stream has ended or its
 * sending side is closed (nothing queued) or out of memory (the stream then
 * ends RESOURCE_EXHAUSTED). */
int pc_GrpcStream_Send(pc_GrpcStream *s, const void *msg, size_t len);

/* Bytes queued by pc_GrpcStream_Send not yet taken by HTTP/2 (waiting for
 * the peer's flow-control window). */
size_t pc_GrpcStream_Unsent(const pc_GrpcStream *s);

/* Ends the sending side (END_STREAM after the queued messages). */
void pc_GrpcStream_CloseSend(pc_GrpcStream *s);

/* The next response message: 1 with '*data' / '*len' pointing at it
 * (valid until the next call on the stream), 0 when none is ready yet
 * (the stream runs), -1 when the stream has ended and every message was
 * read (see pc_GrpcStream_Status). Reading opens the flow-control window
 * by what was read. */
int pc_GrpcStream_Next(pc_GrpcStream *s, const char **data, size_t *len);

/* 1 when the stream has ended and holds no further message: the next
 * pc_GrpcStream_Next returns -1 (a unary call's end seen with its message,
 * without asking again). */
int pc_GrpcStream_Drained(const pc_GrpcStream *s);

/* Ends the stream with 'code' and 'message' (local = 0) unless it already
 * ended, resetting it with RST_STREAM CANCEL (the server sees
 * CANCELLED): used for cancellation and a missed deadline. */
void pc_GrpcStream_Cancel(pc_GrpcStream *s, pc_Code code, const char *message);

/* The status once the stream has ended; NULL before. */
const pc_GrpcStatus *pc_GrpcStream_Status(const pc_GrpcStream *s);

/* Whether response headers arrived (or the stream ended). */
int pc_GrpcStream_HeadersDone(const pc_GrpcStream *s);

/* Bytes held for response data received but not yet read. */
size_t pc_GrpcStream_Buffered(const pc_GrpcStream *s);

/* Response headers ('trailers' 0) or trailers (1) received so far: the
 * count, and entry 'i' (values of "-bin" keys base64-decoded; pseudo
 * headers not included). A Trailers-Only response (one header block with
 * END_STREAM) is trailers, its headers empty, as grpc-core reads it. */
size_t pc_GrpcStream_MetadataCount(const pc_GrpcStream *s, int trailers);
const pc_GrpcPair *pc_GrpcStream_Metadata(const pc_GrpcStream *s, int trailers, size_t i);

/* Whether the stream ended refused before the server took it: RST_STREAM
 * REFUSED_STREAM, or above the last stream id of a GOAWAY, with nothing
 * received. Such a call is safe to run again on another connection (gRFC
 * A6, transparent retry). */
int pc_GrpcStream_Refused(const pc_GrpcStream *s);

/* The 'user' pointer given to pc_GrpcEngine_Open. */
void *pc_GrpcStream_User(const pc_GrpcStream *s);

/* Cancels the stream if still running (RST_STREAM CANCEL) and frees it.
 * NULL is allowed. Returns 1 when frames for the peer may have been queued
 * (the RST_STREAM, a WINDOW_UPDATE for what was left unread), 0 when not
 * (the stream had ended and nghttp2 had closed it, or NULL). */
int pc_GrpcStream_Free(pc_GrpcStream *s);

#endif
