/* TLS over memory with OpenSSL (see tls.h): the setups of socket.h and
 * each connection's SSL object with its memory BIOs. */
#define _POSIX_C_SOURCE 200809L

#include "net/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

struct pc_NetTlsClient {
  SSL_CTX *ctx;
  SSL_SESSION *session; /* the last one the server gave; NULL: none */
  int refs;
  int has_cert;
  int http1; /* ALPN http/1.1 (pc_NetOptions) */
};

struct pc_NetTlsServer {
  SSL_CTX *ctx;
};

struct pc_NetTls {
  SSL *ssl;
  BIO *rbio, *wbio; /* owned by ssl; encrypted bytes wait in wbio until sent */
  char *name;       /* a client's name to verify (pc_NetTls_Why); NULL: none kept */
  int named;        /* 'name' is pc_NetOptions.server_name */
};

/* OpenSSL's new-session callback: a copy of the session (a TLS 1.3 ticket
 * arrives after the handshake) is kept for the next connection. A copy:
 * freeing a connection that was not shut down with close_notify (how a
 * connection ends here) marks its own session not resumable. */
static int new_session(SSL *ssl, SSL_SESSION *sess) {
  pc_NetTlsClient *t = SSL_CTX_get_app_data(SSL_get_SSL_CTX(ssl));
  if (t == NULL || !SSL_SESSION_is_resumable(sess)) return 0;
  SSL_SESSION *copy = SSL_SESSION_dup(sess);
  if (copy == NULL) return 0;
  if (t->session) SSL_SESSION_free(t->session);
  t->session = copy;
  return 0; /* the connection's own is not taken */
}

/* Whether the file 'path' of the option 'name' can be read: 0 with the
 * system's reason in 'err' ("cert_file '/x.pem': cannot be read: No such
 * file or directory") when it cannot, so a missing file is not called
 * malformed. */
static int readable(const char *name, const char *path, pc_Error *err) {
  FILE *f = fopen(path, "rb");
  int why = errno;
  if (f != NULL) {
    errno = 0;
    int failed = fgetc(f) == EOF && ferror(f); /* a directory opens, and fails here */
    why = errno;
    fclose(f);
    if (!failed) return 1;
  }
  pc_Error_Set(err, "%s '%.200s': cannot be read: %s", name, path, strerror(why));
  return 0;
}

int pc_NetTls_Available(pc_Error *err) {
  (void)err;
  return 1;
}

