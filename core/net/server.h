/* A sans-I/O gRPC server engine on one HTTP/2 connection (nghttp2's
 * server session): bytes from the client go in (pc_GrpcServerConn_Recv),
 * bytes for the client come out (pc_GrpcServerConn_Output / _Wrote), and
 * the calls the client starts come up as pc_GrpcServerCall objects the
 * driver takes with pc_GrpcServerConn_Accept. The engine knows no sockets;
 * the driver (listener.h) moves the bytes and passes the time in.
 *
 * Each call speaks the protocol its content-type names (web.h): gRPC,
 * gRPC-Web (binary or text), Connect unary or streaming, its messages in
 * protobuf or JSON (pc_GrpcServerCall_Codec); the handler's side of the
 * API is the same for all, the engine frames each and writes its status.
 *
 * Implements grpc/grpc doc/PROTOCOL-HTTP2.md from the server's side:
 * request headers (:method POST, :path, content-type application/grpc*,
 * grpc-timeout (a value outside its grammar is INTERNAL), grpc-encoding,
 * metadata), 5-byte length-prefixed messages
 * (gzip through zlib; any other grpc-encoding is UNIMPLEMENTED before the
 * handler runs; gzipped responses when the driver asks and the client's
 * grpc-accept-encoding allows), response headers, messages and trailers (grpc-status,
 * grpc-message percent-encoded, grpc-status-details-bin), a Trailers-Only
 * response when nothing was sent, HTTP 415 for a content-type of none of
 * the protocols, RST_STREAM NO_ERROR after the trailers when the client still
 * sends. Flow control (RFC 9113 section 5.2) both ways: a call's receive
 * window opens only as its messages are read, and responses queue only as
 * far as the driver lets them (pc_GrpcServerCall_Unsent).
 *
 * Protection, each with a default a public server needs: SETTINGS max
 * concurrent streams (more are refused with RST_STREAM REFUSED_STREAM by
 * nghttp2), calls held by the driver (twice that), the largest request
 * message (RESOURCE_EXHAUSTED), the header list size (advertised; a block
 * over it resets the stream; response blocks kept within the client's),
 * streams reset by the client and SETTINGS or
 * PING frames, each a token bucket per connection (empty: GOAWAY
 * ENHANCE_YOUR_CALM and the connection ends), CONTINUATION frames per
 * header block, request messages still arriving (the stream window of a
 * message above it is given back only within the connection's
 * incomplete_budget, so a connection holds at most that budget and a
 * stream window per stream of request bytes, not max_receive per stream;
 * past it clients wait on their stream windows) and stalled (a message
 * half-received, its client free to send and sending nothing for
 * stall_timeout: RESOURCE_EXHAUSTED "request message stalled").
 *
 * Nothing here raises or prints. Not thread-safe. */
#ifndef PC_NET_SERVER_H
#define PC_NET_SERVER_H

#include "base/arena.h"
#include "net/grpc.h"
#include "net/wake.h"
#include "net/web.h"
#include "net/web_http.h"

#include <stddef.h>
#include <stdint.h>

#define PC_GRPC_SERVER_DEFAULT_MAX_STREAMS     100
#define PC_GRPC_SERVER_DEFAULT_MAX_HEADER_LIST ((size_t)16 * 1024)
/* Token buckets: 'burst' tokens at first and at most, 'rate' back per
 * second. */
#define PC_GRPC_SERVER_DEFAULT_RESET_BURST     200
#define PC_GRPC_SERVER_DEFAULT_RESET_RATE      20
#define PC_GRPC_SERVER_DEFAULT_CONTROL_BURST   500
#define PC_GRPC_SERVER_DEFAULT_CONTROL_RATE    20
/* Seconds a request message may stay half-received while the client may
 * send (nginx's client_body_timeout is as long). */
#define PC_GRPC_SERVER_DEFAULT_STALL_TIMEOUT   60

typedef struct pc_GrpcServerConn pc_GrpcServerConn;
typedef struct pc_GrpcServerCall pc_GrpcServerCall;

