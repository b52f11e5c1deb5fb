/* Name resolution for targets of several backends (one channel per
 * address, channel.h).
 *
 * pc_NetResolver resolves a name without blocking, with c-ares: A and
 * AAAA records (ares_getaddrinfo), or SRV records ("_grpc._tcp.name")
 * whose lowest priority group is kept and whose targets are resolved in
 * turn, each address carrying its record's weight. Its sockets are polled
 * with the channels' (pc_NetResolver_PollPrepare / _PollDone, which
 * listener.h's pc_Grpc_PumpAll runs). A resolution starts when one is due:
 * at first, when the records' TTL has passed, or after
 * pc_NetResolver_Refresh (a failed connection, a GOAWAY); never sooner
 * than 'min_interval' after the last one ended. A failed resolution keeps
 * the addresses of the last good one.
 *
 * pc_Net_Resolve is getaddrinfo, which blocks: only for a host I/O driver
 * (channel.h), whose host owns the sockets c-ares would need. */
#ifndef PC_NET_RESOLVE_H
#define PC_NET_RESOLVE_H

#include "base/arena.h"
#include "base/error.h"

#include <stddef.h>

struct pollfd;

/* Room for one numeric address (an IPv6 address with a zone included). */
#define PC_NET_ADDRESS_MAX 64

/* Resolves 'host' (a name or an address, no brackets) for TCP port 'port'
 * (decimal) into at most 'max' numeric addresses ("127.0.0.1", "::1")
 * written to 'out'; returns how many (at least 1), or 0 with 'err' set
 * ("resolve NAME: REASON") when the name does not resolve. Blocks. */
size_t pc_Net_Resolve(const char *host, const char *port, char (*out)[PC_NET_ADDRESS_MAX],
                      size_t max, pc_Error *err);

typedef struct pc_NetResolver pc_NetResolver;

/* One address of a resolution: numeric host, TCP port, and the weight of
 * its SRV record (1 for an A or AAAA record). */
typedef struct {
  char host[PC_NET_ADDRESS_MAX];
  unsigned port;
  unsigned weight;
} pc_NetAddress;

typedef struct {
  /* The DNS server, "IPv4:PORT" or "[IPv6]:PORT" (or without a port:
   * 53); NULL: the system's (/etc/resolv.conf). */
  const char *server;
  /* Seconds between the end of a resolution and the start of the next at
   * least; <= 0: 30 (gRPC's minimum time between resolutions). */
  double min_interval;
  /* Seconds c-ares waits for an answer before it asks again (it asks
   * twice, then fails); <= 0: 5. */
  double query_timeout;
} pc_NetResolverOptions;

/* The most addresses a resolution keeps (the rest of a large answer is
 * dropped), and the most SRV targets of its lowest priority group it looks
 * up (in the answer's order). */
#define PC_NET_RESOLVE_MAX_ADDRESSES 64
#define PC_NET_RESOLVE_MAX_TARGETS   64

/* A resolver of 'name' for TCP port 'port' (A and AAAA), or of the SRV
 * records of 'name' when 'port' is 0 (each target's own port; a target of
 * port 0 is left out: only such targets fail the resolution with "SRV
 * target HOST has port 0"). Nothing is
 * sent before the first _PollPrepare or _Step. NULL with 'err' set when
 * memory runs out or c-ares refuses 'server'. */
pc_NetResolver *pc_NetResolver_New(const char *name, unsigned port,
                                   const pc_NetResolverOptions *opts, pc_Alloc *alloc, void *ud,
                                   pc_Error *err);
void pc_NetResolver_Free(pc_NetResolver *r);

/* Asks for a resolution as soon as the minimum interval allows. */
void pc_NetResolver_Refresh(pc_NetResolver *r);

/* How many resolutions have ended (successfully or not): a caller compares
 * it with the one it saw to know there is news. */
unsigned pc_NetResolver_Version(const pc_NetResolver *r);

/* The addresses of the last good resolution ('*out', valid until the next
 * _PollDone or _Step), none before one. */
size_t pc_NetResolver_Addresses(const pc_NetResolver *r, const pc_NetAddress **out);

/* Why the last resolution failed ("resolve NAME: REASON"), or NULL when
 * it succeeded (or none has ended). */
const char *pc_NetResolver_Error(const pc_NetResolver *r);

/* Whether a resolution is under way. */
int pc_NetResolver_Busy(const pc_NetResolver *r);

/* The halves of a round of poll(2), as pc_Grpc_PollPrepare / _PollDone
 * (channel.h): _PollPrepare starts the resolutions that are due and fills
 * at most 'max' entries of 'fds' with their sockets, lowering '*timeout'
 * to when c-ares must look again, or for a resolver between resolutions
 * to when its next one is due; after poll(2), _PollDone hands c-ares
 * what is ready (and its timeouts) over the same 'rs' and entries. */
size_t pc_NetResolver_PollPrepare(pc_NetResolver *const *rs, size_t k, struct pollfd *fds,
                                  size_t max, double *timeout);
void pc_NetResolver_PollDone(pc_NetResolver *const *rs, size_t k, const struct pollfd *fds,
                             size_t nfds);
/* An upper bound on the entries _PollPrepare fills for 'k' resolvers. */
size_t pc_NetResolver_PollSlots(size_t k);

/* A round that does not wait: _PollPrepare, poll(2) with no timeout,
 * _PollDone. Returns _Version. */
unsigned pc_NetResolver_Step(pc_NetResolver *r);

#endif
