/* The server engine on one HTTP/1.1 connection: gRPC-Web and Connect
 * requests over HTTP/1.1 (and 1.0) become the same pc_GrpcServerCall
 * objects an HTTP/2 connection gives (server.h), so a driver serves both
 * alike. Sans-I/O, as pc_GrpcServerConn: bytes in (pc_Http1ServerConn_Recv),
 * bytes out (_Output / _Wrote), calls up (_Accept).
 *
 * How: each request is parsed by http1.h and carried, in memory, as one
 * stream of an HTTP/2 connection to a pc_GrpcServerConn of its own (an
 * nghttp2 client session speaks for the HTTP/1.1 client), so every rule of
 * the protocols (web.h), their limits, gzip and deadlines are the HTTP/2
 * engine's, written once; the response stream comes back as HTTP/1.1:
 * Connect unary with Content-Length (its body held until the stream ends),
 * everything else chunked (HTTP/1.0: until close), response trailers of a
 * stream as chunked trailers. One request at a time: the next pipelined
 * request is parsed once the response to this one is out.
 *
 * Refused with a status and the connection closed: plain gRPC
 * (application/grpc needs HTTP/2 trailers: 505, as grpc-go), a request
 * target not in origin-form (400), a request http1.h refuses
 * (pc_Http1Status_HttpCode: 400, 413, 414, 431, 501, 505), a request head
 * not complete within 'head_timeout' of its first byte (408, slowloris),
 * a request body not complete within the engine's stall_timeout of its
 * head's end, or for a chunked body (a client stream sent as it goes) of
 * the last bytes of it that came (60 s unless set; 408, or the connection
 * closed once its answer has begun: a Content-Length body trickled a byte
 * at a time holds no connection for ever),
 * input piling up past the bound below while a response is going (a
 * pipelining flood); a HEAD's refusal is its head alone, the length of
 * the text a GET's carries (RFC 9110 9.3.2). "Expect: 100-continue" is answered "100 Continue".
 * An answer that ends before its request did (a 4xx while the body is
 * still coming) says "Connection: close" where its head has not gone
 * yet; at most 256 KiB or 2 s more of that body is read and dropped,
 * then the connection closes (the listener's lingering close reads and
 * drops for at most 2 s more: an endless chunked body holds a connection
 * some 4 s at most).
 *
 * Nothing here raises or prints. Not thread-safe. */
#ifndef PC_NET_HTTP1_SERVER_H
#define PC_NET_HTTP1_SERVER_H

#include "net/http1.h"
#include "net/server.h"

typedef struct pc_Http1ServerConn pc_Http1ServerConn;

typedef struct {
  pc_GrpcServerOptions engine; /* the calls' limits, as over HTTP/2 */
  pc_Http1Options http1;       /* request heads (0: http1.h's defaults) */
  size_t max_fields;           /* fields per head; 0: 100 */
  double head_timeout;         /* seconds from a request's first byte to its head's end; 0: 10 */
  size_t max_pending;          /* unread input held while a response goes; 0: 1 MiB plus
                                * max_head */
} pc_Http1ServerOptions;

/* A new connection engine, or NULL with 'err' set on allocation failure.
 * 'alloc' NULL: pc_DefaultAlloc. */
pc_Http1ServerConn *pc_Http1ServerConn_New(const pc_Http1ServerOptions *opts, pc_Alloc *alloc,
                                           void *ud, pc_Error *err);

/* As pc_GrpcServerConn's functions of the same names (server.h). */
void pc_Http1ServerConn_Free(pc_Http1ServerConn *c);
int pc_Http1ServerConn_Recv(pc_Http1ServerConn *c, const void *data, size_t len, double now);
size_t pc_Http1ServerConn_Output(pc_Http1ServerConn *c, const char **data);
void pc_Http1ServerConn_Wrote(pc_Http1ServerConn *c, size_t n);
int pc_Http1ServerConn_Alive(const pc_Http1ServerConn *c);
const char *pc_Http1ServerConn_Why(const pc_Http1ServerConn *c);
void pc_Http1ServerConn_Lost(pc_Http1ServerConn *c);
/* Closes the connection once the response in progress, if any, is out. */
void pc_Http1ServerConn_Shutdown(pc_Http1ServerConn *c);
size_t pc_Http1ServerConn_Running(const pc_Http1ServerConn *c);
/* Also the head timeout (408); returns when the next timer falls due. */
double pc_Http1ServerConn_Expire(pc_Http1ServerConn *c, double now);
pc_GrpcServerCall *pc_Http1ServerConn_Accept(pc_Http1ServerConn *c);

/* The client's first bytes 'p' ('n' of them): 2 when they are HTTP/2's
 * client preface, 1 when they cannot be (an HTTP/1.x request), 0 when too
 * few to tell. */
int pc_Http1_SniffPreface(const char *p, size_t n);

#endif
