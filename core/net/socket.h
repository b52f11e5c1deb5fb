/* The built-in I/O driver: one non-blocking TCP connection, optionally
 * TLS (OpenSSL with memory BIOs, so every byte goes through send/recv with
 * MSG_NOSIGNAL), for channel.c to poll(2) on.
 *
 * Resolution is getaddrinfo (IPv4 and IPv6, tried in its order; it is the
 * one step that blocks). TLS verifies the server against the system CA
 * store or 'ca_file', checks the host name (or IP address) against
 * 'server_name' (default: the host), offers ALPN "h2" and refuses a server
 * that does not pick it; 'cert_file' / 'key_file' give a client
 * certificate for mutual TLS. */
#ifndef PC_NET_SOCKET_H
#define PC_NET_SOCKET_H

#include "base/arena.h"
#include "base/error.h"

#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>

typedef struct pc_NetSocket pc_NetSocket;
typedef struct pc_NetTlsClient pc_NetTlsClient;

typedef struct {
  const char *host; /* name or address; brackets of "[::1]" already removed */
  const char *port; /* decimal */
  int tls;
  const char *ca_file;     /* PEM bundle; NULL: the system store */
  const char *cert_file;   /* PEM client certificate chain; NULL: none */
  const char *key_file;    /* PEM key of cert_file */
  const char *server_name; /* name to verify and send as SNI; NULL: host */
  /* Non-zero: TLS WITHOUT verifying the server at all (no CA check, no
   * host name check: anyone on the path can read and change the calls).
   * For tests against self-signed servers only (protocall call -insecure);
   * 'ca_file' is then not read. */
  int insecure;
  /* Non-NULL: a Unix-domain socket instead of host and port: the file
   * 'unix_path', or with 'unix_abstract' the name in Linux's abstract
   * namespace (no file). TLS then verifies and sends 'server_name', else
   * "localhost". */
  const char *unix_path;
  int unix_abstract;
  /* With 'tls': the TLS setup shared by the connections to one target
   * (pc_NetTlsClient_New of these same options): its trust store and
   * client certificate are loaded once, and the session of the last
   * handshake is offered again (resumption). NULL: a setup of the
   * socket's own, from the files above. */
  pc_NetTlsClient *tls_client;
  /* Non-zero: TLS offers ALPN "http/1.1" instead of "h2" (gRPC-Web and
   * Connect over HTTP/1.1) and takes a server that selects none. */
  int http1;
} pc_NetOptions;

/* The client side of TLS for one target: an OpenSSL context with the
 * trust store ('ca_file' or the system's, none with 'insecure'), the
 * client certificate, ALPN h2, and a session cache of one entry: the
 * session the server last gave (a TLS 1.3 ticket or a TLS 1.2 session),
 * which each new connection offers. NULL with 'err' set when a file does
 * not load. Counted: each socket made with it holds it until closed. */
pc_NetTlsClient *pc_NetTlsClient_New(const pc_NetOptions *o, pc_Error *err);
void pc_NetTlsClient_Free(pc_NetTlsClient *t);

/* 1 when this process can set TLS up at all; 0 with 'err' set ("TLS is not
 * available: ...") when it never can while it runs: in the Lua module,
 * protocall_tls.so missing beside it or from another build. Always 1 where
 * tls.c is linked in. A setup failing otherwise (a file that does not
 * load, memory) may succeed later; this one may not. */
int pc_NetTls_Available(pc_Error *err);

/* The address of a Unix-domain socket (pc_NetOptions.unix_path): 1, or 0
 * with 'err' set when 'path' is empty or longer than sun_path holds (107
 * bytes for a file, 106 for an abstract name). */
int pc_Net_UnixAddress(const char *path, int abstract, struct sockaddr_un *sa, socklen_t *len,
                       pc_Error *err);

/* Resolves the host and starts connecting (non-blocking). Returns NULL with
 * 'err' set when the name does not resolve, TLS cannot be set up (a CA,
 * certificate or key file that does not load) or on allocation failure. */
pc_NetSocket *pc_NetSocket_Connect(const pc_NetOptions *opts, pc_Alloc *alloc, void *ud,
                                   pc_Error *err);

/* Advances connecting and the TLS handshake: 1 once ready for data, 0
 * while in progress, -1 on failure (pc_NetSocket_Error says why). */
int pc_NetSocket_Progress(pc_NetSocket *s);

/* The descriptor to poll, and the poll(2) events to wait for: what the
 * connection or handshake waits for, POLLIN when ready, plus POLLOUT when
 * 'want_write' or encrypted bytes are still to be sent. */
int pc_NetSocket_Fd(const pc_NetSocket *s);
short pc_NetSocket_Events(const pc_NetSocket *s, int want_write);

/* Reads up to 'n' bytes: the count (> 0), 0 when nothing is available now,
 * -1 at the end of the connection or on an error (pc_NetSocket_Error). */
long pc_NetSocket_Read(pc_NetSocket *s, void *buf, size_t n);

