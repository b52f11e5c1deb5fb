/* The built-in driver against listeners in this process: connection
 * refused, a plain exchange over IPv4 (and IPv6 when the host has it), a
 * lingering close, TLS against a port that is not TLS, a CA file that
 * does not load, and Unix-domain sockets (a file and an abstract name, a
 * path longer than sun_path, a missing file), and TLS on a hosted socket
 * (the host moves ciphertext; pc_NetSocket_NewHosted) against the
 * serving side: the exchange, a second connection resuming the first's
 * session, a wrong CA refused, a server without ALPN h2 refused. TLS
 * against real servers is in spec/grpc_spec.lua. */
#define _POSIX_C_SOURCE 200809L
#include "testing/check.h"
#include "net/socket.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* A listener on the loopback address of 'family'; its port into 'port'. */
static int listener(int family, char *port) {
  int fd = socket(family, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  struct sockaddr_storage ss;
  memset(&ss, 0, sizeof ss);
  socklen_t len;
  if (family == AF_INET) {
    struct sockaddr_in *a = (struct sockaddr_in *)&ss;
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    len = sizeof *a;
  } else {
    struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_loopback;
    len = sizeof *a;
  }
  if (bind(fd, (struct sockaddr *)&ss, len) != 0 || listen(fd, 4) != 0) {
    close(fd);
    return -1;
  }
  getsockname(fd, (struct sockaddr *)&ss, &len);
  unsigned p = family == AF_INET ? ntohs(((struct sockaddr_in *)&ss)->sin_port)
                                 : ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
  snprintf(port, 8, "%u", p);
  return fd;
}

/* Progress until done or 'rounds' x 10 ms. */
static int settle(pc_NetSocket *s, int rounds) {
  for (int i = 0; i < rounds; i++) {
    int r = pc_NetSocket_Progress(s);
    if (r != 0) return r;
    struct pollfd p = {pc_NetSocket_Fd(s), pc_NetSocket_Events(s, 0), 0};
    poll(&p, 1, 10);
  }
  return 0;
}

/* Connects with 'o' to the listening socket 'l', sends "ping", reads
 * "pong", then the end of the stream once the peer closed. */
static int exchange_on(int l, const pc_NetOptions *o) {
  pc_Error err;
  pc_Error_Init(&err);
  pc_NetSocket *s = pc_NetSocket_Connect(o, NULL, NULL, &err);
  int ok = s != NULL;
  int a = ok ? accept(l, NULL, NULL) : -1;
  ok = ok && a >= 0 && settle(s, 100) == 1;
  ok = ok && pc_NetSocket_Write(s, "ping", 4) == 4;
  char buf[8] = {0};
  ok = ok && recv(a, buf, sizeof buf, 0) == 4 && memcmp(buf, "ping", 4) == 0;
  ok = ok && send(a, "pong", 4, 0) == 4;
  long n = 0;
  for (int i = 0; ok && i < 100 && n == 0; i++) {
    struct pollfd p = {pc_NetSocket_Fd(s), POLLIN, 0};
    poll(&p, 1, 10);
    n = pc_NetSocket_Read(s, buf, sizeof buf);
  }
  ok = ok && n == 4 && memcmp(buf, "pong", 4) == 0;
  if (a >= 0) close(a);
  for (int i = 0; ok && i < 100 && n >= 0; i++) {
    struct pollfd p = {pc_NetSocket_Fd(s), POLLIN, 0};
    poll(&p, 1, 10);
    n = pc_NetSocket_Read(s, buf, sizeof buf);
  }
  ok = ok && n == -1 && strstr(pc_NetSocket_Error(s), "connection closed by the peer") != NULL;
  pc_NetSocket_Close(s);
  return ok;
}

static int exchange(int family, const char *host) {
  char port[8];
  int l = listener(family, port);
  if (l < 0) return 1; /* no such loopback here */
  pc_NetOptions o = {host, port, 0, NULL, NULL, NULL, NULL, 0, NULL, 0, NULL, 0};
  int ok = exchange_on(l, &o);
  close(l);
  return ok;
}

/* A TCP connection over the loopback address: the listener into '*l' (its
 * port into 'port'), the connecting side into '*c', the accepted side into
 * '*a' (-1 when the connect failed); 1 when it connected. */
static int tcp_pair(char *port, int *l, int *c, int *a) {
  *l = listener(AF_INET, port);
  struct sockaddr_in a4;
  memset(&a4, 0, sizeof a4);
  a4.sin_family = AF_INET;
  a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a4.sin_port = htons((unsigned short)atoi(port));
  *c = socket(AF_INET, SOCK_STREAM, 0);
  int ok = *l >= 0 && *c >= 0 && connect(*c, (struct sockaddr *)&a4, sizeof a4) == 0;
  *a = ok ? accept(*l, NULL, NULL) : -1;
  return ok;
}

/* pc_NetSocket_Linger on the accepting side of a connection whose peer
 * sent 100 KB the server never read: the peer still reads what the server
 * wrote last, then the end of the stream (a plain close would have reset
 * the connection, and the peer read neither); the linger ends once the
 * peer closes. */
static int linger(void) {
  char port[8];
  int l, c, a;
  int ok = tcp_pair(port, &l, &c, &a);
  pc_Error err;
  pc_Error_Init(&err);
  pc_NetSocket *s = a >= 0 ? pc_NetSocket_Adopt(a, "peer", NULL, NULL, NULL, &err) : NULL;
  ok = ok && s != NULL;
  static char junk[100000];
  ok = ok && send(c, junk, sizeof junk, 0) == (ssize_t)sizeof junk;
  ok = ok && pc_NetSocket_Write(s, "GOAWAY", 6) == 6;
  ok = ok && pc_NetSocket_Linger(s) == 0; /* the peer has not closed */
  ok = ok && pc_NetSocket_Events(s, 1) == POLLIN;
  char buf[16] = {0};
  struct pollfd p = {c, POLLIN, 0};
  ok = ok && poll(&p, 1, 2000) == 1 && recv(c, buf, sizeof buf, 0) == 6 &&
       memcmp(buf, "GOAWAY", 6) == 0;
  ok = ok && poll(&p, 1, 2000) == 1 && recv(c, buf, sizeof buf, 0) == 0; /* the server's end */
  if (c >= 0) close(c);
  int done = 0;
  for (int i = 0; ok && i < 200 && !done; i++) {
    struct pollfd q = {pc_NetSocket_Fd(s), pc_NetSocket_Events(s, 0), 0};
    poll(&q, 1, 10);
    done = pc_NetSocket_Linger(s);
  }
  ok = ok && done;
  if (s != NULL)
    pc_NetSocket_Close(s);
  else if (a >= 0)
    close(a);
  if (l >= 0) close(l);
  return ok;
}

/* A plain exchange over a Unix-domain socket: the file 'path' or the
 * abstract name. */
static int unix_exchange(const char *path, int abstract) {
  struct sockaddr_un sa;
  socklen_t len;
  pc_Error err;
  pc_Error_Init(&err);
  if (!pc_Net_UnixAddress(path, abstract, &sa, &len, &err)) return 0;
  if (!abstract) unlink(path);
  int l = socket(AF_UNIX, SOCK_STREAM, 0);
  if (l < 0 || bind(l, (struct sockaddr *)&sa, len) != 0 || listen(l, 4) != 0) return 0;
  pc_NetOptions o = {"ignored", "1", 0, NULL, NULL, NULL, NULL, 0, path, abstract, NULL, 0};
  int ok = exchange_on(l, &o);
  close(l);
  if (!abstract) unlink(path);
  return ok;
}

/* Moves what the hosted client 'h' has for the wire onto the TCP socket
 * 'fd', and what arrived on 'fd' into 'h'; drives the server socket 'srv'
 * (Progress until ready). */
static void host_round(pc_NetSocket *h, int fd, pc_NetSocket *srv) {
  const char *p;
  size_t n;
  while ((n = pc_NetSocket_HostedOutput(h, &p)) > 0) {
    ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w <= 0) break;
    pc_NetSocket_HostedWrote(h, (size_t)w);
  }
  (void)pc_NetSocket_Progress(srv);
  struct pollfd q = {fd, POLLIN, 0};
  poll(&q, 1, 5);
  char buf[16384];
  ssize_t r = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  if (r > 0) pc_NetSocket_HostedInput(h, buf, (size_t)r);
  (void)pc_NetSocket_Progress(h);
}

