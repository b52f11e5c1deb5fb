/* The listener at its limits. Out of file descriptors: accept fails with
 * EMFILE while a connection waits in the backlog, so the listening socket
 * stays readable; it then sits out a pause (left out of the poll set, the
 * poll timeout lowered to the pause's end) instead of being polled again at
 * once, which spun. Once descriptors are free, the waiting connection is
 * accepted. At max_connections: a client that closes its connection and
 * connects again at once is served, not closed (the end of the old
 * connection is read before the new one is accepted). On a Unix-domain
 * socket: the mode set, a connection accepted, a stale socket file
 * replaced, one in use and a file that is not a socket refused, the file
 * removed at the end; an abstract name. */
#define _POSIX_C_SOURCE 200809L
#include "testing/check.h"
#include "net/listener.h"
#include "net/socket.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define MAX_TAKEN 256

/* A listener on 127.0.0.1 with at most 'max_connections' (0: the default). */
static pc_GrpcListener *listener(size_t max_connections) {
  pc_Error err;
  pc_Error_Init(&err);
  pc_GrpcListenerOptions o;
  memset(&o, 0, sizeof o);
  o.host = "127.0.0.1";
  o.port = "0";
  o.max_connections = max_connections;
  pc_GrpcListener *l = pc_GrpcListener_New(&o, NULL, NULL, &err);
  CHECK(l != NULL);
  return l;
}

/* A client socket connected to 'l' (the kernel completes the connection
 * into the listener's backlog), or -1. */
static int client(const pc_GrpcListener *l) {
  int c = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((unsigned short)pc_GrpcListener_Port(l));
  if (c >= 0 && connect(c, (struct sockaddr *)&a, sizeof a) == 0) return c;
  if (c >= 0) close(c);
  return -1;
}

static void out_of_descriptors(void) {
  pc_GrpcListener *l = listener(0);
  if (l == NULL) return;
  int c = client(l);
  CHECK(c >= 0);

  struct pollfd fds[4];
  double timeout = 10;
  CHECK(pc_Grpc_PollFds(NULL, 0, &l, 1, NULL, 0, fds, 4, &timeout) == 1); /* the listening socket */

  /* every descriptor taken, under a limit lowered for the test */
  struct rlimit old, low;
  CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0);
  low = old;
  if (low.rlim_cur > 64) low.rlim_cur = 64;
  CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
  int taken[MAX_TAKEN], n = 0, fd = 0;
  while (n < MAX_TAKEN && (fd = dup(c)) >= 0) taken[n++] = fd;
  CHECK(fd < 0 && errno == EMFILE);

  CHECK(pc_Grpc_PumpAll(NULL, 0, &l, 1, NULL, 0, 1.0)); /* readable: accept fails with EMFILE */
  CHECK(pc_GrpcListener_Connections(l) == 0);
  timeout = 10;
  CHECK(pc_Grpc_PollFds(NULL, 0, &l, 1, NULL, 0, fds, 4, &timeout) == 0); /* left out */
  CHECK(timeout > 0 && timeout <= 0.1);

  for (int i = 0; i < n; i++) close(taken[i]);
  CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0);
  for (int i = 0; i < 100 && pc_GrpcListener_Connections(l) == 0; i++)
    CHECK(pc_Grpc_PumpAll(NULL, 0, &l, 1, NULL, 0, 0.05));
  CHECK(pc_GrpcListener_Connections(l) == 1); /* accepted after the pause */
  timeout = 10;
  CHECK(pc_Grpc_PollFds(NULL, 0, &l, 1, NULL, 0, fds, 4, &timeout) ==
        2); /* listening again, and the connection */

  close(c);
  pc_GrpcListener_Free(l);
}

static void reconnect_at_limit(void) {
  pc_GrpcListener *l = listener(1);
  if (l == NULL) return;
  int first = client(l);
  CHECK(first >= 0);
  for (int i = 0; i < 100 && pc_GrpcListener_Connections(l) == 0; i++)
    CHECK(pc_Grpc_PumpAll(NULL, 0, &l, 1, NULL, 0, 0.05));
  CHECK(pc_GrpcListener_Connections(l) == 1);
  /* the old connection's end and the new one, seen in one poll */
  close(first);
  int second = client(l);
  CHECK(second >= 0);
  CHECK(pc_Grpc_PumpAll(NULL, 0, &l, 1, NULL, 0, 1.0));
  for (int i = 0; i < 100 && pc_GrpcListener_Connections(l) == 0; i++)
    CHECK(pc_Grpc_PumpAll(NULL, 0, &l, 1, NULL, 0, 0.05));
  CHECK(pc_GrpcListener_Connections(l) == 1);
  char byte;
  CHECK(recv(second, &byte, 1, MSG_DONTWAIT) < 0 &&
        errno == EAGAIN); /* open: not ended, not reset */
  close(second);
  pc_GrpcListener_Free(l);
}

