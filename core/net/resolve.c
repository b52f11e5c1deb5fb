/* Name resolution (resolve.h): c-ares for the resolver, getaddrinfo for
 * pc_Net_Resolve. */
#define _POSIX_C_SOURCE 200809L
#include "net/resolve.h"

#include "base/clock.h"

#include <sys/select.h> /* before ares.h, which uses fd_set */
#include <sys/time.h>

#include <ares.h>
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

size_t pc_Net_Resolve(const char *host, const char *port, char (*out)[PC_NET_ADDRESS_MAX],
                      size_t max, pc_Error *err) {
  struct addrinfo hints, *list = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  int r = getaddrinfo(host, port, &hints, &list);
  if (r != 0) {
    pc_Error_Set(err, "resolve %.200s: %s", host, gai_strerror(r));
    return 0;
  }
  size_t n = 0;
  for (const struct addrinfo *ai = list; ai != NULL && n < max; ai = ai->ai_next) {
    char a[PC_NET_ADDRESS_MAX];
    if (getnameinfo(ai->ai_addr, ai->ai_addrlen, a, sizeof a, NULL, 0, NI_NUMERICHOST) != 0)
      continue;
    int seen = 0;
    for (size_t i = 0; i < n && !seen; i++) seen = strcmp(out[i], a) == 0;
    if (!seen) memcpy(out[n++], a, sizeof a);
  }
  freeaddrinfo(list);
  if (n == 0) pc_Error_Set(err, "resolve %.200s: no address", host);
  return n;
}

/* -- the c-ares resolver -------------------------------------------------- */

/* One lookup of addresses under way: the resolver and the weight of the
 * SRV record it came from. */
typedef struct {
  pc_NetResolver *r;
  unsigned weight;
} Lookup;

/* A list of addresses growing through the allocator. */
typedef struct {
  pc_NetAddress *at;
  size_t n, cap;
} List;

struct pc_NetResolver {
  pc_Alloc *alloc;
  void *ud;
  ares_channel ch;
  char *name;
  unsigned port; /* 0: SRV */
  double min_interval;
  int busy;       /* a resolution under way */
  size_t pending; /* its lookups not ended */
  int freeing;    /* pc_NetResolver_Free: callbacks only free */
  double next_at; /* when the next resolution is due */
  double ended;   /* when the last one ended (-1: none) */
  double ttl;     /* the least TTL of this resolution's records (-1: none) */
  int status;     /* its first failure (ARES_SUCCESS: none) */
  int oom;        /* memory ran out during it */
  unsigned version;
  List good, fresh; /* the last good addresses; this resolution's */
  Lookup *lookups;  /* this resolution's (SRV: one per target) */
  size_t nlookups;
  char skipped[PC_ERROR_MAX / 2]; /* this resolution's: an SRV target left out, and why */
  int failed;                     /* the last resolution failed: 'why' says why */
  char why[PC_ERROR_MAX];
  size_t poll_first, poll_n; /* its entries in the last _PollPrepare */
};

static void *r_alloc(pc_NetResolver *r, void *p, size_t osize, size_t nsize) {
  return r->alloc(r->ud, p, osize, nsize);
}

static void list_free(pc_NetResolver *r, List *l) {
  if (l->at) r_alloc(r, l->at, l->cap * sizeof *l->at, 0);
  memset(l, 0, sizeof *l);
}

static void lookups_free(pc_NetResolver *r) {
  if (r->lookups) r_alloc(r, r->lookups, r->nlookups * sizeof *r->lookups, 0);
  r->lookups = NULL;
  r->nlookups = 0;
}

/* Adds 'a' to the fresh list unless it is there already or the list holds
 * PC_NET_RESOLVE_MAX_ADDRESSES (the rest of a large answer is dropped). */