/* One TLS connection from a hosted client (its bytes over a TCP pair) to
 * an adopted server socket: 1 when "ping" and "pong" crossed; '*resumed'
 * whether the handshake resumed a session; the client's error into 'why'
 * when it failed. */
static int hosted_tls(pc_NetTlsClient *tc, const char *ca, pc_NetTlsServer *srv_tls, int *resumed,
                      char *why, size_t whylen) {
  char port[8];
  int l, c, a;
  int ok = tcp_pair(port, &l, &c, &a);
  pc_Error err;
  pc_Error_Init(&err);
  pc_NetSocket *srv = a >= 0 ? pc_NetSocket_Adopt(a, "peer", srv_tls, NULL, NULL, &err) : NULL;
  pc_NetOptions o = {"localhost", port, 1, ca, NULL, NULL, "localhost", 0, NULL, 0, tc, 0};
  pc_NetSocket *h = pc_NetSocket_NewHosted(&o, NULL, NULL, &err);
  ok = ok && srv != NULL && h != NULL && pc_NetSocket_HostedTls(h);
  if (ok) pc_NetSocket_SetHosted(h, 1, NULL);
  int hr = 0;
  for (int i = 0; ok && i < 400 && hr == 0; i++) {
    host_round(h, c, srv);
    hr = pc_NetSocket_Progress(h);
  }
  if (hr < 0 && why) snprintf(why, whylen, "%s", pc_NetSocket_Error(h));
  ok = ok && hr == 1;
  ok = ok && pc_NetSocket_Write(h, "ping", 4) == 4;
  char buf[8] = {0};
  long n = 0;
  for (int i = 0; ok && i < 400 && n == 0; i++) {
    host_round(h, c, srv);
    n = pc_NetSocket_Read(srv, buf, sizeof buf);
  }
  ok = ok && n == 4 && memcmp(buf, "ping", 4) == 0;
  ok = ok && pc_NetSocket_Write(srv, "pong", 4) == 4;
  n = 0;
  for (int i = 0; ok && i < 400 && n == 0; i++) {
    host_round(h, c, srv);
    n = pc_NetSocket_Read(h, buf, sizeof buf);
  }
  ok = ok && n == 4 && memcmp(buf, "pong", 4) == 0;
  if (resumed) *resumed = h ? pc_NetSocket_Resumed(h) : 0;
  pc_NetSocket_Close(h);
  pc_NetSocket_Close(srv);
  if (c >= 0) close(c);
  if (l >= 0) close(l);
  return ok;
}

