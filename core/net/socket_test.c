/* The built-in driver against listeners in this process: connection
 * refused, a plain exchange over IPv4 (and IPv6 when the host has it), a
 * lingering close, TLS against a port that is not TLS, a CA file that
 * does not load, and Unix-domain sockets (a file and an abstract name, a
 * path longer than sun_path, a missing file). TLS
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

static int exchange(int family, const char *host) {
  char port[8];
  int l = listener(family, port);
  if (l < 0) return 1; /* no such loopback here */
  pc_NetOptions o = {host, port, 0, NULL, NULL, NULL, NULL, 0, NULL, 0};
  pc_Error err;
  pc_Error_Init(&err);
  pc_NetSocket *s = pc_NetSocket_Connect(&o, NULL, NULL, &err);
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
  close(l);
  return ok;
}

/* pc_NetSocket_Linger on the accepting side of a connection whose peer
 * sent 100 KB the server never read: the peer still reads what the server
 * wrote last, then the end of the stream (a plain close would have reset
 * the connection, and the peer read neither); the linger ends once the
 * peer closes. */
static int linger(void) {
  char port[8];
  int l = listener(AF_INET, port);
  struct sockaddr_in a4;
  memset(&a4, 0, sizeof a4);
  a4.sin_family = AF_INET;
  a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a4.sin_port = htons((unsigned short)atoi(port));
  int c = socket(AF_INET, SOCK_STREAM, 0);
  int ok = l >= 0 && c >= 0 && connect(c, (struct sockaddr *)&a4, sizeof a4) == 0;
  int a = ok ? accept(l, NULL, NULL) : -1;
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
  pc_NetOptions o = {"ignored", "1", 0, NULL, NULL, NULL, NULL, 0, path, abstract};
  pc_NetSocket *s = pc_NetSocket_Connect(&o, NULL, NULL, &err);
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
  pc_NetSocket_Close(s);
  close(l);
  if (!abstract) unlink(path);
  return ok;
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
  pc_NetOptions o = {"127.0.0.1", port, 0, NULL, NULL, NULL, NULL, 0, NULL, 0};
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
  pc_NetOptions t = {"127.0.0.1", port, 1, NULL, NULL, NULL, NULL, 0, NULL, 0};
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
  pc_NetOptions bad = {"127.0.0.1", "1", 1, "/dev/null", NULL, NULL, NULL, 0, NULL, 0};
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
  pc_NetOptions far = {"x", "1", 0, NULL, NULL, NULL, NULL, 0, longest, 0};
  pc_Error_Init(&err);
  CHECK(pc_NetSocket_Connect(&far, NULL, NULL, &err) == NULL);
  CHECK(strstr(err.msg, "path longer than 107 bytes") != NULL);
  pc_NetOptions gone = {"x", "1", 0, NULL, NULL, NULL, NULL, 0, "/nonexistent/pc.sock", 0};
  s = must(pc_NetSocket_Connect(&gone, NULL, NULL, &err), &err);
  CHECK(settle(s, 100) == -1);
  CHECK(strcmp(pc_NetSocket_Error(s),
               "connect to unix:/nonexistent/pc.sock: No such file or directory") == 0);
  pc_NetSocket_Close(s);
  return CHECK_DONE();
}