typedef struct {
  uint32_t max_concurrent_streams;      /* 0: PC_GRPC_SERVER_DEFAULT_MAX_STREAMS */
  size_t max_receive;                   /* largest request message in bytes; 0: 4 MiB */
  size_t max_header_list;               /* 0: PC_GRPC_SERVER_DEFAULT_MAX_HEADER_LIST */
  uint32_t stream_window;               /* per-stream receive window; 0: 1 MiB */
  uint32_t connection_window;           /* connection receive window; 0: 16 MiB */
  uint32_t reset_burst, reset_rate;     /* 0: the defaults above */
  uint32_t control_burst, control_rate; /* 0: the defaults above */
  size_t incomplete_budget;             /* bytes of request messages still arriving whose
                                         * window is given back; 0: the connection window
                                         * (at least max_receive + 5 either way) */
  double stall_timeout;  /* seconds a request message may stay half-received while the
                          * client may send; 0: PC_GRPC_SERVER_DEFAULT_STALL_TIMEOUT;
                          * < 0: none */
  pc_GrpcWakeList *wake; /* where calls with a wake token are listed; NULL: none */
  /* CORS (web_http.h; NULL: none, OPTIONS is answered 415 as any request
   * that is not the protocols'): a preflight (OPTIONS with
   * Access-Control-Request-Method) is answered 204 with the methods and
   * headers gRPC-Web and Connect need; a response to an allowed Origin
   * carries Access-Control-Allow-Origin and the exposed headers. Kept by
   * pointer: it must outlive the engine. */
  const pc_WebCors *cors;
  int plain_http;          /* a request of none of the RPC protocols is queued as a
                            * kPc_WebProtocol_Http call (its body whole, as one message,
                            * answered with pc_GrpcServerCall_Respond) instead of HTTP 415 */
  int queue_unknown_types; /* so is one of those, but a GET or HEAD stays a Connect
                            * GET as without plain_http: the driver answers 415
                            * with what the method of its path takes in
                            * Accept-Post (a streaming one no Connect unary) */
} pc_GrpcServerOptions;

/* A new connection engine (its SETTINGS are its first output), or NULL
 * with 'err' set on allocation failure. 'alloc' NULL: pc_DefaultAlloc. */
pc_GrpcServerConn *pc_GrpcServerConn_New(const pc_GrpcServerOptions *opts, pc_Alloc *alloc,
                                         void *ud, pc_Error *err);

/* Cancels every call still running and frees the engine; calls taken by
 * the driver stay valid, detached (cancelled), until freed. NULL is
 * allowed. */
void pc_GrpcServerConn_Free(pc_GrpcServerConn *c);

/* Feeds 'len' bytes read from the client at monotonic time 'now'
 * (seconds; the token buckets and deadlines run on it). Returns 1, or 0
 * when the bytes broke the connection (not HTTP/2, a protocol error) or it
 * is dead; pc_GrpcServerConn_Why says why. A broken connection, or one a
 * flood ended with GOAWAY ENHANCE_YOUR_CALM, is dead once its output is
 * out (pc_GrpcServerConn_Alive). */
int pc_GrpcServerConn_Recv(pc_GrpcServerConn *c, const void *data, size_t len, double now);

/* Points '*data' at bytes to send and returns how many (0: none now). They
 * stay valid until pc_GrpcServerConn_Wrote. */
size_t pc_GrpcServerConn_Output(pc_GrpcServerConn *c, const char **data);

/* Tells the engine that 'n' bytes of its output were sent. */
void pc_GrpcServerConn_Wrote(pc_GrpcServerConn *c, size_t n);

/* Whether the connection may still carry bytes (0 once nghttp2 wants
 * neither to read nor to write and the output is out, or after
 * pc_GrpcServerConn_Lost). */
int pc_GrpcServerConn_Alive(const pc_GrpcServerConn *c);

/* What ended the connection ("" while it is fine). */
const char *pc_GrpcServerConn_Why(const pc_GrpcServerConn *c);

/* The socket is gone: every call still running is cancelled. */
void pc_GrpcServerConn_Lost(pc_GrpcServerConn *c);

/* Graceful shutdown: GOAWAY NO_ERROR with the last stream id taken; calls
 * already started go on, new streams are refused; the connection ends
 * once they are done. */
void pc_GrpcServerConn_Shutdown(pc_GrpcServerConn *c);

/* Calls running (not yet finished and not yet closed by nghttp2). */
size_t pc_GrpcServerConn_Running(const pc_GrpcServerConn *c);