static pc_GrpcListener *unix_listener(const char *path, int abstract, unsigned mode,
                                      pc_Error *err) {
  pc_GrpcListenerOptions o;
  memset(&o, 0, sizeof o);
  o.unix_path = path;
  o.unix_abstract = abstract;
  o.unix_mode = mode;
  pc_Error_Init(err);
  return pc_GrpcListener_New(&o, NULL, NULL, err);
}

static int unix_client(const char *path, int abstract) {
  struct sockaddr_un sa;
  socklen_t len;
  pc_Error err;
  pc_Error_Init(&err);
  int c = socket(AF_UNIX, SOCK_STREAM, 0);
  if (c >= 0 && pc_Net_UnixAddress(path, abstract, &sa, &len, &err) &&
      connect(c, (struct sockaddr *)&sa, len) == 0)
    return c;
  if (c >= 0) close(c);
  return -1;
}

static void unix_sockets(void) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/pc_listener_test_%ld.sock", (long)getpid());
  unlink(path);
  pc_Error err;
  pc_GrpcListener *l = unix_listener(path, 0, 0600, &err);
  CHECK(l != NULL);
  if (l == NULL) return;
  struct stat st;
  CHECK(lstat(path, &st) == 0 && S_ISSOCK(st.st_mode) && (st.st_mode & 0777) == 0600);
  CHECK(pc_GrpcListener_Port(l) == 0);
  int c = unix_client(path, 0);
  CHECK(c >= 0);
  for (int i = 0; i < 100 && pc_GrpcListener_Connections(l) == 0; i++)
    CHECK(pc_Grpc_PumpAll(NULL, 0, &l, 1, NULL, 0, 0.05));
  CHECK(pc_GrpcListener_Connections(l) == 1);
  /* in use: a second listener on the same path is refused */
  CHECK(unix_listener(path, 0, 0, &err) == NULL);
  CHECK(strstr(err.msg, "in use (a server listens there)") != NULL);
  close(c);
  pc_GrpcListener_Free(l);
  CHECK(lstat(path, &st) != 0 && errno == ENOENT); /* removed */

  /* a stale socket file (bound, nobody listens) is replaced */
  struct sockaddr_un sa;
  socklen_t len;
  CHECK(pc_Net_UnixAddress(path, 0, &sa, &len, &err));
  int stale = socket(AF_UNIX, SOCK_STREAM, 0);
  CHECK(stale >= 0 && bind(stale, (struct sockaddr *)&sa, len) == 0);
  close(stale);
  l = unix_listener(path, 0, 0, &err);
  CHECK(l != NULL);
  pc_GrpcListener_Free(l);

  /* a file that is not a socket stays, and the bind fails */
  FILE *f = fopen(path, "w");
  CHECK(f != NULL);
  if (f) fclose(f);
  CHECK(unix_listener(path, 0, 0, &err) == NULL);
  CHECK(strstr(err.msg, "the file exists and is not a socket") != NULL);
  CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode));
  unlink(path);

  /* an abstract name */
  snprintf(path, sizeof path, "pc_listener_test_%ld", (long)getpid());
  l = unix_listener(path, 1, 0, &err);
  CHECK(l != NULL);
  c = unix_client(path, 1);
  CHECK(c >= 0);
  for (int i = 0; i < 100 && l && pc_GrpcListener_Connections(l) == 0; i++)
    CHECK(pc_Grpc_PumpAll(NULL, 0, &l, 1, NULL, 0, 0.05));
  CHECK(l && pc_GrpcListener_Connections(l) == 1);
  if (c >= 0) close(c);
  pc_GrpcListener_Free(l);
}

int main(void) {
  unix_sockets();
  out_of_descriptors();
  reconnect_at_limit();
  return CHECK_DONE();
}
