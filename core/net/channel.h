/* gRPC channels: the engine (engine.h) over the built-in driver
 * (socket.h), with connections managed per target.
 *
 * A channel is one target with one HTTP/2 connection, shared by every call
 * on it; a second connection opens when the first takes no new streams
 * (the peer's max concurrent streams, a GOAWAY, a failure), and a
 * connection is closed once it is dead and none of its calls is alive. A
 * call the server refused before taking it (REFUSED_STREAM, above a
 * GOAWAY's last stream id) runs again on another connection, up to 3
 * times, without being counted as an attempt (gRFC A6 transparent retry).
 * Failed connection attempts back off, and idle connections can be
 * checked with keepalive PINGs (pc_GrpcChannelOptions).
 *
 * Nothing blocks but pc_Grpc_Pump (and the getaddrinfo of a new
 * connection): calls are started, fed and read without waiting, and the
 * caller runs pc_Grpc_Pump over its channels until what it waits for is
 * there. That is how calls from many coroutines interleave on one
 * connection. Deadlines are enforced by pc_Grpc_Pump. Not thread-safe. */
#ifndef PC_NET_CHANNEL_H
#define PC_NET_CHANNEL_H

#include "net/engine.h"
#include "net/wake.h"

#include <poll.h>

typedef struct pc_GrpcChannel pc_GrpcChannel;
typedef struct pc_GrpcCall pc_GrpcCall;

/* What a call needing a connection does while the channel has none
 * (pc_GrpcChannelOptions' 'wait_for_ready'; gRPC's doc/wait-for-ready.md). */
typedef enum {
  /* fails UNAVAILABLE at once when the reconnection backoff holds the next
   * attempt back, and with the attempt it was on when that failed (gRPC's
   * fail-fast) */
  kPc_GrpcWaitForReady_No = 0,
  /* waits out the backoff for the next attempt, failing UNAVAILABLE at once
   * when that comes after its deadline, and with the attempt it was on when
   * that failed: a balancer's backend, whose balancer moves such a call on
   * to another backend (transport/balancer.lua) */
  kPc_GrpcWaitForReady_Backoff = 1,
  /* gRPC's wait-for-ready: waits through failed attempts and their backoff
   * until a connection is ready, failing only DEADLINE_EXCEEDED at its
   * deadline ("deadline exceeded waiting for a connection (the last
   * attempt: WHY)"; "(connecting to HOST:PORT; the last attempt: WHY)"
   * when the deadline comes during an attempt) */
  kPc_GrpcWaitForReady_Deadline = 2
} pc_GrpcWaitForReady;