static void add_address(pc_NetResolver *r, const pc_NetAddress *a) {
  List *l = &r->fresh;
  for (size_t i = 0; i < l->n; i++) {
    if (l->at[i].port == a->port && strcmp(l->at[i].host, a->host) == 0) return;
  }
  if (l->n >= PC_NET_RESOLVE_MAX_ADDRESSES) return;
  if (l->n == l->cap) {
    size_t cap = l->cap ? 2 * l->cap : 8;
    pc_NetAddress *at = r_alloc(r, l->at, l->cap * sizeof *at, cap * sizeof *at);
    if (at == NULL) {
      r->oom = 1;
      return;
    }
    l->at = at;
    l->cap = cap;
  }
  l->at[l->n++] = *a;
}

static void note_ttl(pc_NetResolver *r, double ttl) {
  if (r->ttl < 0 || ttl < r->ttl) r->ttl = ttl;
}

/* The resolution ended: its addresses become the good ones, or it failed. */
static void finish(pc_NetResolver *r) {
  double now = pc_Clock_Monotonic();
  r->busy = 0;
  r->version++;
  r->ended = now;
  if (r->fresh.n > 0 && !r->oom) { /* a part lost to memory is no answer */
    list_free(r, &r->good);
    r->good = r->fresh;
    memset(&r->fresh, 0, sizeof r->fresh);
    r->failed = 0;
  } else {
    r->failed = 1;
    snprintf(r->why, sizeof r->why, "resolve %.200s: %s", r->name,
             r->oom                      ? "out of memory"
             : r->status != ARES_SUCCESS ? ares_strerror(r->status)
             : r->skipped[0]             ? r->skipped
                                         : "no address");
  }
  list_free(r, &r->fresh);
  lookups_free(r);
  double wait = r->ttl > r->min_interval ? r->ttl : r->min_interval;
  r->next_at = now + wait;
}

static void lookup_ended(pc_NetResolver *r) {
  if (--r->pending == 0) finish(r);
}

static void on_addresses(void *arg, int status, int timeouts, struct ares_addrinfo *res) {
  (void)timeouts;
  Lookup *k = arg;
  pc_NetResolver *r = k->r;
  if (r->freeing) {
    if (res) ares_freeaddrinfo(res);
    return;
  }
  if (status != ARES_SUCCESS && r->status == ARES_SUCCESS) r->status = status;
  if (res) {
    for (const struct ares_addrinfo_node *n = res->nodes; n; n = n->ai_next) {
      pc_NetAddress a;
      memset(&a, 0, sizeof a);
      a.weight = k->weight;
      if (n->ai_family == AF_INET) {
        const struct sockaddr_in *in = (const void *)n->ai_addr;
        ares_inet_ntop(AF_INET, &in->sin_addr, a.host, sizeof a.host);
        a.port = ntohs(in->sin_port);
      } else if (n->ai_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const void *)n->ai_addr;
        ares_inet_ntop(AF_INET6, &in6->sin6_addr, a.host, sizeof a.host);
        a.port = ntohs(in6->sin6_port);
      } else {
        continue;
      }
      note_ttl(r, n->ai_ttl);
      add_address(r, &a);
    }
    ares_freeaddrinfo(res);
  }
  lookup_ended(r);
}

/* Starts one lookup of addresses of 'host' (its callback may run at once:
 * a numeric host, /etc/hosts). */
static void lookup(pc_NetResolver *r, Lookup *k, const char *host, unsigned port) {
  struct ares_addrinfo_hints hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = ARES_AI_NUMERICSERV;
  char service[8];
  snprintf(service, sizeof service, "%u", port);
  r->pending++;
  ares_getaddrinfo(r->ch, host, service, &hints, on_addresses, k);
}

/* The least TTL of the answer's SRV records of the DNS message 'buf' (-1
 * when it has none or cannot be read). */
