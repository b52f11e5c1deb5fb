/* The built-in I/O driver (see socket.h). */
#define _POSIX_C_SOURCE 200809L
#define _DEFAULT_SOURCE /* NI_MAXHOST, MSG_NOSIGNAL */

#include "net/socket.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define TLS_CHUNK ((size_t)16384)

enum { kConnecting, kHandshake, kReady, kFailed };

struct pc_NetSocket {
  pc_Alloc *alloc;
  void *ud;
  int fd;
  int state;
  struct addrinfo *list, *next_ai;
  SSL_CTX *ctx;
  SSL *ssl;
  BIO *rbio, *wbio; /* owned by ssl */
  char out[TLS_CHUNK];
  size_t out_len, out_pos; /* encrypted bytes taken from wbio, not yet sent */
  char where[300];         /* "host:port" */
  char err[PC_ERROR_MAX];
  int has_cert; /* a client certificate is configured */
  int got_data; /* application data arrived over TLS */
  int hosted;   /* pc_NetSocket_NewHosted: no descriptor, the host moves the bytes */
  int linger;   /* pc_NetSocket_Linger: 1 sending what is left, 2 reading to the end */
};

static void set_err(pc_NetSocket *s, const char *what, const char *why) {
  snprintf(s->err, sizeof s->err, "%.40s %.300s: %.160s", what, s->where, why);
}

static void tls_err(pc_NetSocket *s, const char *what) {
  unsigned long e = ERR_get_error();
  char text[256] = "";
  if (e) ERR_error_string_n(e, text, sizeof text);
  long v = s->ssl ? SSL_get_verify_result(s->ssl) : X509_V_OK;
  if (v != X509_V_OK) {
    char both[160];
    snprintf(both, sizeof both, "certificate verify failed: %.120s",
             X509_verify_cert_error_string(v));
    set_err(s, what, both);
  } else {
    set_err(s, what, text[0] ? text : "connection closed during the TLS handshake");
  }
  ERR_clear_error();
}

/* Starts a non-blocking connect to the next address; 0 when none is left. */
static int start_next(pc_NetSocket *s) {
  while (s->next_ai) {
    struct addrinfo *ai = s->next_ai;
    s->next_ai = ai->ai_next;
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      set_err(s, "connect to", strerror(errno));
      continue;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 || errno == EINPROGRESS) {
      s->fd = fd;
      return 1;
    }
    set_err(s, "connect to", strerror(errno));
    close(fd);
  }
  return 0;
}