typedef struct {
  const char *host; /* name or address (no brackets) */
  const char *port; /* decimal */
  int tls;
  const char *ca_file, *cert_file, *key_file, *server_name; /* as socket.h */
  const char *user_agent;                                   /* NULL: "protocall" */
  size_t max_receive, max_header_list;                      /* as engine.h; 0: the defaults */
  uint32_t stream_window, connection_window;                /* as engine.h; 0: the defaults */
  /* Keepalive: a connection carrying calls that received nothing for
   * 'keepalive_time' seconds sends an HTTP/2 PING; no ACK within
   * 'keepalive_timeout' seconds (0: 20) closes it, its calls end
   * UNAVAILABLE. 0: no keepalive. */
  double keepalive_time, keepalive_timeout;
  /* Reconnection backoff (gRPC's doc/connection-backoff.md): once a
   * connection attempt failed (refused, unresolved, TLS, not connected
   * within max(min_connect_timeout, the backoff), or connected and no
   * SETTINGS from the server within it: see 'connect_timeout'), the next starts no
   * sooner than the backoff later: 'backoff_initial' seconds, times
   * 'backoff_multiplier' after each further failure up to 'backoff_max',
   * each spread by +-'backoff_jitter' of itself; a connection that becomes
   * ready resets it. A call that needs a connection meanwhile fails
   * UNAVAILABLE at once (gRPC's fail-fast: the channel is in
   * TRANSIENT_FAILURE), or waits as 'wait_for_ready' (pc_GrpcWaitForReady)
   * says. 'backoff_set' 0: gRPC's numbers (1
   * s, 1.6, 0.2, 120 s, and 20 s for min_connect_timeout); 1: the five fields as given (each
   * >= 0, multiplier >= 1, jitter <= 1). A TLS setup that fails (a
   * file that is no PEM, perhaps being rewritten; memory) fails the attempt
   * like a refused connection, and the next attempt sets TLS up anew. TLS
   * not available in the process (pc_NetTls_Available: the Lua module
   * without its TLS object) is no failed attempt: no attempt follows, and
   * every call fails INTERNAL with why at once (gRPC's lame channel). */
  int backoff_set;
  pc_GrpcWaitForReady wait_for_ready;
  double backoff_initial, backoff_multiplier, backoff_jitter, backoff_max, min_connect_timeout;
  int insecure; /* as socket.h: TLS WITHOUT verifying the server */
  /* Seconds a new connection may take to connect and finish TLS; past it
   * the connection is given up and its calls fail UNAVAILABLE ("connect to
   * HOST:PORT: timed out after S s"). 0: no limit but the backoff's
   * max(min_connect_timeout, the backoff) and the calls' own deadlines.
   * A connection is ready (calls written, the backoff reset) once
   * connected, but the attempt lasts until the server's first SETTINGS
   * frame (RFC 9113 section 3.4; gRPC's connection-backoff document):
   * none by the earlier of these bounds (a peer that never speaks HTTP/2)
   * closes it as a failed attempt (the backoff goes on from where its
   * readiness reset it) and its calls, written and perhaps run, fail
   * UNAVAILABLE 'lost', not 'unsent' ("connect to HOST:PORT: no HTTP/2
   * SETTINGS from the server within S s"), sent again by nothing here (a
   * wait-for-ready call included; one whose headers, past 8 KiB, waited
   * for the SETTINGS is 'unsent' too). One that carries no call then (a host
   * driver reads only connections with calls) is closed without counting,
   * taking no new call. */
  double connect_timeout;
  /* Non-zero: the host moves the bytes (see "Host I/O" below) and the
   * built-in driver (socket.h) is not used: no resolution, no sockets
   * here. TLS still runs here, over the bytes the host moves (socket.h,
   * hosted TLS: the same options, verification, ALPN h2 and resumption as
   * the built-in sockets), so the host carries ciphertext only. */
  int host_io;
  /* Non-zero: gRPC-Web and Connect over HTTP/1.1 (engine.h's 'http1';
   * TLS with ALPN http/1.1): one call per connection at a time, so
   * concurrent calls open more connections; an idle one is used again
   * (keep-alive). */
  int http1;
  /* Non-NULL: a Unix-domain socket (socket.h) instead of host and port;
   * :authority is then 'server_name' or "localhost", as gRPC's. */
  const char *unix_path;
  int unix_abstract;
} pc_GrpcChannelOptions;

/* A channel (no connection is made until the first call); NULL with 'err'
 * set on allocation failure. 'alloc' NULL means pc_DefaultAlloc. */
pc_GrpcChannel *pc_GrpcChannel_New(const pc_GrpcChannelOptions *opts, pc_Alloc *alloc, void *ud,
                                   pc_Error *err);

/* Closes the connections and frees the channel; when calls on it are still
 * alive, that happens when the last one is freed. NULL is allowed. */
void pc_GrpcChannel_Free(pc_GrpcChannel *ch);

/* Closes the channel without freeing it: pc_GrpcChannel_Start refuses new
 * calls, connections without a call close now, and those with calls when
 * their last call is freed; the calls in flight go on to their end (their
 * deadline included) as long as the channel is pumped. A call waiting for a
 * connection attempt (wait_for_ready), now or when its attempt fails, ends
 * UNAVAILABLE "connect to HOST:PORT: the channel is closed" instead: no
 * attempt is made for it any more. Idempotent. */
void pc_GrpcChannel_Close(pc_GrpcChannel *ch);