/* Writes up to 'n' bytes: the count taken (0 when the socket is full), -1
 * on an error. */
long pc_NetSocket_Write(pc_NetSocket *s, const void *buf, size_t n);

/* A close that lets the peer read what was sent: closing a TCP socket
 * whose input is unread makes the kernel reset the connection, and the
 * peer then loses what had reached it but it had not read yet (a GOAWAY,
 * RFC 9113 section 6.8, the last thing a server sends). Sends what TLS
 * still holds, with TLS's close_notify, then ends the sending side
 * (shutdown SHUT_WR) and reads and drops what arrives until the peer
 * closes, at most 64 KiB a call. Returns 1 when done (the peer closed, an
 * error, a socket that is not ready or is the host's), 0 to be called
 * again when pc_NetSocket_Events says (POLLOUT while TLS bytes wait,
 * POLLIN after). The caller bounds how long it waits, then calls
 * pc_NetSocket_Close. */
int pc_NetSocket_Linger(pc_NetSocket *s);

/* Why the last call failed, e.g. "connect to 127.0.0.1:1: Connection
 * refused". */
const char *pc_NetSocket_Error(const pc_NetSocket *s);

/* -- the serving side (listener.h) -- */

/* The TLS setup a listener shares between its connections: the server
 * certificate chain and key (PEM), and with 'client_ca_file' (PEM bundle)
 * a client certificate required and verified against it (mutual TLS).
 * ALPN picks "h2" when offered, else "http/1.1" (the listener tells them
 * apart by the first bytes). NULL with 'err' set when a file does not load. */
typedef struct pc_NetTlsServer pc_NetTlsServer;
pc_NetTlsServer *pc_NetTlsServer_New(const char *cert_file, const char *key_file,
                                     const char *client_ca_file, pc_Error *err);
void pc_NetTlsServer_Free(pc_NetTlsServer *t);

/* Takes an accepted descriptor 'fd' (made non-blocking here; closed on
 * failure) from the peer 'where' ("host:port", for messages): ready at
 * once without TLS ('tls' NULL), else pc_NetSocket_Progress runs the
 * server side of the handshake. NULL with 'err' set on allocation
 * failure. */
pc_NetSocket *pc_NetSocket_Adopt(int fd, const char *where, pc_NetTlsServer *tls, pc_Alloc *alloc,
                                 void *ud, pc_Error *err);

/* A connection whose bytes a host-supplied driver moves (channel.h, host
 * I/O): no descriptor (pc_NetSocket_Fd is -1, which poll(2) skips, and
 * pc_NetSocket_Events 0). Without TLS ('o' NULL or 'o->tls' 0) Read and
 * Write take nothing (0: the host moves the plain bytes itself) and
 * pc_NetSocket_Progress reports what pc_NetSocket_SetHosted said: 0 until
 * then. With 'o->tls' the TLS session runs here, over memory, as for a
 * built-in socket (the same options, verification, ALPN h2, client
 * certificate, resumption): the host carries ciphertext only, taking it
 * with pc_NetSocket_HostedOutput and giving what it received to
 * pc_NetSocket_HostedInput; Progress runs the handshake once the host
 * connected, and Read and Write carry the plain bytes. NULL with 'err' set
 * on allocation failure or, with TLS, a file that does not load. */
pc_NetSocket *pc_NetSocket_NewHosted(const pc_NetOptions *o, pc_Alloc *alloc, void *ud,
                                     pc_Error *err);

/* The host's driver connected 's': 'ready' 1 (ready for data, or with TLS
 * for the handshake); or the connection failed or was lost: 'ready' 0
 * and 'why' (e.g. "connect to host:443: timeout"), after which Progress,
 * Read and Write return -1 and pc_NetSocket_Error gives 'why'. No effect
 * on a built-in socket or one already failed. */
void pc_NetSocket_SetHosted(pc_NetSocket *s, int ready, const char *why);

/* 1 when 's' is hosted and runs TLS itself (its host moves ciphertext). */
int pc_NetSocket_HostedTls(const pc_NetSocket *s);

/* A hosted TLS socket's ciphertext for the host to send: '*data' points at
 * it (valid until the next call on 's'), 0 when there is none; the host
 * reports what it sent with pc_NetSocket_HostedWrote (the rest comes
 * again). */
size_t pc_NetSocket_HostedOutput(pc_NetSocket *s, const char **data);
void pc_NetSocket_HostedWrote(pc_NetSocket *s, size_t n);

/* Ciphertext the host received for a hosted TLS socket (read with
 * Progress and Read). 0 when out of memory. */
int pc_NetSocket_HostedInput(pc_NetSocket *s, const void *data, size_t len);

/* 1 when the TLS handshake of 's' resumed an earlier session (the server
 * took the session its pc_NetTlsClient offered). */
int pc_NetSocket_Resumed(const pc_NetSocket *s);

/* Closes the connection and frees 's'. NULL is allowed. */
void pc_NetSocket_Close(pc_NetSocket *s);

#endif