static int setup_tls(pc_NetSocket *s, const pc_NetOptions *o, const char *name, pc_Error *err) {
  s->ctx = SSL_CTX_new(TLS_client_method());
  if (s->ctx == NULL) goto fail;
  SSL_CTX_set_min_proto_version(s->ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(s->ctx, o->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
  if (o->insecure) {
    /* no trust store: nothing is verified (socket.h) */
  } else if (o->ca_file) {
    if (SSL_CTX_load_verify_locations(s->ctx, o->ca_file, NULL) != 1) {
      pc_Error_Set(err, "ca_file '%.200s': not a PEM certificate bundle", o->ca_file);
      return 0;
    }
  } else if (SSL_CTX_set_default_verify_paths(s->ctx) != 1) {
    goto fail;
  }
  if (o->cert_file) {
    s->has_cert = 1;
    if (SSL_CTX_use_certificate_chain_file(s->ctx, o->cert_file) != 1) {
      pc_Error_Set(err, "cert_file '%.200s': not a PEM certificate", o->cert_file);
      return 0;
    }
    const char *key = o->key_file ? o->key_file : o->cert_file;
    if (SSL_CTX_use_PrivateKey_file(s->ctx, key, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(s->ctx) != 1) {
      pc_Error_Set(err, "key_file '%.200s': not the PEM key of cert_file", key);
      return 0;
    }
  }
  static const unsigned char alpn[] = {2, 'h', '2'};
  if (SSL_CTX_set_alpn_protos(s->ctx, alpn, sizeof alpn) != 0) goto fail;
  s->ssl = SSL_new(s->ctx);
  if (s->ssl == NULL) goto fail;
  s->rbio = BIO_new(BIO_s_mem());
  s->wbio = BIO_new(BIO_s_mem());
  if (s->rbio == NULL || s->wbio == NULL) {
    BIO_free(s->rbio);
    BIO_free(s->wbio);
    goto fail;
  }
  SSL_set_bio(s->ssl, s->rbio, s->wbio);
  SSL_set_connect_state(s->ssl);
  unsigned char addr[16];
  int is_ip = inet_pton(AF_INET, name, addr) == 1 || inet_pton(AF_INET6, name, addr) == 1;
  X509_VERIFY_PARAM *param = SSL_get0_param(s->ssl);
  if (o->insecure) {
    if (!is_ip && SSL_set_tlsext_host_name(s->ssl, name) != 1) goto fail; /* SNI only */
  } else if (is_ip) {
    if (X509_VERIFY_PARAM_set1_ip_asc(param, name) != 1) goto fail;
  } else {
    if (SSL_set_tlsext_host_name(s->ssl, name) != 1 || SSL_set1_host(s->ssl, name) != 1) goto fail;
  }
  return 1;
fail:
  ERR_clear_error();
  pc_Error_Set(err, "cannot set up TLS (OpenSSL)");
  return 0;
}

pc_NetSocket *pc_NetSocket_Connect(const pc_NetOptions *o, pc_Alloc *alloc, void *ud,
                                   pc_Error *err) {
  if (alloc == NULL) alloc = pc_DefaultAlloc;
  pc_NetSocket *s = alloc(ud, NULL, 0, sizeof *s);
  if (s == NULL) {
    pc_Error_Set(err, "out of memory");
    return NULL;
  }
  memset(s, 0, sizeof *s);
  s->alloc = alloc;
  s->ud = ud;
  s->fd = -1;
  snprintf(s->where, sizeof s->where, strchr(o->host, ':') ? "[%.250s]:%s" : "%.250s:%s", o->host,
           o->port);
  if (o->tls &&
      !setup_tls(s, o, o->server_name && o->server_name[0] ? o->server_name : o->host, err)) {
    pc_NetSocket_Close(s);
    return NULL;
  }
  struct addrinfo hints;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  int r = getaddrinfo(o->host, o->port, &hints, &s->list);
  if (r != 0) {
    pc_Error_Set(err, "resolve %s: %s", s->where, gai_strerror(r));
    s->list = NULL;
    pc_NetSocket_Close(s);
    return NULL;
  }
  s->next_ai = s->list;
  s->state = kConnecting;
  if (!start_next(s)) s->state = kFailed;
  return s;
}

/* Sends encrypted bytes waiting in the write BIO: 1 when all went, 0
 * when the socket is full, -1 on an error. */
static int flush_tls(pc_NetSocket *s) {
  for (;;) {
    if (s->out_pos == s->out_len) {
      s->out_pos = s->out_len = 0;
      if (BIO_ctrl_pending(s->wbio) == 0) return 1;
      int n = BIO_read(s->wbio, s->out, (int)sizeof s->out);
      if (n <= 0) return 1;
      s->out_len = (size_t)n;
    }
    ssize_t w = send(s->fd, s->out + s->out_pos, s->out_len - s->out_pos, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
      set_err(s, "send to", strerror(errno));
      return -1;
    }
    s->out_pos += (size_t)w;
  }
}

/* Moves received bytes into the read BIO: > 0 bytes moved, 0 nothing now,
 * -1 at the end or on an error. */
static long feed_tls(pc_NetSocket *s) {
  char buf[TLS_CHUNK];
  ssize_t n = recv(s->fd, buf, sizeof buf, 0);
  if (n > 0) {
    BIO_write(s->rbio, buf, (int)n);
    return (long)n;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
  if (n == 0)
    set_err(s, "read from", "connection closed by the peer");
  else
    set_err(s, "read from", strerror(errno));
  return -1;
}

static int handshake(pc_NetSocket *s) {
  for (;;) {
    ERR_clear_error();
    int r = SSL_do_handshake(s->ssl);
    if (flush_tls(s) < 0) return -1;
    if (r == 1) break;
    int e = SSL_get_error(s->ssl, r);
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
      tls_err(s, "TLS handshake with");
      return -1;
    }
    long f = feed_tls(s);
    if (f == 0) return 0;
    if (f < 0) {
      set_err(s, "TLS handshake with", "connection closed (is it a TLS port?)");
      return -1;
    }
  }
  const unsigned char *p = NULL;
  unsigned int n = 0;
  SSL_get0_alpn_selected(s->ssl, &p, &n);
  if (SSL_is_server(s->ssl)) return 1; /* it picked h2 or http/1.1 (select_h2) */
  if (n != 2 || memcmp(p, "h2", 2) != 0) {
    set_err(s, "TLS handshake with", "the server did not accept ALPN h2 (HTTP/2)");
    return -1;
  }
  return 1;
}

int pc_NetSocket_Progress(pc_NetSocket *s) {
  if (s->hosted) return s->state == kFailed ? -1 : s->state == kReady;
  if (s->state == kConnecting) {
    struct pollfd p = {s->fd, POLLOUT, 0};
    if (s->fd < 0) {
      s->state = kFailed;
      return -1;
    }
    if (poll(&p, 1, 0) == 0) return 0;
    int so = 0;
    socklen_t len = sizeof so;
    getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &so, &len);
    if (so != 0) {
      set_err(s, "connect to", strerror(so));
      close(s->fd);
      s->fd = -1;
      if (!start_next(s)) {
        s->state = kFailed;
        return -1;
      }
      return 0;
    }
    s->state = s->ssl ? kHandshake : kReady;
  }
  if (s->state == kHandshake) {
    int r = handshake(s);
    if (r < 0) s->state = kFailed;
    if (r > 0) s->state = kReady;
  }
  if (s->state == kFailed) return -1;
  return s->state == kReady;
}

int pc_NetSocket_Fd(const pc_NetSocket *s) {
  return s->fd;
}

short pc_NetSocket_Events(const pc_NetSocket *s, int want_write) {
  if (s->hosted) return 0;
  if (s->state == kConnecting) return POLLOUT;
  if (s->linger) return s->linger == 1 ? POLLOUT : POLLIN;
  short ev = POLLIN;
  if (want_write || s->out_pos < s->out_len || (s->wbio && BIO_ctrl_pending(s->wbio) > 0))
    ev |= POLLOUT;
  return ev;
}

long pc_NetSocket_Read(pc_NetSocket *s, void *buf, size_t n) {
  if (s->state != kReady || s->hosted) return s->state == kFailed ? -1 : 0;
  if (s->ssl == NULL) {
    ssize_t r = recv(s->fd, buf, n, 0);
    if (r > 0) return (long)r;
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    set_err(s, "read from", r == 0 ? "connection closed by the peer" : strerror(errno));
    s->state = kFailed;
    return -1;
  }
  for (;;) {
    ERR_clear_error();
    int r = SSL_read(s->ssl, buf, n > 0x7fffffff ? 0x7fffffff : (int)n);
    if (flush_tls(s) < 0) {
      s->state = kFailed;
      return -1;
    }
    if (r > 0) {
      s->got_data = 1;
      return r;
    }
    int e = SSL_get_error(s->ssl, r);
    if (e == SSL_ERROR_ZERO_RETURN) {
      set_err(s, "read from", "connection closed by the peer (TLS close_notify)");
      s->state = kFailed;
      return -1;
    }
    if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE) {
      tls_err(s, "TLS read from");
      s->state = kFailed;
      return -1;
    }
    long f = feed_tls(s);
    if (f == 0) return 0;
    if (f < 0) {
      /* A TLS 1.3 server that requires a client certificate checks it
       * after the client's handshake is done, and some (gRPC's) then just
       * close the connection, with no alert to report. */
      if (!s->got_data && !s->has_cert)
        set_err(s, "read from",
                "connection closed by the peer right after the TLS handshake (does the server "
                "require a client certificate? cert_file, key_file)");
      s->state = kFailed;
      return -1;
    }
  }
}

long pc_NetSocket_Write(pc_NetSocket *s, const void *buf, size_t n) {
  if (s->state != kReady || s->hosted) return s->state == kFailed ? -1 : 0;
  if (s->ssl == NULL) {
    ssize_t w = send(s->fd, buf, n, MSG_NOSIGNAL);
    if (w >= 0) return (long)w;
    if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
    set_err(s, "send to", strerror(errno));
    s->state = kFailed;
    return -1;
  }
  int f = flush_tls(s);
  if (f <= 0) {
    if (f < 0) s->state = kFailed;
    return f;
  }
  if (n > TLS_CHUNK * 4) n = TLS_CHUNK * 4;
  ERR_clear_error();
  int r = SSL_write(s->ssl, buf, (int)n);
  if (r <= 0) {
    tls_err(s, "TLS write to");
    s->state = kFailed;
    return -1;
  }
  if (flush_tls(s) < 0) {
    s->state = kFailed;
    return -1;
  }
  return r;
}

const char *pc_NetSocket_Error(const pc_NetSocket *s) {
  return s->err[0] ? s->err : "connection failed";
}

int pc_NetSocket_Linger(pc_NetSocket *s) {
  if (s->hosted || s->fd < 0 || s->state != kReady) return 1;
  if (s->linger == 0) {
    s->linger = 1;
    if (s->ssl) {
      ERR_clear_error();
      (void)SSL_shutdown(s->ssl); /* close_notify into the write BIO (the peer's is not awaited) */
    }
  }
  if (s->linger == 1) {
    int f = s->ssl ? flush_tls(s) : 1;
    if (f == 0) return 0;
    if (f < 0 || shutdown(s->fd, SHUT_WR) != 0) return 1;
    s->linger = 2;
  }
  char buf[4096];
  for (int i = 0; i < 16; i++) {
    ssize_t n = recv(s->fd, buf, sizeof buf, 0);
    if (n > 0) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return 0;
    return 1; /* the peer's end, or an error */
  }
  return 0;
}

void pc_NetSocket_Close(pc_NetSocket *s) {
  if (s == NULL) return;
  if (s->ssl) SSL_free(s->ssl);
  if (s->ctx) SSL_CTX_free(s->ctx);
  if (s->fd >= 0) close(s->fd);
  if (s->list) freeaddrinfo(s->list);
  s->alloc(s->ud, s, sizeof *s, 0);
}

/* -- the serving side ------------------------------------------------------ */

struct pc_NetTlsServer {
  SSL_CTX *ctx;
};

/* ALPN: h2 when the client offers it, else http/1.1 (gRPC-Web and Connect
 * over HTTP/1.1, listener.h), else the handshake fails. */
static int select_h2(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                     const unsigned char *in, unsigned int inlen, void *arg) {
  (void)ssl;
  (void)arg;
  const unsigned char *h1 = NULL;
  for (unsigned int i = 0; i < inlen;) {
    unsigned int n = in[i];
    if (i + 1 + n > inlen) break;
    if (n == 2 && memcmp(in + i + 1, "h2", 2) == 0) {
      *out = in + i + 1;
      *outlen = 2;
      return SSL_TLSEXT_ERR_OK;
    }
    if (n == 8 && memcmp(in + i + 1, "http/1.1", 8) == 0) h1 = in + i + 1;
    i += 1 + n;
  }
  if (h1) {
    *out = h1;
    *outlen = 8;
    return SSL_TLSEXT_ERR_OK;
  }
  return SSL_TLSEXT_ERR_ALERT_FATAL;
}

pc_NetTlsServer *pc_NetTlsServer_New(const char *cert_file, const char *key_file,
                                     const char *client_ca_file, pc_Error *err) {
  pc_NetTlsServer *t = OPENSSL_zalloc(sizeof *t);
  if (t == NULL) goto fail;
  t->ctx = SSL_CTX_new(TLS_server_method());
  if (t->ctx == NULL) goto fail;
  SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
  if (SSL_CTX_use_certificate_chain_file(t->ctx, cert_file) != 1) {
    pc_Error_Set(err, "cert_file '%.200s': not a PEM certificate", cert_file);
    goto bad;
  }
  const char *key = key_file ? key_file : cert_file;
  if (SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(t->ctx) != 1) {
    pc_Error_Set(err, "key_file '%.200s': not the PEM key of cert_file", key);
    goto bad;
  }
  if (client_ca_file) {
    if (SSL_CTX_load_verify_locations(t->ctx, client_ca_file, NULL) != 1) {
      pc_Error_Set(err, "client_ca_file '%.200s': not a PEM certificate bundle", client_ca_file);
      goto bad;
    }
    SSL_CTX_set_verify(t->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
  }
  SSL_CTX_set_alpn_select_cb(t->ctx, select_h2, NULL);
  return t;
fail:
  pc_Error_Set(err, "cannot set up TLS (OpenSSL)");
bad:
  ERR_clear_error();
  pc_NetTlsServer_Free(t);
  return NULL;
}

void pc_NetTlsServer_Free(pc_NetTlsServer *t) {
  if (t == NULL) return;
  if (t->ctx) SSL_CTX_free(t->ctx);
  OPENSSL_free(t);
}

pc_NetSocket *pc_NetSocket_Adopt(int fd, const char *where, pc_NetTlsServer *tls, pc_Alloc *alloc,
                                 void *ud, pc_Error *err) {
  if (alloc == NULL) alloc = pc_DefaultAlloc;
  int fl = fcntl(fd, F_GETFL, 0);
  if (fl >= 0) fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  pc_NetSocket *s = alloc(ud, NULL, 0, sizeof *s);
  if (s == NULL) {
    close(fd);
    pc_Error_Set(err, "out of memory");
    return NULL;
  }
  memset(s, 0, sizeof *s);
  s->alloc = alloc;
  s->ud = ud;
  s->fd = fd;
  s->state = kReady;
  snprintf(s->where, sizeof s->where, "%.290s", where);
  if (tls == NULL) return s;
  s->state = kHandshake;
  s->ssl = SSL_new(tls->ctx);
  s->rbio = BIO_new(BIO_s_mem());
  s->wbio = BIO_new(BIO_s_mem());
  if (s->ssl == NULL || s->rbio == NULL || s->wbio == NULL) {
    BIO_free(s->rbio);
    BIO_free(s->wbio);
    SSL_free(s->ssl);
    s->ssl = NULL;
    ERR_clear_error();
    pc_NetSocket_Close(s);
    pc_Error_Set(err, "cannot set up TLS (OpenSSL)");
    return NULL;
  }
  SSL_set_bio(s->ssl, s->rbio, s->wbio);
  SSL_set_accept_state(s->ssl);
  return s;
}

pc_NetSocket *pc_NetSocket_NewHosted(pc_Alloc *alloc, void *ud, pc_Error *err) {
  if (alloc == NULL) alloc = pc_DefaultAlloc;
  pc_NetSocket *s = alloc(ud, NULL, 0, sizeof *s);
  if (s == NULL) {
    pc_Error_Set(err, "out of memory");
    return NULL;
  }
  memset(s, 0, sizeof *s);
  s->alloc = alloc;
  s->ud = ud;
  s->fd = -1;
  s->hosted = 1;
  s->state = kConnecting;
  return s;
}

void pc_NetSocket_SetHosted(pc_NetSocket *s, int ready, const char *why) {
  if (!s->hosted || s->state == kFailed) return;
  if (ready) {
    s->state = kReady;
    return;
  }
  snprintf(s->err, sizeof s->err, "%s", why ? why : "connection failed");
  s->state = kFailed;
}