/* Starts a call of 'path'; request messages follow with pc_GrpcCall_Send.
 * Returns NULL (with 'err' set) only on misuse (bad path, invalid
 * metadata) or allocation failure: a call that cannot reach the server
 * still starts and ends with a status. A timeout of 0 ends it at once with
 * DEADLINE_EXCEEDED. */
pc_GrpcCall *pc_GrpcChannel_Start(pc_GrpcChannel *ch, const char *path,
                                  const pc_GrpcCallSettings *settings, pc_Error *err);

/* Queues one request message (copied) and sends what the connection
 * takes now. Returns 0 when the call has ended (its deadline passed too)
 * or its sending side is closed. */
int pc_GrpcCall_Send(pc_GrpcCall *call, const void *msg, size_t len);

/* As pc_GrpcCall_Send then pc_GrpcCall_CloseSend, the end queued with the
 * message before anything is sent: a unary or server-streaming call's
 * request. Over HTTP/1.1 it then goes whole, framed by Content-Length; a
 * call whose sending side is still open when its connection's engine is
 * idle is a stream, its head written at once with Transfer-Encoding:
 * chunked (http1_client.h). */
int pc_GrpcCall_SendLast(pc_GrpcCall *call, const void *msg, size_t len);

/* Request bytes queued and not yet sent (the peer's window is closed, or
 * the call waits for a connection: all it was sent, which it keeps):
 * a sender waits (pc_Grpc_Pump) while this is above its bound. */
size_t pc_GrpcCall_Unsent(const pc_GrpcCall *call);

/* 1 once the call runs on a connection that received the server's first
 * SETTINGS frame (RFC 9113 section 3.4: the server speaks HTTP/2, the
 * channel READY as gRPC counts it), 0 while it waits for a connection or
 * for those SETTINGS (a peer that took the connection and never speaks
 * HTTP/2), and once it has ended without a stream. */
int pc_GrpcCall_PeerSettings(const pc_GrpcCall *call);

/* Ends the sending side. */
void pc_GrpcCall_CloseSend(pc_GrpcCall *call);

/* As pc_GrpcStream_Next: 1 with a message, 0 when none is ready yet, -1
 * once the call has ended (pc_GrpcCall_Status). */
int pc_GrpcCall_Next(pc_GrpcCall *call, const char **data, size_t *len);

/* 1 when the call has ended and the next pc_GrpcCall_Next returns -1: no
 * message is left to read, and it is not a refused call that would run
 * again on another connection. */
int pc_GrpcCall_Drained(const pc_GrpcCall *call);

/* Gives the call a wake token (wake.h; 0: none): from now on, what its
 * waiter may care about lists 'token' in the channel's wake list:
 * response headers or a whole message arrived, request bytes went out
 * while the sending side is open (pc_GrpcCall_Unsent fell: room for a
 * sender; after pc_GrpcCall_CloseSend no sender waits), the call ended (a status from the server, a
 * reset, a refusal, its deadline, a lost connection, a cancel). A refused
 * call run again on another connection is listed when it ended refused. */
void pc_GrpcCall_SetWakeToken(pc_GrpcCall *call, uint64_t token);

/* The channel's wake list (wake.h): a driver reads and clears it after
 * each pc_Grpc_Pump. */
pc_GrpcWakeList *pc_GrpcChannel_Wake(pc_GrpcChannel *ch);

/* Whether response headers arrived or the call ended. */
int pc_GrpcCall_HeadersDone(const pc_GrpcCall *call);

/* The status once the call has ended, NULL before. */
const pc_GrpcStatus *pc_GrpcCall_Status(const pc_GrpcCall *call);

/* Bytes held for received, unread response data. */
size_t pc_GrpcCall_Buffered(const pc_GrpcCall *call);

/* As pc_GrpcStream_MetadataCount / _Metadata. */
size_t pc_GrpcCall_MetadataCount(const pc_GrpcCall *call, int trailers);
const pc_GrpcPair *pc_GrpcCall_Metadata(const pc_GrpcCall *call, int trailers, size_t i);