static double srv_ttl(const unsigned char *buf, int len) {
  if (len < HFIXEDSZ) return -1;
  unsigned qd = (unsigned)buf[4] << 8 | buf[5], an = (unsigned)buf[6] << 8 | buf[7];
  const unsigned char *p = buf + HFIXEDSZ, *end = buf + len;
  double least = -1;
  for (unsigned i = 0; i < qd + an; i++) {
    char *name;
    long skip;
    if (ares_expand_name(p, buf, len, &name, &skip) != ARES_SUCCESS) return -1;
    ares_free_string(name);
    p += skip;
    if (i < qd) {
      p += QFIXEDSZ;
      continue;
    }
    if (end - p < RRFIXEDSZ) return -1;
    unsigned type = (unsigned)p[0] << 8 | p[1];
    double ttl = (double)((unsigned long)p[4] << 24 | (unsigned long)p[5] << 16 |
                          (unsigned long)p[6] << 8 | p[7]);
    size_t rdlen = (size_t)p[8] << 8 | p[9];
    p += RRFIXEDSZ;
    if ((size_t)(end - p) < rdlen) return -1;
    p += rdlen;
    if (type == T_SRV && (least < 0 || ttl < least)) least = ttl;
  }
  return least;
}

static void on_srv(void *arg, int status, int timeouts, unsigned char *buf, int len) {
  (void)timeouts;
  pc_NetResolver *r = arg;
  if (r->freeing) return;
  struct ares_srv_reply *list = NULL;
  if (status == ARES_SUCCESS) status = ares_parse_srv_reply(buf, len, &list);
  if (status != ARES_SUCCESS) {
    r->status = status;
    lookup_ended(r);
    return;
  }
  note_ttl(r, srv_ttl(buf, len));
  /* The lowest priority group (RFC 2782): its targets, each looked up;
   * a target of port 0 (no service there) is left out, and past
   * PC_NET_RESOLVE_MAX_TARGETS the rest. */
  unsigned least = 65536;
  size_t n = 0;
  for (const struct ares_srv_reply *s = list; s; s = s->next) {
    if (s->port == 0) continue;
    if (s->priority < least) {
      least = s->priority;
      n = 0;
    }
    if (s->priority == least && n < PC_NET_RESOLVE_MAX_TARGETS) n++;
  }
  for (const struct ares_srv_reply *s = list; s && !r->skipped[0]; s = s->next) {
    if (s->port == 0)
      snprintf(r->skipped, sizeof r->skipped, "SRV target %.200s has port 0", s->host);
  }
  if (n == 0) {
    if (r->status == ARES_SUCCESS && !r->skipped[0]) r->status = ARES_ENODATA;
    ares_free_data(list);
    lookup_ended(r);
    return;
  }
  r->lookups = r_alloc(r, NULL, 0, n * sizeof *r->lookups);
  if (r->lookups == NULL) {
    r->oom = 1;
    r->status = ARES_ENODATA;
    ares_free_data(list);
    lookup_ended(r);
    return;
  }
  r->nlookups = n;
  r->pending++; /* this callback's own, so a lookup ending at once does not finish */
  size_t i = 0;
  for (const struct ares_srv_reply *s = list; s && i < n; s = s->next) {
    if (s->priority != least || s->port == 0) continue;
    r->lookups[i].r = r;
    r->lookups[i].weight = s->weight;
    lookup(r, &r->lookups[i++], s->host, s->port);
  }
  ares_free_data(list);
  lookup_ended(r); /* the SRV query's */
  lookup_ended(r); /* the guard above */
}

