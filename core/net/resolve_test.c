/* pc_Net_Resolve: addresses as numeric strings, duplicates dropped, the
 * bound kept, and a clear error for a name that does not resolve.
 * pc_NetResolver against a DNS server of a few lines on a UDP socket of
 * this process (polled with the resolver's sockets): A records, SRV
 * records (the lowest priority group, weights), the TTL and the minimum
 * interval, a refresh, NXDOMAIN keeping the last good addresses, every
 * allocation failing. */
#define _POSIX_C_SOURCE 200809L
#include "net/resolve.h"

#include "base/clock.h"
#include "testing/check.h"
#include "testing/failalloc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* -- the DNS server --------------------------------------------------------- */

typedef struct {
  const char *name;
  int type; /* 1 A, 33 SRV */
  unsigned ttl;
  const char *value; /* A: "127.0.0.2"; SRV: "priority weight port target" */
} Record;

static Record zone[80];
static size_t nzone;
static int dns_fd = -1;
static int queries; /* questions answered */

static size_t put_name(unsigned char *p, const char *name) {
  size_t n = 0;
  while (*name) {
    const char *dot = strchr(name, '.');
    size_t len = dot ? (size_t)(dot - name) : strlen(name);
    p[n++] = (unsigned char)len;
    memcpy(p + n, name, len);
    n += len;
    name += len + (dot != NULL);
  }
  p[n++] = 0;
  return n;
}

static int tcp_fd = -1; /* listening on the UDP socket's port: an answer too long
                           for UDP is truncated (TC) and c-ares asks again here */

/* The answer to query 'q' ('len' bytes) into 'a' (room for 4096); its
 * length. Over UDP ('udp') an answer past 1232 bytes (the EDNS size the
 * resolver offers) is cut to its question with TC set. */
static size_t reply(const unsigned char *q, ssize_t len, unsigned char *a, int udp) {
  if (len < 12 + 5) return 0;
  char name[256];
  size_t i = 12, n = 0;
  while (i < (size_t)len && q[i] != 0 && n < sizeof name - 64) {
    size_t l = q[i++];
    if (n) name[n++] = '.';
    memcpy(name + n, q + i, l);
    n += l;
    i += l;
  }
  name[n] = '\0';
  size_t qend = i + 5;
  int type = q[i + 1] << 8 | q[i + 2];
  memcpy(a, q, qend);
  a[2] = 0x81;                                   /* a response, recursion desired */
  a[3] = 0x80;                                   /* recursion available, NOERROR */
  a[6] = a[7] = a[8] = a[9] = a[10] = a[11] = 0; /* no authority, no EDNS record */
  size_t k = qend, count = 0;
  int known = 0;
  for (size_t r = 0; r < nzone; r++) {
    if (strcmp(zone[r].name, name) != 0) continue;
    known = 1;
    if (zone[r].type != type) continue;
    a[k++] = 0xc0; /* the question's name */
    a[k++] = 12;
    a[k++] = 0;
    a[k++] = (unsigned char)type;
    a[k++] = 0;
    a[k++] = 1;
    for (int s = 24; s >= 0; s -= 8) a[k++] = (unsigned char)(zone[r].ttl >> s);
    size_t rd = k;
    k += 2;
    if (type == 1) {
      inet_pton(AF_INET, zone[r].value, a + k);
      k += 4;
    } else {
      unsigned prio, weight, port;
      char target[128];
      sscanf(zone[r].value, "%u %u %u %127s", &prio, &weight, &port, target);
      unsigned v[3] = {prio, weight, port};
      for (int s = 0; s < 3; s++) {
        a[k++] = (unsigned char)(v[s] >> 8);
        a[k++] = (unsigned char)v[s];
      }
      k += put_name(a + k, target);
    }
    a[rd] = (unsigned char)((k - rd - 2) >> 8);
    a[rd + 1] = (unsigned char)(k - rd - 2);
    count++;
  }
  if (!known) a[3] = 0x83; /* NXDOMAIN */
  a[7] = (unsigned char)count;
  queries++;
  if (udp && k > 1232) {
    a[2] |= 0x02; /* TC */
    a[7] = 0;
    k = qend;
  }
  return k;
}

/* Answers one query waiting on dns_fd. */
static void answer(void) {
  unsigned char q[512], a[4096];
  struct sockaddr_storage from;
  socklen_t fromlen = sizeof from;
  ssize_t len = recvfrom(dns_fd, q, sizeof q, 0, (struct sockaddr *)&from, &fromlen);
  size_t k = reply(q, len, a, 1);
  if (k) sendto(dns_fd, a, k, 0, (struct sockaddr *)&from, fromlen);
}