/* Ends the call with CANCELLED ("cancelled") and RST_STREAM CANCEL unless
 * it already ended. */
void pc_GrpcCall_Cancel(pc_GrpcCall *call);

/* Cancels the call if still running and frees it. NULL is allowed. */
void pc_GrpcCall_Free(pc_GrpcCall *call);

/* One round of I/O over the 'n' channels: sends what is queued, waits at
 * most 'timeout' seconds (0: not at all; capped by the nearest call
 * deadline) for the sockets, reads what arrived, and ends every call whose
 * deadline passed with DEADLINE_EXCEEDED ("deadline exceeded", RST_STREAM
 * CANCEL). Returns 1, or 0 when poll(2) failed. */
int pc_Grpc_Pump(pc_GrpcChannel *const *chs, size_t n, double timeout);

/* pc_Grpc_Pump in two halves, for a driver that polls more descriptors
 * with the channels' (listener.h): _PollPrepare sends what is queued,
 * ends calls past their deadline, lowers '*timeout' to the nearest
 * deadline (to 0 when it put news in a channel's wake list: a call it
 * ended, whose waiter is not to wait for the poll) and fills at most
 * 'max' entries of 'fds' (and 'who', which _PollDone needs back),
 * returning how many; after poll(2), _PollDone services the ready ones
 * (the same 'chs', 'fds', 'who', 'nfds'). */
size_t pc_Grpc_PollPrepare(pc_GrpcChannel *const *chs, size_t n, struct pollfd *fds, void **who,
                           size_t max, double *timeout);

/* An upper bound on the entries _PollPrepare fills for 'chs' now: their
 * connections with a socket, plus room for the ones it may open. */
size_t pc_Grpc_PollSlots(pc_GrpcChannel *const *chs, size_t n);

/* Room for one round's poll entries: 'fds' and 'who' of 'cap' entries,
 * and 'spans' of 'nspans' (a caller's per-listener counts), in the struct
 * itself when small, else from pc_DefaultAlloc. So every socket is
 * polled, however many there are. */
typedef struct {
  struct pollfd *fds;
  void **who;
  size_t *spans;
  size_t cap, nspans;
  void *heap; /* the allocation, NULL when in the struct */
  size_t heap_size;
  struct pollfd small_fds[64];
  void *small_who[64];
  size_t small_spans[16];
} pc_GrpcPollSet;

/* Makes room for 'cap' entries and 'nspans' spans; 0 when out of memory
 * (nothing to free then). */
int pc_GrpcPollSet_Init(pc_GrpcPollSet *p, size_t cap, size_t nspans);
void pc_GrpcPollSet_Free(pc_GrpcPollSet *p);
void pc_Grpc_PollDone(pc_GrpcChannel *const *chs, size_t n, const struct pollfd *fds,
                      void *const *who, size_t nfds);

/* -- Host I/O ---------------------------------------------------------
 * With 'host_io', a channel keeps its connection logic (several
 * connections, GOAWAY, refused streams, deadlines, backoff, keepalive,
 * connect_timeout) but a driver of the host's connects, sends and
 * receives: the connections are named by ids, each one the driver is to
 * connect (ready 0), then move bytes for (ready 1), and close once it is
 * no longer listed. Nothing here blocks or calls the host back; the host
 * runs pc_GrpcChannel_HostTick where pc_Grpc_Pump would run (it does
 * what pc_Grpc_Pump does but wait and poll). Calling these with an id no
 * longer listed does nothing (0). */
typedef struct {
  unsigned id;
  int ready;    /* 0: to connect (pc_GrpcChannel_HostConnected); 1: connected (bytes to
                 * move, the TLS handshake's included) */
  size_t calls; /* calls on it: an idle connection need not be read */
} pc_GrpcHostConn;

/* The open connections: fills at most 'max' entries, returns how many
 * there are. */
size_t pc_GrpcChannel_HostConns(const pc_GrpcChannel *ch, pc_GrpcHostConn *out, size_t max);