/* Finishes with DEADLINE_EXCEEDED every call whose grpc-timeout passed by
 * 'now'; returns when the next one falls due (monotonic seconds), or -1
 * when none. The calls are scanned only once that time has come, so it
 * may be the deadline of a call that ended since: the call then made
 * finds the next. */
double pc_GrpcServerConn_Expire(pc_GrpcServerConn *c, double now);

/* The next call the client started that the driver has not taken yet
 * (request headers complete and valid), or NULL. The driver owns it from
 * here: it answers with pc_GrpcServerCall_Finish and frees it. */
pc_GrpcServerCall *pc_GrpcServerConn_Accept(pc_GrpcServerConn *c);

/* The call's ":path" ("/pkg.Service/Method", NUL-terminated). */
const char *pc_GrpcServerCall_Path(const pc_GrpcServerCall *s);

/* The grpc-timeout (Connect-Timeout-Ms for Connect) in seconds, -1 when none; the monotonic
 * deadline derived from it ('now' of the Recv that completed the headers), -1. */
double pc_GrpcServerCall_Timeout(const pc_GrpcServerCall *s);
double pc_GrpcServerCall_Deadline(const pc_GrpcServerCall *s);

/* Request metadata: the count, and entry 'i' (pseudo headers and
 * content-type, te, grpc-timeout, grpc-encoding, grpc-accept-encoding left
 * out; values of "-bin" keys base64-decoded). */
size_t pc_GrpcServerCall_MetadataCount(const pc_GrpcServerCall *s);
const pc_GrpcPair *pc_GrpcServerCall_Metadata(const pc_GrpcServerCall *s, size_t i);

/* The next request message: 1 with '*data' / '*len' pointing at it (valid
 * until the next call on 's'), 0 when none is ready yet, -1 at the end of
 * the client's stream or once the call is over (finished, cancelled).
 * Reading opens the flow-control window by what was read. */
int pc_GrpcServerCall_Next(pc_GrpcServerCall *s, const char **data, size_t *len);

/* The call's protocol (gRPC, gRPC-Web, gRPC-Web-Text, Connect unary or
 * streaming, from its content-type: web.h) and the codec of its messages
 * (protobuf or JSON): Next returns and Send takes the messages in that
 * codec; the engine does the rest of the protocol. */
pc_WebProtocol pc_GrpcServerCall_Protocol(const pc_GrpcServerCall *s);
pc_WebCodec pc_GrpcServerCall_Codec(const pc_GrpcServerCall *s);

/* The HTTP major version the call came over: 2, or 1 for a request of an
 * HTTP/1.x connection (http1_server.h, which marks its calls with
 * pc_GrpcServerCall_SetHttp1). A driver refuses the shapes HTTP/1.1
 * cannot carry (bidirectional streams) by it. */
int pc_GrpcServerCall_HttpVersion(const pc_GrpcServerCall *s);

/* The request's HTTP method ("POST"; "GET" for a Connect GET, whose query
 * the engine reads into the request message once the driver asks,
 * pc_GrpcServerCall_ReadQuery, or for a plain HTTP call; a GET is
 * Connect's when its query has connect=v1, or else unless the listener
 * has plain_http or its content type is gRPC's, gRPC-Web's or Connect
 * streaming's; "HEAD" for a Connect GET's HEAD, read as the GET and
 * answered with its head alone; any method of gRPC, gRPC-Web and Connect
 * streaming requests, which take POST alone). A driver refuses a GET of a
 * method with side effects, and another method than POST of those
 * protocols, by pc_GrpcServerCall_NotAllowed, as connect-go does; such a
 * request to a path that names no method gets what its POST would
 * (pc_GrpcServerCall_NotFound, the head alone for a HEAD). */
const char *pc_GrpcServerCall_HttpMethod(const pc_GrpcServerCall *s);

/* A Connect GET (or its HEAD) is queued with its query unread and cut off
 * its path (pc_GrpcServerCall_Path is "/pkg.Service/Method"), as
 * connect-go checks the path (404) and the method (405) before the query:
 * the driver answers it NotFound or NotAllowed, or, for a method that
 * takes GETs, calls this to read the query (the codec, the compression,
 * the message; then Connect-Timeout-Ms as the deadline). Returns 1 when
 * the call goes on (Next gives its message, Codec and Timeout are its
 * own), 0 when the query was bad (or a body came with the GET): the call
 * was answered invalid_argument (resource_exhausted past the receive
 * limit) and is over. Before it a Connect GET's Next gives no message,
 * its Codec is protobuf's and its Timeout -1. Any other call: 1 while it
 * is not over. */