static void hosted_tls_tests(void) {
  char dir[] = "/tmp/pc_socket_tls_XXXXXX";
  if (mkdtemp(dir) == NULL) {
    CHECK(0);
    return;
  }
  char cmd[1024], cert[128], key[128], other[128];
  snprintf(cert, sizeof cert, "%s/cert.pem", dir);
  snprintf(key, sizeof key, "%s/key.pem", dir);
  snprintf(other, sizeof other, "%s/other.pem", dir);
  snprintf(cmd, sizeof cmd,
           "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext "
           "subjectAltName=DNS:localhost -keyout %s -out %s 2>/dev/null && openssl req -x509 "
           "-newkey rsa:2048 -nodes -days 1 -subj /CN=other -keyout %s/okey.pem -out %s "
           "2>/dev/null",
           key, cert, dir, other);
  CHECK(system(cmd) == 0);
  pc_Error err;
  pc_Error_Init(&err);
  pc_NetTlsServer *st = pc_NetTlsServer_New(cert, key, NULL, &err);
  CHECK(st != NULL);
  pc_NetOptions co = {"localhost", "1", 1, cert, NULL, NULL, "localhost", 0, NULL, 0, NULL, 0};
  pc_NetTlsClient *tc = pc_NetTlsClient_New(&co, &err);
  CHECK(tc != NULL);
  int resumed = -1;
  char why[PC_ERROR_MAX] = "";
  CHECK(st && tc && hosted_tls(tc, cert, st, &resumed, why, sizeof why));
  CHECK(resumed == 0); /* the first connection: a full handshake */
  CHECK(st && tc && hosted_tls(tc, cert, st, &resumed, why, sizeof why));
  CHECK(resumed == 1); /* the second offered the first's session, and the server took it */

  /* a CA that did not sign the server's certificate */
  pc_NetOptions wo = {"localhost", "1", 1, other, NULL, NULL, "localhost", 0, NULL, 0, NULL, 0};
  pc_NetTlsClient *wrong = pc_NetTlsClient_New(&wo, &err);
  CHECK(wrong != NULL);
  CHECK(st && wrong && !hosted_tls(wrong, other, st, NULL, why, sizeof why));
  CHECK(strstr(why, "TLS handshake with localhost:") != NULL &&
        strstr(why, "certificate verify failed") != NULL);
  pc_NetTlsClient_Free(wrong);
  pc_NetTlsClient_Free(tc);
  pc_NetTlsServer_Free(st);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

/* 'p', or the test stops: what follows needs it. */
static pc_NetSocket *must(pc_NetSocket *p, const pc_Error *err) {
  if (p == NULL) {
    fprintf(stderr, "connect: %s\n", err->msg);
    exit(1);
  }
  return p;
}

int main(void) {
  pc_Error err;
  pc_Error_Init(&err);

  /* refused */
  char port[8];
  int l = listener(AF_INET, port);
  CHECK(l >= 0);
  close(l);
  pc_NetOptions o = {"127.0.0.1", port, 0, NULL, NULL, NULL, NULL, 0, NULL, 0, NULL, 0};
  pc_NetSocket *s = must(pc_NetSocket_Connect(&o, NULL, NULL, &err), &err);
  CHECK(settle(s, 100) == -1);
  char want[64];
  snprintf(want, sizeof want, "connect to 127.0.0.1:%s: Connection refused", port);
  CHECK(strcmp(pc_NetSocket_Error(s), want) == 0);
  pc_NetSocket_Close(s);

  CHECK(exchange(AF_INET, "127.0.0.1"));
  CHECK(exchange(AF_INET6, "::1"));
  CHECK(linger());

  /* TLS against a listener that reads the hello and closes */
  l = listener(AF_INET, port);
  pc_NetOptions t = {"127.0.0.1", port, 1, NULL, NULL, NULL, NULL, 0, NULL, 0, NULL, 0};
  s = must(pc_NetSocket_Connect(&t, NULL, NULL, &err), &err);
  int a = accept(l, NULL, NULL);
  settle(s, 5);
  char hello[4096];
  CHECK(recv(a, hello, sizeof hello, 0) > 0 && hello[0] == 0x16); /* a TLS record */
  close(a);
  CHECK(settle(s, 100) == -1);
  snprintf(want, sizeof want, "TLS handshake with 127.0.0.1:%s: ", port);
  CHECK(strncmp(pc_NetSocket_Error(s), want, strlen(want)) == 0);
  pc_NetSocket_Close(s);
  close(l);

  /* a CA file that is not PEM */
  pc_NetOptions bad = {"127.0.0.1", "1", 1, "/dev/null", NULL, NULL, NULL, 0, NULL, 0, NULL, 0};
  CHECK(pc_NetSocket_Connect(&bad, NULL, NULL, &err) == NULL);
  CHECK(strcmp(err.msg, "ca_file '/dev/null': not a PEM certificate bundle") == 0);

  /* Unix-domain sockets */
  char path[64];
  snprintf(path, sizeof path, "/tmp/pc_socket_test_%ld.sock", (long)getpid());
  CHECK(unix_exchange(path, 0));
  snprintf(path, sizeof path, "pc_socket_test_%ld", (long)getpid());
  CHECK(unix_exchange(path, 1));
  char longest[120];
  memset(longest, 'a', sizeof longest);
  longest[0] = '/';
  longest[107] = '\0'; /* 107 bytes: what sun_path holds with its NUL */
  struct sockaddr_un sa;
  socklen_t salen;
  CHECK(pc_Net_UnixAddress(longest, 0, &sa, &salen, &err));
  longest[107] = 'a';
  longest[108] = '\0';
  pc_Error_Init(&err);
  CHECK(!pc_Net_UnixAddress(longest, 0, &sa, &salen, &err));
  CHECK(strstr(err.msg, "path longer than 107 bytes (sun_path)") != NULL);
  pc_NetOptions far = {"x", "1", 0, NULL, NULL, NULL, NULL, 0, longest, 0, NULL, 0};
  pc_Error_Init(&err);
  CHECK(pc_NetSocket_Connect(&far, NULL, NULL, &err) == NULL);
  CHECK(strstr(err.msg, "path longer than 107 bytes") != NULL);
  pc_NetOptions gone = {"x", "1", 0, NULL, NULL, NULL, NULL, 0, "/nonexistent/pc.sock", 0, NULL, 0};
  s = must(pc_NetSocket_Connect(&gone, NULL, NULL, &err), &err);
  CHECK(settle(s, 100) == -1);
  CHECK(strcmp(pc_NetSocket_Error(s),
               "connect to unix:/nonexistent/pc.sock: No such file or directory") == 0);
  pc_NetSocket_Close(s);

  hosted_tls_tests();
  return CHECK_DONE();
}