/* A number that changes whenever the list pc_GrpcChannel_HostConns gives
 * does, but for the calls counts (a connection opened or closed, a ready
 * changed), so a driver may skip asking for the list while it holds. */
unsigned pc_GrpcChannel_HostVersion(const pc_GrpcChannel *ch);

/* Ends calls past their deadline, runs the connection timers (connect
 * timeouts, keepalive), starts calls that waited for the backoff, retries
 * refused calls, frees dead connections; returns the seconds until the
 * next of these timers falls due (-1: none), which is as long as the host
 * may wait for bytes before calling it again. */
double pc_GrpcChannel_HostTick(pc_GrpcChannel *ch);

/* The driver connected connection 'id' (with 'tls' the handshake then
 * runs over the bytes it moves): 'ok' 1;
 * or it could not: 'ok' 0 and 'why' (e.g. "connect to h:1: connection
 * refused"), which its calls then fail with (UNAVAILABLE), and the backoff
 * counts a failed attempt. */
void pc_GrpcChannel_HostConnected(pc_GrpcChannel *ch, unsigned id, int ok, const char *why);

/* Bytes to send on connection 'id': '*data' points at them (valid until
 * the next call on the channel), 0 when there are none. The driver sends
 * them and reports how many with pc_GrpcChannel_HostWrote; bytes not
 * reported come first again. */
size_t pc_GrpcChannel_HostOutput(pc_GrpcChannel *ch, unsigned id, const char **data);

/* 1 when connection 'id' has bytes to send (pc_GrpcChannel_HostOutput
 * would give some), else 0; nothing is taken. Cheaper than
 * pc_GrpcChannel_HostOutput: while bytes are left unwritten, it does not
 * gather the frames queued since. */
int pc_GrpcChannel_HostHasOutput(pc_GrpcChannel *ch, unsigned id);
void pc_GrpcChannel_HostWrote(pc_GrpcChannel *ch, unsigned id, size_t n);

/* Bytes the driver received on connection 'id'. Returns 1, or 0 when they
 * broke the connection (as pc_GrpcEngine_Recv) or 'id' is gone. */
int pc_GrpcChannel_HostRecv(pc_GrpcChannel *ch, unsigned id, const void *data, size_t len);

/* Connection 'id' is gone ('why', e.g. "connection closed by the peer"):
 * its calls end UNAVAILABLE with 'why'. */
void pc_GrpcChannel_HostLost(pc_GrpcChannel *ch, unsigned id, const char *why);

/* 1 when the channel has a connection open or being opened, 0 when it has
 * none (no call made yet, or the last connection failed or was lost). A
 * balancer judges a failed call by its own status (pc_GrpcStatus.unsent,
 * .lost), not by this: another call's new attempt makes it 1. */
int pc_GrpcChannel_Connected(const pc_GrpcChannel *ch);

/* 1 while the channel has a call not yet freed (pc_GrpcCall_Free), 0 when
 * it has none: such a call may have bytes to send, a connection to make or
 * messages to receive, so a scheduler pumps the channel even while no task
 * waits on it (lua/protocall/sched.lua); an idle channel it leaves alone. */
int pc_GrpcChannel_Busy(const pc_GrpcChannel *ch);

/* Seconds from now until the channel's reconnection backoff lets it make
 * its next connection attempt (> 0: a call needing a new connection
 * meanwhile fails UNAVAILABLE at once, or waits with wait_for_ready), or 0
 * when a call may make one now: no attempt failed since the last
 * connection became ready, or the backoff is over. The figure a call's
 * "(reconnection backoff: the next attempt in S s; ...)" hint gives, for a
 * caller that schedules its next try by it (lua/protocall/cli/gateway.lua). */
double pc_GrpcChannel_NextAttempt(const pc_GrpcChannel *ch);

/* How many GOAWAY frames the channel's connections received: a balancer
 * asks its resolver for a new answer when this grows (the server may be
 * leaving). */
unsigned pc_GrpcChannel_Goaways(const pc_GrpcChannel *ch);

#endif
