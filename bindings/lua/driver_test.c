/* Host I/O drivers from C (protocall.h, protocall_pushdriver), linked as a
 * host links: a protocall_Driver over blocking POSIX sockets with poll(2)
 * timeouts carries pc.grpc's calls to spec/grpc_server.py (python3-grpcio,
 * started here), a connect it fails is the calls' UNAVAILABLE message,
 * the transport's close closes its socket, 'release' comes once the state
 * is closed, and a struct too small or without a required function is
 * refused. */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* MSG_NOSIGNAL */

#include "testing/check.h"
#include "protocall.h"

#include <lauxlib.h>
#include <lualib.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

typedef struct {
  int connects, closes, releases, timeouts_set;
  int tls_asked; /* connects with o->tls set: none, TLS runs in protocall over the bytes */
} Counts;

typedef struct {
  int fd;
  double send_timeout, read_timeout;
} Sock;

static int wait_fd(int fd, short ev, double seconds) {
  struct pollfd p = {fd, ev, 0};
  return poll(&p, 1, (int)(seconds * 1000)) > 0;
}

static int d_connect(void *ud, const char *host, int port, const protocall_DriverConnect *o,
                     void **sock, char *err, size_t errsize) {
  Counts *n = ud;
  n->connects++;
  if (o->tls) n->tls_asked++;
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons((unsigned short)port);
  if (o->tls || inet_pton(AF_INET, host, &a.sin_addr) != 1) {
    snprintf(err, errsize, "this test driver takes IPv4 addresses without TLS");
    return -1;
  }
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
    snprintf(err, errsize, "%s", strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  Sock *s = malloc(sizeof *s);
  if (s == NULL) {
    close(fd);
    snprintf(err, errsize, "out of memory");
    return -1;
  }
  s->fd = fd;
  s->send_timeout = s->read_timeout = 1;
  *sock = s;
  return 0;
}

static long d_send(void *ud, void *sock, const char *bytes, size_t len, char *err, size_t errsize) {
  (void)ud;
  Sock *s = sock;
  if (!wait_fd(s->fd, POLLOUT, s->send_timeout)) return 0;
  ssize_t w = send(s->fd, bytes, len, MSG_NOSIGNAL);
  if (w < 0) {
    snprintf(err, errsize, "%s", strerror(errno));
    return -1;
  }
  return (long)w;
}

static long d_receive(void *ud, void *sock, char *buf, size_t max, char *err, size_t errsize) {
  (void)ud;
  Sock *s = sock;
  if (!wait_fd(s->fd, POLLIN, s->read_timeout)) return 0;
  ssize_t r = recv(s->fd, buf, max, 0);
  if (r == 0) return -1;
  if (r < 0) {
    snprintf(err, errsize, "%s", strerror(errno));
    return -2;
  }
  return (long)r;
}

static void d_timeouts(void *ud, void *sock, double connect, double send, double read) {
  (void)connect;
  ((Counts *)ud)->timeouts_set++;
  ((Sock *)sock)->send_timeout = send;
  ((Sock *)sock)->read_timeout = read;
}

static void d_close(void *ud, void *sock) {
  ((Counts *)ud)->closes++;
  close(((Sock *)sock)->fd);
  free(sock);
}

static void d_release(void *ud) {
  ((Counts *)ud)->releases++;
}

/* spec/grpc_server.py grpc on a free port: its port, and the pipe to its
 * standard input (closing it stops the server). */
static FILE *start_server(int *port) {
  char out[] = "/tmp/pc_driver_test_XXXXXX";
  int fd = mkstemp(out);
  if (fd < 0) return NULL;
  close(fd);
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "exec /usr/bin/python3 %s/spec/grpc_server.py grpc 0 > %s 2>/dev/null",
           PC_SOURCE_DIR, out);
  FILE *pipe = popen(cmd, "w");
  *port = 0;
  for (int i = 0; pipe && i < 200 && *port == 0; i++) {
    FILE *f = fopen(out, "r");
    if (f) {
      if (fscanf(f, "%d", port) != 1) *port = 0;
      fclose(f);
    }
    if (*port == 0) usleep(50000);
  }
  remove(out);
  return pipe;
}

static lua_State *new_state(void) {
  lua_State *L = luaL_newstate();
  luaL_openlibs(L);
  luaL_requiref(L, "protocall", luaopen_protocall, 0);
  lua_setglobal(L, "pc");
  return L;
}