static int conn_fd = -1; /* the connection accepted on tcp_fd */

/* Accepts the connection waiting on tcp_fd (conn_fd), or answers the query
 * waiting on conn_fd, then closes it. */
static void answer_tcp(void) {
  if (conn_fd < 0) {
    conn_fd = accept(tcp_fd, NULL, NULL);
    return;
  }
  unsigned char q[514], a[4098];
  ssize_t len = read(conn_fd, q, sizeof q);
  size_t k = len > 2 ? reply(q + 2, len - 2, a + 2, 0) : 0;
  a[0] = (unsigned char)(k >> 8);
  a[1] = (unsigned char)k;
  if (k && write(conn_fd, a, k + 2) < 0) k = 0;
  close(conn_fd);
  conn_fd = -1;
}

/* Rounds of poll over the resolver and the server until the resolver's
 * version passes 'seen' (1) or 'seconds' passed (0). */
static int run(pc_NetResolver *r, unsigned seen, double seconds) {
  double end = pc_Clock_Monotonic() + seconds;
  while (pc_Clock_Monotonic() < end) {
    struct pollfd fds[32];
    double timeout = 0.05;
    size_t n = pc_NetResolver_PollPrepare(&r, 1, fds, 30, &timeout);
    if (pc_NetResolver_Version(r) != seen) return 1; /* ended at once */
    fds[n].fd = dns_fd;
    fds[n].events = POLLIN;
    fds[n].revents = 0;
    fds[n + 1].fd = conn_fd >= 0 ? conn_fd : tcp_fd;
    fds[n + 1].events = POLLIN;
    fds[n + 1].revents = 0;
    poll(fds, n + 2, (int)(timeout * 1000) + 1);
    if (fds[n].revents) answer();
    if (fds[n + 1].revents) answer_tcp();
    pc_NetResolver_PollDone(&r, 1, fds, n);
    if (pc_NetResolver_Version(r) != seen) return 1;
  }
  return 0;
}

static int has(pc_NetResolver *r, const char *host, unsigned port, unsigned weight) {
  const pc_NetAddress *a;
  size_t n = pc_NetResolver_Addresses(r, &a);
  for (size_t i = 0; i < n; i++)
    if (strcmp(a[i].host, host) == 0 && a[i].port == port && a[i].weight == weight) return 1;
  return 0;
}

/* 'r', or the test ends: every case below needs its resolver. */
static pc_NetResolver *must(pc_NetResolver *r, const pc_Error *err) {
  if (r == NULL) {
    fprintf(stderr, "no resolver: %s\n", err->msg);
    exit(1);
  }
  return r;
}

static size_t count(pc_NetResolver *r) {
  const pc_NetAddress *a;
  return pc_NetResolver_Addresses(r, &a);
}

static void getaddrinfo_cases(void) {
  char out[8][PC_NET_ADDRESS_MAX];
  pc_Error err;
  pc_Error_Init(&err);
  /* A numeric address resolves to itself, once. */
  CHECK(pc_Net_Resolve("127.0.0.1", "50051", out, 8, &err) == 1);
  CHECK(strcmp(out[0], "127.0.0.1") == 0);
  /* A name gives numeric addresses (localhost: 127.0.0.1 or ::1 here). */
  size_t n = pc_Net_Resolve("localhost", "80", out, 8, &err);
  CHECK(n >= 1);
  for (size_t i = 0; i < n; i++)
    CHECK(strcmp(out[i], "127.0.0.1") == 0 || strcmp(out[i], "::1") == 0);
  for (size_t i = 1; i < n; i++) CHECK(strcmp(out[i], out[0]) != 0);
  /* At most 'max'. */
  CHECK(pc_Net_Resolve("localhost", "80", out, 1, &err) == 1);
  /* A name that does not resolve (.invalid, RFC 6761) fails with its name. */
  pc_Error_Init(&err);
  CHECK(pc_Net_Resolve("no-such-host.invalid", "80", out, 8, &err) == 0);
  CHECK(strstr(err.msg, "resolve no-such-host.invalid: ") == err.msg);
}