int pc_GrpcServerCall_ReadQuery(pc_GrpcServerCall *s);

/* Answers the call HTTP 405 with "Allow: " 'allow' (e.g. "POST"; copied)
 * and no body, instead of running it; the call is then over (Done once
 * the answer is out). */
void pc_GrpcServerCall_NotAllowed(pc_GrpcServerCall *s, const char *allow);

/* Answers an OPTIONS request to a path the driver serves HTTP 204 with
 * "Allow: " 'allow' (copied; RFC 9110 9.3.7: what the path takes) and no
 * body, the CORS headers as other answers' (a browser's preflight, with
 * Access-Control-Request-Method, is the engine's own answer with CORS
 * on); the call is then over. */
void pc_GrpcServerCall_AnswerOptions(pc_GrpcServerCall *s, const char *allow);

/* The request's content-type (NULL: none). */
const char *pc_GrpcServerCall_ContentType(const pc_GrpcServerCall *s);

/* Plain HTTP calls (kPc_WebProtocol_Http; REST transcoding): the request
 * body is one message (pc_GrpcServerCall_Next, all of it once it has
 * ended; an empty body is an empty message), bounded by max_receive (past
 * it the engine answers 413 with a google.rpc.Status JSON body). The
 * driver answers with pc_GrpcServerCall_Respond (status and headers),
 * then pc_GrpcServerCall_Send (body bytes as they are, no framing), then
 * pc_GrpcServerCall_Finish (ends the body; no trailers). A call finished
 * (or failed by the engine) before Respond is answered with the HTTP
 * status of its code (pc_Connect_HttpStatus) and pc_Web_StatusJson's
 * body.
 *
 * SetHttp turns a Connect unary call whose response has not started into
 * a plain HTTP one (a REST request that looked like Connect unary: POST
 * application/json to a path that names no method); returns whether the
 * call is plain HTTP now. */
int pc_GrpcServerCall_SetHttp(pc_GrpcServerCall *s);

/* Submits the response head of a plain HTTP call: 'status' (200..599)
 * and the 'n' headers of 'h' (lowercase token names; values without a
 * control byte but HTAB, RFC 9110's field-value; content-length tells an
 * HTTP/1.1 client the body's length). Returns 1, or 0 with why in 'err':
 * not a plain HTTP call, the head was sent already, the call is over, a
 * bad status or header. */
int pc_GrpcServerCall_Respond(pc_GrpcServerCall *s, int status, const pc_GrpcPair *h, size_t n,
                              pc_Error *err);
void pc_GrpcServerCall_SetHttp1(pc_GrpcServerCall *s);

/* Frees the buffer holding the last message pc_GrpcServerCall_Next
 * decompressed (up to the receive limit plus 1 KiB), once the caller has
 * copied it: a call whose handler runs long then holds no second copy.
 * The pointer Next returned is invalid afterwards; the next compressed
 * message allocates a new buffer. */
void pc_GrpcServerCall_Release(pc_GrpcServerCall *s);

/* Whether the call is over for the handler: the client reset it, the
 * connection went, the deadline passed, or the engine ended it (a message
 * over the limit, bad gzip, a truncated message). */
int pc_GrpcServerCall_Cancelled(const pc_GrpcServerCall *s);

/* Queues response metadata for the headers ('trailers' 0, before the first
 * message) or the trailers (1). Keys must pass pc_GrpcPair_Check. Returns
 * 0 with 'err' set on a bad pair, out of memory, or when that block is
 * already sent. */
int pc_GrpcServerCall_AddMetadata(pc_GrpcServerCall *s, int trailers, const pc_GrpcPair *p,
                                  pc_Error *err);

/* Queues the trailer grpc-retry-pushback-ms of gRFC A6, the server's
 * pushback: 'ms' milliseconds before the client's next attempt (capped at
 * INT32_MAX), or "-1" for a negative 'ms' (do not retry). The one reserved
 * key a handler may have sent, so pc_GrpcServerCall_AddMetadata refuses it.
 * Returns 0 when the trailers are already sent or out of memory. */