static void start(pc_NetResolver *r) {
  r->busy = 1;
  r->skipped[0] = '\0';
  r->status = ARES_SUCCESS;
  r->oom = 0;
  r->ttl = -1;
  if (r->port == 0) {
    r->pending = 1;
    ares_query(r->ch, r->name, C_IN, T_SRV, on_srv, r);
    return;
  }
  unsigned char bin[sizeof(struct in6_addr)];
  if (inet_pton(AF_INET, r->name, bin) == 1 || inet_pton(AF_INET6, r->name, bin) == 1) {
    pc_NetAddress a; /* a numeric host is its own address (c-ares would ask DNS) */
    memset(&a, 0, sizeof a);
    memcpy(a.host, r->name, strlen(r->name) + 1);
    a.port = r->port;
    a.weight = 1;
    add_address(r, &a);
    r->pending = 1;
    lookup_ended(r);
    return;
  }
  r->lookups = r_alloc(r, NULL, 0, sizeof *r->lookups);
  if (r->lookups == NULL) {
    r->oom = 1;
    r->pending = 1;
    lookup_ended(r);
    return;
  }
  r->nlookups = 1;
  r->lookups[0].r = r;
  r->lookups[0].weight = 1;
  lookup(r, &r->lookups[0], r->name, r->port);
}

pc_NetResolver *pc_NetResolver_New(const char *name, unsigned port, const pc_NetResolverOptions *o,
                                   pc_Alloc *alloc, void *ud, pc_Error *err) {
  if (alloc == NULL) alloc = pc_DefaultAlloc;
  pc_NetResolver *r = alloc(ud, NULL, 0, sizeof *r);
  size_t len = strlen(name) + 1;
  char *copy = r ? alloc(ud, NULL, 0, len) : NULL;
  if (copy == NULL) {
    if (r) alloc(ud, r, sizeof *r, 0);
    pc_Error_Set(err, "resolve %.200s: out of memory", name);
    return NULL;
  }
  memset(r, 0, sizeof *r);
  r->alloc = alloc;
  r->ud = ud;
  r->name = memcpy(copy, name, len);
  r->port = port;
  r->min_interval = o && o->min_interval > 0 ? o->min_interval : 30;
  r->ended = -1;
  struct ares_options ao;
  memset(&ao, 0, sizeof ao);
  ao.timeout = o && o->query_timeout > 0 ? (int)(o->query_timeout * 1000 + 0.5) : 5000;
  ao.tries = 2;
  /* EDNS0: answers of up to 1232 bytes over UDP (DNS flag day 2020), so an
   * SRV set of many targets needs no TCP */
  ao.flags = ARES_FLAG_EDNS;
  ao.ednspsz = 1232;
  int status = ares_library_init(ARES_LIB_INIT_ALL);
  if (status == ARES_SUCCESS) {
    status = ares_init_options(
        &r->ch, &ao, ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES | ARES_OPT_FLAGS | ARES_OPT_EDNSPSZ);
    if (status != ARES_SUCCESS) ares_library_cleanup();
  }
  if (status == ARES_SUCCESS && o && o->server) {
    status = ares_set_servers_ports_csv(r->ch, o->server);
    if (status != ARES_SUCCESS) {
      ares_destroy(r->ch);
      ares_library_cleanup();
    }
  }
  if (status != ARES_SUCCESS) {
    if (o && o->server)
      pc_Error_Set(err, "resolve %.200s: DNS server '%.100s': %s", name, o->server,
                   ares_strerror(status));
    else
      pc_Error_Set(err, "resolve %.200s: %s", name, ares_strerror(status));
    alloc(ud, copy, len, 0);
    alloc(ud, r, sizeof *r, 0);
    return NULL;
  }
  return r;
}

void pc_NetResolver_Free(pc_NetResolver *r) {
  if (r == NULL) return;
  r->freeing = 1;
  ares_destroy(r->ch); /* runs the callbacks of what is under way */
  ares_library_cleanup();
  list_free(r, &r->good);
  list_free(r, &r->fresh);
  lookups_free(r);
  r_alloc(r, r->name, strlen(r->name) + 1, 0);
  r_alloc(r, r, sizeof *r, 0);
}

void pc_NetResolver_Refresh(pc_NetResolver *r) {
  if (r->busy || r->ended < 0) return;
  double soonest = r->ended + r->min_interval;
  if (soonest < r->next_at) r->next_at = soonest;
}