int main(void) {
  getaddrinfo_cases();

  /* The server's UDP and TCP sockets share a port: a free UDP port may be
   * taken for TCP (other tests run beside this one), so try another. */
  struct sockaddr_in sa;
  int bound = 0;
  for (int attempt = 0; attempt < 50 && !bound; attempt++) {
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t salen = sizeof sa;
    dns_fd = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(bind(dns_fd, (struct sockaddr *)&sa, sizeof sa) == 0);
    CHECK(getsockname(dns_fd, (struct sockaddr *)&sa, &salen) == 0);
    tcp_fd = socket(AF_INET, SOCK_STREAM, 0);
    bound = bind(tcp_fd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(tcp_fd, 8) == 0;
    if (!bound) {
      close(tcp_fd);
      close(dns_fd);
    }
  }
  CHECK(bound);
  char server[32];
  snprintf(server, sizeof server, "127.0.0.1:%u", ntohs(sa.sin_port));
  pc_NetResolverOptions o = {server, 0.3, 1.0};
  pc_Error err;

  /* A numeric host, with no query. */
  pc_Error_Init(&err);
  pc_NetResolver *r = must(pc_NetResolver_New("127.0.0.1", 50051, &o, NULL, NULL, &err), &err);
  CHECK(pc_NetResolver_Version(r) == 0 && count(r) == 0 && !pc_NetResolver_Busy(r));
  CHECK(pc_NetResolver_Step(r) == 1 && queries == 0);
  CHECK(count(r) == 1 && has(r, "127.0.0.1", 50051, 1));
  CHECK(pc_NetResolver_Error(r) == NULL);
  pc_NetResolver_Free(r);

  /* A records: both addresses; nothing more before the TTL (1 s) even
   * past the minimum interval; then the new set. */
  zone[0] = (Record){"svc.test", 1, 1, "127.0.0.2"};
  zone[1] = (Record){"svc.test", 1, 1, "127.0.0.3"};
  nzone = 2;
  r = must(pc_NetResolver_New("svc.test", 7000, &o, NULL, NULL, &err), &err);
  CHECK(pc_NetResolver_Step(r) == 0 && pc_NetResolver_Busy(r));
  CHECK(run(r, 0, 5));
  CHECK(!pc_NetResolver_Busy(r));
  CHECK(count(r) == 2 && has(r, "127.0.0.2", 7000, 1) && has(r, "127.0.0.3", 7000, 1));
  zone[1].value = "127.0.0.4";
  int before = queries;
  CHECK(!run(r, 1, 0.5)); /* the minimum interval passed, not the TTL */
  CHECK(queries == before);
  CHECK(run(r, 1, 5)); /* the TTL */
  CHECK(count(r) == 2 && has(r, "127.0.0.4", 7000, 1) && !has(r, "127.0.0.3", 7000, 1));

  /* A refresh: due at the minimum interval, not before; NXDOMAIN then
   * keeps the last good addresses and says why, naming the name. */
  zone[0].ttl = zone[1].ttl = 300;
  CHECK(run(r, 2, 5)); /* TTL 1 s still: this one learns 300 s */
  pc_NetResolver_Refresh(r);
  CHECK(pc_NetResolver_Step(r) == 3 && !pc_NetResolver_Busy(r)); /* not yet */
  nzone = 0;
  CHECK(run(r, 3, 5));
  CHECK(pc_NetResolver_Error(r) != NULL &&
        strcmp(pc_NetResolver_Error(r), "resolve svc.test: Domain name not found") == 0);
  CHECK(count(r) == 2 && has(r, "127.0.0.4", 7000, 1));
  pc_NetResolver_Free(r);

  /* A name never resolved: the error, no address. */
  r = must(pc_NetResolver_New("nothing.test", 7000, &o, NULL, NULL, &err), &err);
  CHECK(run(r, 0, 5));
  CHECK(count(r) == 0 && pc_NetResolver_Error(r) != NULL);
  pc_NetResolver_Free(r);

  /* SRV: the lowest priority group, each target's port and weight. */
  zone[0] = (Record){"_grpc._tcp.svc.test", 33, 60, "10 3 5001 a.test"};
  zone[1] = (Record){"_grpc._tcp.svc.test", 33, 60, "10 1 5002 b.test"};
  zone[2] = (Record){"_grpc._tcp.svc.test", 33, 60, "20 5 5003 c.test"};
  zone[3] = (Record){"a.test", 1, 60, "127.0.0.5"};
  zone[4] = (Record){"b.test", 1, 60, "127.0.0.6"};
  zone[5] = (Record){"c.test", 1, 60, "127.0.0.7"};
  nzone = 6;
  r = must(pc_NetResolver_New("_grpc._tcp.svc.test", 0, &o, NULL, NULL, &err), &err);
  CHECK(run(r, 0, 5));
  CHECK(pc_NetResolver_Error(r) == NULL);
  CHECK(count(r) == 2 && has(r, "127.0.0.5", 5001, 3) && has(r, "127.0.0.6", 5002, 1));
  pc_NetResolver_Free(r);

  /* SRV targets of port 0 only: the reason names one. */
  zone[0] = (Record){"_grpc._tcp.zero.test", 33, 60, "10 1 0 a.test"};
  nzone = 1;
  r = must(pc_NetResolver_New("_grpc._tcp.zero.test", 0, &o, NULL, NULL, &err), &err);
  CHECK(run(r, 0, 5));
  CHECK(count(r) == 0 && pc_NetResolver_Error(r) != NULL &&
        strcmp(pc_NetResolver_Error(r),
               "resolve _grpc._tcp.zero.test: SRV target a.test has port 0") == 0);
  pc_NetResolver_Free(r);

  /* A large answer: 70 A records give PC_NET_RESOLVE_MAX_ADDRESSES
   * addresses; 70 SRV targets, PC_NET_RESOLVE_MAX_TARGETS looked up. */
  static char values[70][64];
  for (int i = 0; i < 70; i++) {
    snprintf(values[i], sizeof values[i], "127.0.1.%d", i + 1);
    zone[i] = (Record){"many.test", 1, 60, values[i]};
  }
  nzone = 70;
  r = must(pc_NetResolver_New("many.test", 7000, &o, NULL, NULL, &err), &err);
  CHECK(run(r, 0, 5));
  if (count(r) != PC_NET_RESOLVE_MAX_ADDRESSES)
    fprintf(stderr, "many: %zu %s\n", count(r),
            pc_NetResolver_Error(r) ? pc_NetResolver_Error(r) : "");
  CHECK(count(r) == PC_NET_RESOLVE_MAX_ADDRESSES);
  pc_NetResolver_Free(r);
  for (int i = 0; i < 70; i++) {
    snprintf(values[i], sizeof values[i], "10 1 %d a.test", 6000 + i);
    zone[i] = (Record){"_grpc._tcp.many.test", 33, 60, values[i]};
  }
  zone[70] = (Record){"a.test", 1, 60, "127.0.0.5"};
  nzone = 71;
  int asked = queries;
  r = must(pc_NetResolver_New("_grpc._tcp.many.test", 0, &o, NULL, NULL, &err), &err);
  CHECK(run(r, 0, 5));
  CHECK(count(r) == PC_NET_RESOLVE_MAX_TARGETS && has(r, "127.0.0.5", 6000, 1) &&
        !has(r, "127.0.0.5", 6000 + PC_NET_RESOLVE_MAX_TARGETS, 1));
  /* the SRV question (over UDP, then TCP), then the queries of each target
     looked up (4 each with c-ares 1.18: A and AAAA, EDNS) */
  CHECK(queries - asked <= 2 + 4 * PC_NET_RESOLVE_MAX_TARGETS);
  pc_NetResolver_Free(r);
  zone[0] = (Record){"_grpc._tcp.svc.test", 33, 60, "10 3 5001 a.test"}; /* back, for below */
  zone[1] = (Record){"_grpc._tcp.svc.test", 33, 60, "10 1 5002 b.test"};
  zone[2] = (Record){"_grpc._tcp.svc.test", 33, 60, "20 5 5003 c.test"};
  zone[3] = (Record){"a.test", 1, 60, "127.0.0.5"};
  zone[4] = (Record){"b.test", 1, 60, "127.0.0.6"};
  zone[5] = (Record){"c.test", 1, 60, "127.0.0.7"};
  nzone = 6;

  /* A server c-ares refuses. */
  pc_Error_Init(&err);
  pc_NetResolverOptions bad = {"not an address", 0, 0};
  CHECK(pc_NetResolver_New("svc.test", 1, &bad, NULL, NULL, &err) == NULL);
  CHECK(strstr(err.msg, "resolve svc.test: DNS server 'not an address': ") == err.msg);

  /* Every allocation failing in turn, freed half-way through too: no leak. */
  for (long at = 1;; at++) {
    fail_reset(at);
    pc_Error_Init(&err);
    r = pc_NetResolver_New("_grpc._tcp.svc.test", 0, &o, fail_alloc, NULL, &err);
    if (r) {
      run(r, 0, 5);
      CHECK(count(r) == 2 || pc_NetResolver_Error(r) != NULL);
      pc_NetResolver_Free(r);
    }
    CHECK(fail_live == 0);
    if (!fail_hit) break;
  }
  fail_reset(0);
  r = must(pc_NetResolver_New("_grpc._tcp.svc.test", 0, &o, fail_alloc, NULL, &err), &err);
  pc_NetResolver_Step(r); /* the SRV query sent, unanswered */
  pc_NetResolver_Free(r);
  CHECK(fail_live == 0);
  close(dns_fd);
  close(tcp_fd);
  return CHECK_DONE();
}
