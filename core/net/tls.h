/* TLS over memory (OpenSSL with memory BIOs) for the built-in driver
 * (socket.h): the only file of the core that calls OpenSSL is tls.c, an
 * object of its own, so the Lua module can leave it out and open it on
 * first use (bindings/lua/lpc_lazy.c stands in for every function declared
 * here and for socket.h's pc_NetTlsClient_* / pc_NetTlsServer_*, which
 * tls.c defines). socket.c moves the encrypted bytes between a socket (or a
 * host) and these buffers; the setups (pc_NetTlsClient, pc_NetTlsServer)
 * are socket.h's.
 *
 * A connection's TLS is made from a setup, which only the setups' _New
 * functions make: every function below takes an object one of them made
 * (or made from one), so none is reached before a setup was. */
#ifndef PC_NET_TLS_H
#define PC_NET_TLS_H

#include "net/socket.h"

#include <stddef.h>

typedef struct pc_NetTls pc_NetTls;

/* One more holder of 't' (pc_NetTlsClient_Free drops one). */
void pc_NetTlsClient_Hold(pc_NetTlsClient *t);
/* 1 when 't' has a client certificate (pc_NetOptions.cert_file). */
int pc_NetTlsClient_HasCert(const pc_NetTlsClient *t);

/* The client side of one connection: SNI and the verified name 'name' (a
 * host name, or an IP address checked as one; SNI alone with 'insecure'),
 * 'named' 1 when it is pc_NetOptions.server_name rather than the target's
 * host (pc_NetTls_Why says which), the session 't' last kept offered for
 * resumption. NULL when OpenSSL cannot set it up (memory). */
pc_NetTls *pc_NetTls_NewClient(pc_NetTlsClient *t, const char *name, int named, int insecure);
/* The server side of one accepted connection. NULL when OpenSSL cannot set
 * it up. */
pc_NetTls *pc_NetTls_NewServer(pc_NetTlsServer *t);
void pc_NetTls_Free(pc_NetTls *c);

/* Runs the handshake over what was given with pc_NetTls_Input: 1 done, 0
 * it waits for more input (after sending pc_NetTls_Output), -1 failed
 * (pc_NetTls_Why). Once done, pc_NetTls_AlpnRefused says whether the
 * protocol agreed is one the client asked for. */
int pc_NetTls_Handshake(pc_NetTls *c);
/* NULL when ALPN agreed (a server: always; a client: "h2", or with
 * pc_NetOptions.http1 "http/1.1" or none), else why, e.g. "the server did
 * not accept ALPN h2 (HTTP/2)". */
const char *pc_NetTls_AlpnRefused(const pc_NetTls *c);

/* Decrypts up to 'n' bytes into 'buf': the count (> 0), 0 when it waits
 * for more input, -1 when the peer closed with close_notify, -2 on an
 * error (pc_NetTls_Why). */
long pc_NetTls_Read(pc_NetTls *c, void *buf, size_t n);
/* Encrypts the 'n' bytes at 'buf' (at most INT_MAX) into the output: the
 * count, -1 on an error (pc_NetTls_Why). */
long pc_NetTls_Write(pc_NetTls *c, const void *buf, size_t n);
/* Puts close_notify into the output (the peer's is not awaited). */
void pc_NetTls_Shutdown(pc_NetTls *c);

/* The encrypted bytes waiting to be sent: their count; with 'data', where
 * they are (valid until the next call on 'c'). pc_NetTls_Sent drops the
 * first 'n' once they went. */
size_t pc_NetTls_Output(pc_NetTls *c, const char **data);
void pc_NetTls_Sent(pc_NetTls *c, size_t n);
/* Gives encrypted bytes received: 1, or 0 when out of memory. */
int pc_NetTls_Input(pc_NetTls *c, const void *data, size_t len);

/* 1 when the handshake resumed an earlier session. */
int pc_NetTls_Resumed(const pc_NetTls *c);

/* Why the last call failed, into 'text' ('room' bytes): "certificate verify
 * failed: ..." when the peer's certificate was refused (for a name it does
 * not carry naming the one checked: "certificate verify failed: hostname
 * mismatch (checked server_name \"x.example\" against the server's
 * certificate)", without "server_name " when it was the target's host;
 * the name whole up to a DNS name's 253 bytes, a longer one cut with "...":
 * PC_ERROR_MAX bytes of 'room' hold it all), else OpenSSL's error, "" when
 * OpenSSL gave none. Clears OpenSSL's error queue. */
void pc_NetTls_Why(const pc_NetTls *c, char *text, size_t room);

#endif