unsigned pc_NetResolver_Version(const pc_NetResolver *r) {
  return r->version;
}

size_t pc_NetResolver_Addresses(const pc_NetResolver *r, const pc_NetAddress **out) {
  *out = r->good.at;
  return r->good.n;
}

const char *pc_NetResolver_Error(const pc_NetResolver *r) {
  return r->failed ? r->why : NULL;
}

int pc_NetResolver_Busy(const pc_NetResolver *r) {
  return r->busy;
}

size_t pc_NetResolver_PollSlots(size_t k) {
  return k * ARES_GETSOCK_MAXNUM;
}

size_t pc_NetResolver_PollPrepare(pc_NetResolver *const *rs, size_t k, struct pollfd *fds,
                                  size_t max, double *timeout) {
  size_t nfds = 0;
  double now = pc_Clock_Monotonic();
  for (size_t i = 0; i < k; i++) {
    pc_NetResolver *r = rs[i];
    r->poll_first = nfds;
    r->poll_n = 0;
    if (!r->busy && now >= r->next_at) start(r);
    if (!r->busy) {
      /* a round ends when the next resolution is due, to start it (a call
       * waiting for a name that did not resolve yet, wait_for_ready) */
      double due = r->next_at - now;
      if (due > 0 && due < *timeout) *timeout = due;
      continue;
    }
    ares_socket_t socks[ARES_GETSOCK_MAXNUM];
    /* The bits unsigned: ARES_GETSOCK_WRITABLE shifts an int by up to 31. */
    unsigned bits = (unsigned)ares_getsock(r->ch, socks, ARES_GETSOCK_MAXNUM);
    for (unsigned j = 0; j < ARES_GETSOCK_MAXNUM && nfds < max; j++) {
      short events = (short)((bits & 1u << j ? POLLIN : 0) |
                             (bits & 1u << (j + ARES_GETSOCK_MAXNUM) ? POLLOUT : 0));
      if (events == 0) continue;
      fds[nfds].fd = socks[j];
      fds[nfds].events = events;
      fds[nfds].revents = 0;
      nfds++;
    }
    r->poll_n = nfds - r->poll_first;
    struct timeval tv;
    if (ares_timeout(r->ch, NULL, &tv) != NULL) {
      double t = (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
      if (t < *timeout) *timeout = t;
    }
  }
  return nfds;
}

void pc_NetResolver_PollDone(pc_NetResolver *const *rs, size_t k, const struct pollfd *fds,
                             size_t nfds) {
  for (size_t i = 0; i < k; i++) {
    pc_NetResolver *r = rs[i];
    if (!r->busy) continue;
    for (size_t j = r->poll_first; j < r->poll_first + r->poll_n && j < nfds; j++) {
      short ev = fds[j].revents;
      if (ev == 0) continue;
      ares_socket_t rfd = ev & (POLLIN | POLLERR | POLLHUP) ? fds[j].fd : ARES_SOCKET_BAD;
      ares_socket_t wfd = ev & POLLOUT ? fds[j].fd : ARES_SOCKET_BAD;
      ares_process_fd(r->ch, rfd, wfd);
    }
    if (r->busy) ares_process_fd(r->ch, ARES_SOCKET_BAD, ARES_SOCKET_BAD); /* timeouts */
    r->poll_n = 0;
  }
}

unsigned pc_NetResolver_Step(pc_NetResolver *r) {
  struct pollfd fds[ARES_GETSOCK_MAXNUM];
  double timeout = 0;
  size_t n = pc_NetResolver_PollPrepare(&r, 1, fds, ARES_GETSOCK_MAXNUM, &timeout);
  if (n > 0 && poll(fds, n, 0) < 0) n = 0;
  pc_NetResolver_PollDone(&r, 1, fds, n);
  return r->version;
}
