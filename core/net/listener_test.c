/* The listener out of file descriptors: accept fails with EMFILE while a
 * connection waits in the backlog, so the listening socket stays readable;
 * it then sits out a pause (left out of the poll set, the poll timeout
 * lowered to the pause's end) instead of being polled again at once, which
 * spun. Once descriptors are free, the waiting connection is accepted. */
#define _POSIX_C_SOURCE 200809L
#include "testing/check.h"
#include "net/listener.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_TAKEN 256

int main(void) {
  pc_Error err;
  pc_Error_Init(&err);
  pc_GrpcListenerOptions o;
  memset(&o, 0, sizeof o);
  o.host = "127.0.0.1";
  o.port = "0";
  pc_GrpcListener *l = pc_GrpcListener_New(&o, NULL, NULL, &err);
  CHECK(l != NULL);
  if (l == NULL) return CHECK_DONE();

  /* a client whose connection the kernel completes into the backlog */
  int c = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons((unsigned short)pc_GrpcListener_Port(l));
  CHECK(c >= 0 && connect(c, (struct sockaddr *)&a, sizeof a) == 0);

  struct pollfd fds[4];
  double timeout = 10;
  CHECK(pc_Grpc_PollFds(NULL, 0, &l, 1, fds, 4, &timeout) == 1); /* the listening socket */

  /* every descriptor taken, under a limit lowered for the test */
  struct rlimit old, low;
  CHECK(getrlimit(RLIMIT_NOFILE, &old) == 0);
  low = old;
  if (low.rlim_cur > 64) low.rlim_cur = 64;
  CHECK(setrlimit(RLIMIT_NOFILE, &low) == 0);
  int taken[MAX_TAKEN], n = 0, fd = 0;
  while (n < MAX_TAKEN && (fd = dup(c)) >= 0) taken[n++] = fd;
  CHECK(fd < 0 && errno == EMFILE);

  CHECK(pc_Grpc_PumpAll(NULL, 0, &l, 1, 1.0)); /* readable: accept fails with EMFILE */
  CHECK(pc_GrpcListener_Connections(l) == 0);
  timeout = 10;
  CHECK(pc_Grpc_PollFds(NULL, 0, &l, 1, fds, 4, &timeout) == 0); /* left out */
  CHECK(timeout > 0 && timeout <= 0.1);

  for (int i = 0; i < n; i++) close(taken[i]);
  CHECK(setrlimit(RLIMIT_NOFILE, &old) == 0);
  for (int i = 0; i < 100 && pc_GrpcListener_Connections(l) == 0; i++)
    CHECK(pc_Grpc_PumpAll(NULL, 0, &l, 1, 0.05));
  CHECK(pc_GrpcListener_Connections(l) == 1); /* accepted after the pause */
  timeout = 10;
  CHECK(pc_Grpc_PollFds(NULL, 0, &l, 1, fds, 4, &timeout) ==
        2); /* listening again, and the connection */

  close(c);
  pc_GrpcListener_Free(l);
  return CHECK_DONE();
}