pc_NetTlsClient *pc_NetTlsClient_New(const pc_NetOptions *o, pc_Error *err) {
  pc_NetTlsClient *t = OPENSSL_zalloc(sizeof *t);
  if (t == NULL) goto fail;
  t->refs = 1;
  t->ctx = SSL_CTX_new(TLS_client_method());
  if (t->ctx == NULL) goto fail;
  SSL_CTX_set_app_data(t->ctx, t);
  SSL_CTX_set_min_proto_version(t->ctx, TLS1_2_VERSION);
  SSL_CTX_set_verify(t->ctx, o->insecure ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
  if (o->insecure) {
    /* no trust store: nothing is verified (socket.h) */
  } else if (o->ca_file) {
    if (!readable("ca_file", o->ca_file, err)) goto bad;
    if (SSL_CTX_load_verify_locations(t->ctx, o->ca_file, NULL) != 1) {
      pc_Error_Set(err, "ca_file '%.200s': not a PEM certificate bundle", o->ca_file);
      goto bad;
    }
  } else if (SSL_CTX_set_default_verify_paths(t->ctx) != 1) {
    goto fail;
  }
  if (o->cert_file) {
    t->has_cert = 1;
    if (!readable("cert_file", o->cert_file, err)) goto bad;
    if (SSL_CTX_use_certificate_chain_file(t->ctx, o->cert_file) != 1) {
      pc_Error_Set(err, "cert_file '%.200s': not a PEM certificate", o->cert_file);
      goto bad;
    }
    const char *key = o->key_file ? o->key_file : o->cert_file;
    if (!readable("key_file", key, err)) goto bad;
    if (SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM) != 1 ||
        SSL_CTX_check_private_key(t->ctx) != 1) {
      pc_Error_Set(err, "key_file '%.200s': not the PEM key of cert_file", key);
      goto bad;
    }
  }
  static const unsigned char alpn[] = {2, 'h', '2'};
  static const unsigned char alpn1[] = {8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
  t->http1 = o->http1;
  if ((o->http1 ? SSL_CTX_set_alpn_protos(t->ctx, alpn1, sizeof alpn1)
                : SSL_CTX_set_alpn_protos(t->ctx, alpn, sizeof alpn)) != 0)
    goto fail;
  SSL_CTX_set_session_cache_mode(t->ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
  SSL_CTX_sess_set_new_cb(t->ctx, new_session);
  return t;
fail:
  pc_Error_Set(err, "cannot set up TLS (OpenSSL)");
bad:
  ERR_clear_error();
  pc_NetTlsClient_Free(t);
  return NULL;
}

void pc_NetTlsClient_Hold(pc_NetTlsClient *t) {
  t->refs++;
}

int pc_NetTlsClient_HasCert(const pc_NetTlsClient *t) {
  return t->has_cert;
}

void pc_NetTlsClient_Free(pc_NetTlsClient *t) {
  if (t == NULL || --t->refs > 0) return;
  if (t->ctx) {
    SSL_CTX_set_app_data(t->ctx, NULL); /* SSL objects still alive keep the context */
    SSL_CTX_free(t->ctx);
  }
  if (t->session) SSL_SESSION_free(t->session);
  OPENSSL_free(t);
}

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
  if (!readable("cert_file", cert_file, err)) goto bad;
  if (SSL_CTX_use_certificate_chain_file(t->ctx, cert_file) != 1) {
    pc_Error_Set(err, "cert_file '%.200s': not a PEM certificate", cert_file);
    goto bad;
  }
  const char *key = key_file ? key_file : cert_file;
  if (!readable("key_file", key, err)) goto bad;
  if (SSL_CTX_use_PrivateKey_file(t->ctx, key, SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(t->ctx) != 1) {
    pc_Error_Set(err, "key_file '%.200s': not the PEM key of cert_file", key);
    goto bad;
  }
  if (client_ca_file) {
    if (!readable("client_ca_file", client_ca_file, err)) goto bad;
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

/* -- one connection --------------------------------------------------------- */

/* A connection on 'ctx' with its two memory BIOs; NULL when OpenSSL cannot
 * make them. */
static pc_NetTls *new_conn(SSL_CTX *ctx) {
  pc_NetTls *c = OPENSSL_zalloc(sizeof *c);
  if (c == NULL) return NULL;
  c->ssl = SSL_new(ctx);
  c->rbio = BIO_new(BIO_s_mem());
  c->wbio = BIO_new(BIO_s_mem());
  if (c->ssl == NULL || c->rbio == NULL || c->wbio == NULL) {
    BIO_free(c->rbio);
    BIO_free(c->wbio);
    SSL_free(c->ssl);
    OPENSSL_free(c);
    return NULL;
  }
  SSL_set_bio(c->ssl, c->rbio, c->wbio);
  return c;
}

pc_NetTls *pc_NetTls_NewClient(pc_NetTlsClient *t, const char *name, int named, int insecure) {
  pc_NetTls *c = new_conn(t->ctx);
  if (c == NULL) goto fail;
  c->name = OPENSSL_strdup(name);
  if (c->name == NULL) goto fail;
  c->named = named;
  SSL_set_connect_state(c->ssl);
  if (t->session) SSL_set_session(c->ssl, t->session); /* resumption offered */
  unsigned char addr[16];
  int is_ip = inet_pton(AF_INET, name, addr) == 1 || inet_pton(AF_INET6, name, addr) == 1;
  X509_VERIFY_PARAM *param = SSL_get0_param(c->ssl);
  if (insecure) {
    if (!is_ip && SSL_set_tlsext_host_name(c->ssl, name) != 1) goto fail; /* SNI only */
  } else if (is_ip) {
    if (X509_VERIFY_PARAM_set1_ip_asc(param, name) != 1) goto fail;
  } else {
    if (SSL_set_tlsext_host_name(c->ssl, name) != 1 || SSL_set1_host(c->ssl, name) != 1) goto fail;
  }
  return c;
fail:
  ERR_clear_error();
  pc_NetTls_Free(c);
  return NULL;
}

pc_NetTls *pc_NetTls_NewServer(pc_NetTlsServer *t) {
  pc_NetTls *c = new_conn(t->ctx);
  if (c == NULL) {
    ERR_clear_error();
    return NULL;
  }
  SSL_set_accept_state(c->ssl);
  return c;
}

void pc_NetTls_Free(pc_NetTls *c) {
  if (c == NULL) return;
  SSL_free(c->ssl); /* and its BIOs */
  OPENSSL_free(c->name);
  OPENSSL_free(c);
}

/* 0 when the last call on 'c' returned 'r' and waits for more input or
 * for its output to go, -1 on a failure. */
static int wants_io(const pc_NetTls *c, int r) {
  int e = SSL_get_error(c->ssl, r);
  return e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE ? 0 : -1;
}

int pc_NetTls_Handshake(pc_NetTls *c) {
  ERR_clear_error();
  int r = SSL_do_handshake(c->ssl);
  return r == 1 ? 1 : wants_io(c, r);
}

const char *pc_NetTls_AlpnRefused(const pc_NetTls *c) {
  const unsigned char *p = NULL;
  unsigned int n = 0;
  SSL_get0_alpn_selected(c->ssl, &p, &n);
  if (SSL_is_server(c->ssl)) return NULL; /* it picked h2 or http/1.1 (select_h2) */
  const pc_NetTlsClient *t = SSL_CTX_get_app_data(SSL_get_SSL_CTX(c->ssl));
  if (t != NULL && t->http1) {
    if (n == 0 || (n == 8 && memcmp(p, "http/1.1", 8) == 0)) return NULL;
    return "the server did not accept ALPN http/1.1";
  }
  if (n != 2 || memcmp(p, "h2", 2) != 0) return "the server did not accept ALPN h2 (HTTP/2)";
  return NULL;
}

long pc_NetTls_Read(pc_NetTls *c, void *buf, size_t n) {
  ERR_clear_error();
  int r = SSL_read(c->ssl, buf, n > 0x7fffffff ? 0x7fffffff : (int)n);
  if (r > 0) return r;
  if (SSL_get_error(c->ssl, r) == SSL_ERROR_ZERO_RETURN) return -1;
  return wants_io(c, r) == 0 ? 0 : -2;
}

long pc_NetTls_Write(pc_NetTls *c, const void *buf, size_t n) {
  ERR_clear_error();
  int r = SSL_write(c->ssl, buf, n > 0x7fffffff ? 0x7fffffff : (int)n);
  return r > 0 ? r : -1;
}

void pc_NetTls_Shutdown(pc_NetTls *c) {
  ERR_clear_error();
  (void)SSL_shutdown(c->ssl);
}

size_t pc_NetTls_Output(pc_NetTls *c, const char **data) {
  if (data == NULL) return BIO_ctrl_pending(c->wbio);
  char *p = NULL;
  long n = BIO_get_mem_data(c->wbio, &p);
  if (n <= 0 || p == NULL) return 0;
  *data = p;
  return (size_t)n;
}

void pc_NetTls_Sent(pc_NetTls *c, size_t n) {
  char sink[4096];
  while (n > 0) {
    int r = BIO_read(c->wbio, sink, (int)(n < sizeof sink ? n : sizeof sink));
    if (r <= 0) break;
    n -= (size_t)r;
  }
}

int pc_NetTls_Input(pc_NetTls *c, const void *data, size_t len) {
  while (len > 0) {
    int n = BIO_write(c->rbio, data, len > 0x40000000 ? 0x40000000 : (int)len);
    if (n <= 0) return 0;
    data = (const char *)data + n;
    len -= (size_t)n;
  }
  return 1;
}

int pc_NetTls_Resumed(const pc_NetTls *c) {
  return SSL_session_reused(c->ssl);
}

void pc_NetTls_Why(const pc_NetTls *c, char *text, size_t room) {
  unsigned long e = ERR_get_error();
  long v = c ? SSL_get_verify_result(c->ssl) : X509_V_OK;
  if (room > 0) text[0] = '\0';
  if ((v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH) && c->name) {
    /* OpenSSL's own text for these varies by version ("Hostname mismatch");
     * the name whole when a DNS name (253 bytes at most), else cut with "..." */
    int cut = strlen(c->name) > 253;
    snprintf(text, room,
             "certificate verify failed: %s mismatch (checked %s\"%.*s%s\" against the server's "
             "certificate)",
             v == X509_V_ERR_HOSTNAME_MISMATCH ? "hostname" : "IP address",
             c->named ? "server_name " : "", cut ? 250 : 253, c->name, cut ? "..." : "");
  } else if (v != X509_V_OK)
    snprintf(text, room, "certificate verify failed: %.120s", X509_verify_cert_error_string(v));
  else if (e && room > 0)
    ERR_error_string_n(e, text, room);
  ERR_clear_error();
}