int pc_GrpcServerCall_SetPushback(pc_GrpcServerCall *s, long long ms);

/* Queues one response message (copied; the response headers go first),
 * gzipped when pc_GrpcServerCall_SetCompression turned gzip on. Returns 1,
 * or 0 when the call is over or finished, or the response headers are
 * larger than will go out (the limit of pc_GrpcServerCall_Finish): the
 * call then ends RESOURCE_EXHAUSTED "response headers of N bytes exceed
 * the limit of M bytes". */
int pc_GrpcServerCall_Send(pc_GrpcServerCall *s, const void *msg, size_t len);

/* Gives the call a wake token (wake.h; 0: none): from now on, what its
 * waiter may care about lists 'token' in the options' wake list: a whole
 * request message or the end of the request arrived, response bytes went
 * out (pc_GrpcServerCall_Unsent fell), the call was cancelled, reset,
 * timed out or failed, or its connection went. */
void pc_GrpcServerCall_SetWakeToken(pc_GrpcServerCall *s, uint64_t token);

/* Whether the message pc_GrpcServerCall_Next returned last came with the
 * compressed flag set (gzip on the wire; PROTOCOL-HTTP2.md
 * "Compressed-Flag"); 0 before any. */
int pc_GrpcServerCall_Compressed(const pc_GrpcServerCall *s);

/* Response compression from the next pc_GrpcServerCall_Send on: 'gzip'
 * nonzero gzips each message (the response headers, when not yet sent,
 * declare grpc-encoding gzip), 0 sends them uncompressed (flag clear;
 * allowed whatever the headers declared). Returns 1, or 0 when gzip cannot
 * be used: the client's grpc-accept-encoding does not list it, or the
 * headers went out without it; messages then go uncompressed. */
int pc_GrpcServerCall_SetCompression(pc_GrpcServerCall *s, int gzip);

/* Response bytes queued and not yet taken by HTTP/2 (the client's window
 * is closed): a sender waits while this is above its bound. */
size_t pc_GrpcServerCall_Unsent(const pc_GrpcServerCall *s);

/* Ends the call with 'code', 'message' ('len' bytes, percent-encoded on
 * the wire) and 'details' (the bytes of a google.rpc.Status for
 * grpc-status-details-bin; NULL: none): the trailers follow the queued
 * messages, or a Trailers-Only response when nothing was sent. A status
 * block larger than will go out (nghttp2 sends none over 64 KiB, the
 * client's SETTINGS_MAX_HEADER_LIST_SIZE when lower) goes as
 * RESOURCE_EXHAUSTED "response trailers of N bytes exceed the limit of M
 * bytes", without the trailer metadata and details (grpc-core's answer);
 * if even that does not fit, RST_STREAM INTERNAL_ERROR. Ignored once the
 * call is over or finished. */
void pc_GrpcServerCall_Finish(pc_GrpcServerCall *s, pc_Code code, const char *message, size_t len,
                              const char *details, size_t details_len);

/* Finishes the call as pc_GrpcServerCall_Finish(s, UNIMPLEMENTED, message,
 * len, NULL, 0) does, for a method the server does not have: over Connect
 * (unary and streaming) and gRPC-Web the response's HTTP status is then
 * 404 Not Found instead of 501 or 200, as connect-go answers an unknown
 * procedure (its handlers call http.NotFound) and connect-node's adapter
 * does; the clients of both protocols read 404 as UNIMPLEMENTED (Connect's
 * HTTP-to-code table, gRPC's doc/http-grpc-status-mapping.md). Over gRPC
 * it is the usual 200 with grpc-status 12, as gRPC's own servers answer.
 * Ignored once the call is over or finished. */
void pc_GrpcServerCall_NotFound(pc_GrpcServerCall *s, const char *message, size_t len);

/* Whether pc_GrpcServerCall_Finish ran and the stream is closed (the
 * response is out or the client went away). */
int pc_GrpcServerCall_Done(const pc_GrpcServerCall *s);

/* Frees the call: one finished whose response is still going out is
 * handed back to the engine, which frees it when the stream closes (or the
 * connection goes); any other still open is reset (RST_STREAM CANCEL).
 * NULL is allowed. */
void pc_GrpcServerCall_Free(pc_GrpcServerCall *s);

#endif
