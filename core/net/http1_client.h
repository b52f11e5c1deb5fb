/* The client's side of HTTP/1.1 for gRPC-Web and Connect: an HTTP/2
 * client engine (engine.h) carried over one HTTP/1.1 connection, so every
 * rule of the protocols (web.h), gzip, deadlines, metadata and the status
 * of a call stay the engine's, written once. The mirror of http1_server.h:
 * there each HTTP/1.1 request becomes a stream of an in-memory HTTP/2
 * connection; here each stream of the engine becomes an HTTP/1.1 request,
 * and its response, parsed by http1.h (kPc_Http1_Responses, the limits of
 * pc_Http1Options), becomes the stream's response.
 *
 * Sans-I/O with two sides. The HTTP/2 side speaks to the engine: its
 * output goes in (pc_Http1Client_FromEngine), an nghttp2 server session of
 * our own answers it, and what that session sends comes out for the engine
 * (pc_Http1Client_ToEngine / _ToEngineDone). The wire side is the socket's:
 * HTTP/1.1 responses in (pc_Http1Client_Recv, _Eof), requests out
 * (pc_Http1Client_Output / _Wrote).
 *
 * One exchange at a time: the session advertises
 * SETTINGS_MAX_CONCURRENT_STREAMS 1, so the engine opens no second stream
 * and a channel opens another connection for concurrent calls. A request
 * whose stream's request ends (END_STREAM) before the engine is idle
 * (pc_Http1Client_Idle) is written whole, framed by Content-Length: unary
 * and server-streaming calls (a channel queues their message and
 * END_STREAM together: pc_GrpcCall_SendLast). One still open then (a
 * client or bidirectional stream, whose messages follow) is written with
 * Transfer-Encoding: chunked at once, its head and the body so far (none
 * when nothing was sent yet: the server sees the call before its first
 * message), then each DATA frame as a chunk, the last chunk at
 * END_STREAM; its DATA is given back to the engine's flow control
 * only while the unwritten output is under 256 KiB, so the engine's send
 * waits for the socket as for an HTTP/2 window. The response may begin
 * meanwhile (a server that fails the call early); a request body not
 * ended when its stream closes ends the connection (GOAWAY). A
 * bidirectional stream cannot run (the response would wait for a request
 * that waits for it: HTTP/1.1 has no full duplex here, as connect-go says:
 * bidi streams require HTTP/2). The response is passed on as it arrives
 * (chunked, Content-Length or until close), its trailer fields as the
 * stream's trailers; 1xx responses are skipped. Response bytes the engine
 * has not taken yet (its stream window full: the call's reader is slow)
 * are held, at most 'max_pending' bytes with the unparsed input; past that
 * the connection fails (HTTP/1.1 has no flow control to ask the server to
 * wait).
 *
 * After a response: the next request goes on the same connection
 * (keep-alive), unless the response ended it (Connection: close,
 * HTTP/1.0, a body until close) or the engine reset its stream before the
 * response ended (a cancel or a deadline: the rest of that response could
 * not be told from the next one's); then the session sends GOAWAY, the
 * engine takes no new stream and ends once its calls have (engine.h), and
 * the channel opens a new connection. A malformed response (anything
 * http1.h refuses), bytes while no request is out, or a connection closed
 * inside a response fails the connection with the reason
 * (pc_Http1Client_Why: "HTTP/1.1 response: ... at offset N").
 *
 * Nothing here raises or prints. Not thread-safe. */
#ifndef PC_NET_HTTP1_CLIENT_H
#define PC_NET_HTTP1_CLIENT_H

#include "net/grpc.h"
#include "net/http1.h"

typedef struct pc_Http1Client pc_Http1Client;

typedef struct {
  pc_Http1Options http1; /* response heads, chunk lines, trailers, lengths (0: http1.h's) */
  size_t max_fields;     /* fields per response head or trailer section; 0: 100 */
  size_t max_pending;    /* response bytes held for the engine; 0: 16 MiB */
} pc_Http1ClientOptions;

/* A new connection (its SETTINGS are its first output for the engine), or
 * NULL with 'err' set when memory runs out. 'opts' NULL: the defaults;
 * 'alloc' NULL: pc_DefaultAlloc. */
pc_Http1Client *pc_Http1Client_New(const pc_Http1ClientOptions *opts, pc_Alloc *alloc, void *ud,
                                   pc_Error *err);
void pc_Http1Client_Free(pc_Http1Client *c);

/* The HTTP/2 side: 'len' bytes the engine sent. 0 when the connection has
 * failed (pc_Http1Client_Why). */
int pc_Http1Client_FromEngine(pc_Http1Client *c, const void *data, size_t len);
/* Bytes for the engine (its pc_GrpcEngine_Recv), valid until
 * _ToEngineDone of them ('n' bytes taken). */
size_t pc_Http1Client_ToEngine(pc_Http1Client *c, const char **data);
void pc_Http1Client_ToEngineDone(pc_Http1Client *c, size_t n);

/* The wire side: 'len' bytes read from the server. 0 when the connection
 * has failed. */
int pc_Http1Client_Recv(pc_Http1Client *c, const void *data, size_t len);
/* The server closed the connection: a response until close ends, one cut
 * short fails the connection; idle, the connection just ends (GOAWAY). */
void pc_Http1Client_Eof(pc_Http1Client *c);
/* The engine has given all it has for now: a request whose header block
 * arrived, not ended, goes out chunked (a client or bidirectional stream:
 * its head at once, the body so far, if any, as its first chunk). */
void pc_Http1Client_Idle(pc_Http1Client *c);
/* Bytes to write to the server, valid until _Wrote ('n' of them written). */
size_t pc_Http1Client_Output(pc_Http1Client *c, const char **data);
void pc_Http1Client_Wrote(pc_Http1Client *c, size_t n);

/* Why the connection failed; "" while it has not. */
const char *pc_Http1Client_Why(const pc_Http1Client *c);

#endif