static int run(lua_State *L, const char *code) {
  if (luaL_dostring(L, code) != LUA_OK) {
    fprintf(stderr, "lua: %s\n", luaL_tolstring(L, -1, NULL));
    lua_pop(L, 2);
    return 0;
  }
  return 1;
}

static protocall_Driver posix_driver(Counts *n) {
  protocall_Driver d;
  memset(&d, 0, sizeof d);
  d.size = sizeof d;
  d.ud = n;
  d.release = d_release;
  d.connect = d_connect;
  d.send = d_send;
  d.receive = d_receive;
  d.close = d_close;
  d.settimeouts = d_timeouts;
  return d;
}

static void calls(int port) {
  Counts n = {0, 0, 0, 0, 0};
  lua_State *L = new_state();
  protocall_Driver d = posix_driver(&n);
  protocall_pushdriver(L, &d);
  lua_setglobal(L, "driver");
  lua_pushinteger(L, port);
  lua_setglobal(L, "port");
  CHECK(run(
      L, "local t = pc.grpc('http://127.0.0.1:' .. port, {driver = driver})\n"
         "assert(t:unary('/test.Test/Echo', 'hello', {timeout = 5}) == 'hello')\n"
         "local big = ('x'):rep(300000)\n"
         "assert(t:unary('/test.Test/Echo', big, {timeout = 5}) == big)\n"
         "local n = 0\n"
         "for _ in t:server_stream('/test.Test/Stream', '20', {timeout = 5}) do n = n + 1 end\n"
         "assert(n == 20, n)\n"
         "t:close()\n"
         "local r = pc.grpc('http://127.0.0.1:1', {driver = driver})\n"
         "local ok, err = pcall(r.unary, r, '/test.Test/Echo', 'x', {timeout = 5})\n"
         "assert(not ok and err.code == 'UNAVAILABLE', tostring(err))\n"
         "assert(err.message == 'connect to 127.0.0.1:1: Connection refused', err.message)\n"
         "local s = pc.grpc('https://127.0.0.1:' .. port, {driver = driver})\n"
         "ok, err = pcall(s.unary, s, '/test.Test/Echo', 'x', {timeout = 5})\n"
         "assert(err.message:find('TLS handshake with 127.0.0.1:', 1, true) == 1, err.message)\n"));
  CHECK(n.connects == 3);
  CHECK(n.tls_asked == 0); /* the https connection is plain to the driver; its TLS failed here */
  CHECK(n.closes == 1);    /* the one connection made; t:close closed it */
  CHECK(n.timeouts_set > 0);
  CHECK(n.releases == 0);
  lua_close(L);
  CHECK(n.releases == 1);
}

static int push(lua_State *L) {
  protocall_pushdriver(L, lua_touserdata(L, 1));
  return 1;
}

/* The error protocall_pushdriver raised for 'd', or NULL when it took it. */
static const char *refusal(lua_State *L, const protocall_Driver *d, char *buf, size_t n) {
  lua_pushcfunction(L, push);
  lua_pushlightuserdata(L, (void *)d);
  if (lua_pcall(L, 1, 1, 0) == LUA_OK) {
    lua_pop(L, 1);
    return NULL;
  }
  snprintf(buf, n, "%s", lua_tostring(L, -1));
  lua_pop(L, 1);
  return buf;
}

static void refused(void) {
  Counts n = {0, 0, 0, 0, 0};
  lua_State *L = new_state();
  char buf[256];
  protocall_Driver d = posix_driver(&n);
  d.size = 8;
  const char *e = refusal(L, &d, buf, sizeof buf);
  CHECK(e != NULL && strstr(e, "protocall_pushdriver: size 8 is below the fields up to 'close'"));
  d = posix_driver(&n);
  d.receive = NULL;
  e = refusal(L, &d, buf, sizeof buf);
  CHECK(e != NULL && strstr(e, "connect, send, receive and close are required"));
  /* a host compiled without settimeouts and sslhandshake */
  d = posix_driver(&n);
  d.size = offsetof(protocall_Driver, settimeouts);
  CHECK(refusal(L, &d, buf, sizeof buf) == NULL);
  lua_close(L);
  CHECK(n.releases == 1);
}

int main(void) {
  refused();
  int port = 0;
  FILE *server = start_server(&port);
  CHECK(server != NULL && port > 0);
  if (server != NULL && port > 0) calls(port);
  if (server != NULL) pclose(server);
  return CHECK_DONE();
}
