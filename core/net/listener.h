/* A gRPC listener: a listening TCP socket (IPv4 or IPv6) whose accepted
 * connections each run a server engine over the built-in driver
 * (socket.h), h2c or TLS (ALPN h2 or http/1.1, optionally mutual TLS): the
 * HTTP/2 one (server.h) when the first bytes are HTTP/2's client preface,
 * else the HTTP/1.1 one (http1_server.h: gRPC-Web and Connect; its
 * request heads must be complete within the handshake timeout).
 *
 * The listener never blocks: pc_Grpc_PumpAll polls its sockets with those
 * of client channels (channel.h), so one thread serves and calls. New calls
 * are taken with pc_GrpcListener_Accept; a call belongs to the driver from
 * then on. Limits: max connections (more are accepted and closed at once),
 * a handshake timeout (TLS done, or for h2c the first bytes), an idle
 * timeout (no call and no byte for that long: GOAWAY, then close) and a
 * maximum connection age (GOAWAY, then close after a grace period). A
 * connection whose engine is done lingers up to 2 s (pc_NetSocket_Linger:
 * its sending side ended, what arrives dropped) until the peer closes, so
 * the peer reads the GOAWAY instead of a reset; live and lingering
 * connections hold at most max_connections sockets together (a new
 * connection ends the oldest linger). When accept fails for want of file
 * descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM) the listening
 * socket is left out of the poll set for 0.1 s, so a pump does not spin
 * on the connection waiting in the backlog. Not thread-safe. */
#ifndef PC_NET_LISTENER_H
#define PC_NET_LISTENER_H

#include "net/channel.h"
#include "net/resolve.h"
#include "net/server.h"

typedef struct pc_GrpcListener pc_GrpcListener;

typedef struct {
  const char *host;                 /* address to bind ("127.0.0.1", "::1"); NULL: any */
  const char *port;                 /* decimal; "0" picks a free port */
  const char *cert_file, *key_file; /* PEM; cert_file set: TLS */
  const char *client_ca_file;       /* PEM bundle: client certificates required */
  size_t max_connections;           /* 0: 1000 */
  double handshake_timeout;         /* seconds; 0: 10 */
  double idle_timeout;              /* seconds; 0: 300; < 0: none */
  /* gRFC A9's MAX_CONNECTION_AGE: seconds after which a connection gets
   * GOAWAY (its calls finish, new ones go to a new connection, so clients
   * spread over backends that joined since), each connection's age drawn
   * within +-10 % of it; 0: none. max_connection_age_grace: seconds its
   * calls may take after that GOAWAY before the connection is closed (the
   * calls cancelled); 0: no limit. */
  double max_connection_age, max_connection_age_grace;
  pc_GrpcServerOptions engine; /* per connection */
  /* Non-NULL: listen on a Unix-domain socket instead of host and port:
   * the file 'unix_path' (longer than sun_path holds is refused), or with
   * 'unix_abstract' a name in Linux's abstract namespace (no file). A
   * file already there is removed only when it is a socket nobody
   * listens on (connect refused: a stale one); one in use, or anything
   * else, fails the bind. 'unix_mode' (e.g. 0660; 0: what the umask
   * gives) is set on the file before it listens. The file is removed by
   * pc_GrpcListener_Shutdown / _Free when it is still the one bound. */
  const char *unix_path;
  int unix_abstract;
  unsigned unix_mode;
} pc_GrpcListenerOptions;

/* Binds and listens. NULL with 'err' set when the address does not
 * resolve or bind (in use, not local), TLS files do not load, or on
 * allocation failure. 'alloc' NULL: pc_DefaultAlloc. */
pc_GrpcListener *pc_GrpcListener_New(const pc_GrpcListenerOptions *opts, pc_Alloc *alloc, void *ud,
                                     pc_Error *err);

/* The port bound (the one picked for "0"; 0 for a Unix-domain socket). */
int pc_GrpcListener_Port(const pc_GrpcListener *l);

/* Replaces the CORS options of a listener made with some (its
 * connections' included) by a copy of 'cors', for the requests that come
 * from now on (a preflight's answer is complete when its request comes).
 * 0 with 'err' set when the listener has no CORS or memory runs out (the
 * options it had stay). */
int pc_GrpcListener_SetCors(pc_GrpcListener *l, const pc_WebCors *cors, pc_Error *err);

/* The next new call of any connection, or NULL. */
pc_GrpcServerCall *pc_GrpcListener_Accept(pc_GrpcListener *l);

/* Graceful shutdown: closes the listening socket and sends every
 * connection GOAWAY (server.h); connections end as their calls finish. */
void pc_GrpcListener_Shutdown(pc_GrpcListener *l);

/* Closes every connection now (their calls are cancelled). */
void pc_GrpcListener_CloseAll(pc_GrpcListener *l);

/* The wake list of the calls taken from this listener (wake.h; they take
 * part once given a token, pc_GrpcServerCall_SetWakeToken): a driver reads
 * and clears it after each pc_Grpc_PumpAll. */
pc_GrpcWakeList *pc_GrpcListener_Wake(pc_GrpcListener *l);

/* Connections open (not those lingering after their end). */
size_t pc_GrpcListener_Connections(const pc_GrpcListener *l);

/* Closes the sockets and frees the listener; calls taken stay valid,
 * cancelled, until freed. NULL is allowed. */
void pc_GrpcListener_Free(pc_GrpcListener *l);

/* One round of I/O over 'n' channels, 'm' listeners and 'nr' resolvers
 * (resolve.h), as pc_Grpc_Pump: sends what is queued, starts the
 * resolutions that are due, waits at most 'timeout' seconds (capped by the
 * nearest deadline) for any socket, accepts connections, reads, enforces
 * deadlines and timeouts. Returns 1, or 0 when poll(2) failed. */
int pc_Grpc_PumpAll(pc_GrpcChannel *const *chs, size_t n, pc_GrpcListener *const *ls, size_t m,
                    pc_NetResolver *const *rs, size_t nr, double timeout);

/* An upper bound on the entries pc_Grpc_PollFds fills for these now (the
 * room to give it so that every socket is listed). */
size_t pc_Grpc_PollCount(pc_GrpcChannel *const *chs, size_t n, pc_GrpcListener *const *ls, size_t m,
                         size_t nr);

/* For a host that polls in its own loop: what one pc_Grpc_PumpAll would
 * poll, without polling. Sends what is queued, enforces deadlines and
 * timeouts, fills at most 'max' entries of 'fds' (fd and events POLLIN /
 * POLLOUT; give it pc_Grpc_PollCount entries; 0 when out of memory) and
 * returns how many;
 * lowers '*timeout' (seconds) to when the next deadline or timer is due.
 * Once poll(2) says one is ready, or '*timeout' passed, a pc_Grpc_PumpAll
 * with timeout 0 does the work. */
size_t pc_Grpc_PollFds(pc_GrpcChannel *const *chs, size_t n, pc_GrpcListener *const *ls, size_t m,
                       pc_NetResolver *const *rs, size_t nr, struct pollfd *fds, size_t max,
                       double *timeout);

#endif
