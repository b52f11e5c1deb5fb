/* What browsers add to the web's RPC protocols, as pure functions over
 * bytes (no nghttp2, no state of their own; the server engine, server.c,
 * uses them per call, so both HTTP versions get them: an HTTP/1.1 request
 * is an HTTP/2 stream of that engine, http1_server.h):
 * - CORS (the Fetch standard's CORS protocol): the origins a listener
 *   allows, and the header lists gRPC-Web and Connect need, as
 *   connectrpc's cors-go names them (its AllowedMethods, AllowedHeaders
 *   and ExposedHeaders);
 * - Connect's unary GET (connectrpc.com/docs/protocol, "Unary-Get-Request"):
 *   the query of "GET /pkg.Svc/Method?connect=v1&encoding=json&message=..."
 *   read into the request a POST would carry.
 *
 * Nothing here raises, prints or holds state beyond its arguments. */
#ifndef PC_NET_WEB_HTTP_H
#define PC_NET_WEB_HTTP_H

#include "base/arena.h"
#include "net/grpc.h"
#include "net/web.h"

#include <stddef.h>

/* -- CORS ------------------------------------------------------------------ */

/* Methods a browser may send across origins: Connect's GET, and POST. */
#define PC_WEB_CORS_METHODS "GET, POST"

/* Request headers the protocols send (cors-go's AllowedHeaders). */
#define PC_WEB_CORS_HEADERS                                                                        \
  "Content-Type, Connect-Protocol-Version, Connect-Timeout-Ms, Connect-Accept-Encoding, "          \
  "Connect-Content-Encoding, Accept-Encoding, Content-Encoding, Grpc-Timeout, X-Grpc-Web, "        \
  "X-User-Agent"

/* Bytes of a preflight's Access-Control-Request-Headers (its field lines
 * joined as one list) read at most. A longer list is not echoed at all:
 * the answer allows the fixed headers only (the browser then refuses the
 * call itself, naming a header), so neither the reading nor the answer
 * grows with what a client sends (a real browser's list of its request's
 * header names is far shorter). */
#define PC_WEB_CORS_MAX_REQUEST_HEADERS 8192

/* Response headers a script may read (cors-go's ExposedHeaders; gRPC-Web's
 * trailers-only status is in headers). */
#define PC_WEB_CORS_EXPOSE                                                                         \
  "Content-Encoding, Connect-Content-Encoding, Grpc-Status, Grpc-Message, "                        \
  "Grpc-Status-Details-Bin"

/* seconds a browser may keep a preflight's answer when max_age is 0 */
#define PC_WEB_CORS_DEFAULT_MAX_AGE 7200

/* A listener's CORS: which origins get an answer. Strings are the
 * caller's and must outlive every engine given them. */
typedef struct {
  const char *origins; /* the allowed origins, each followed by '\n'
                        * ("https://app.example\nhttp://localhost:8080\n");
                        * a line "*" allows every origin */
  const char *headers; /* more request headers allowed (metadata the
                        * browser's code sends), ", "-separated; NULL: none */
  const char *methods; /* more methods allowed (REST routes' verbs: "PUT,
                        * DELETE"), ", "-separated; NULL: none */
  /* request headers a preflight asks for that begin with it (ASCII
   * case-insensitively) are allowed too ("grpc-metadata-": REST's
   * Grpc-Metadata-*); NULL: none */
  const char *header_prefix;
  const char *expose; /* more response headers exposed ("trailer-x-id,
                       * x-id"); NULL: none */
  unsigned max_age;   /* seconds; 0: PC_WEB_CORS_DEFAULT_MAX_AGE */
  int credentials;    /* Access-Control-Allow-Credentials: true (the origin
                       * is then echoed, never "*") */
} pc_WebCors;

/* The Access-Control-Allow-Origin value for a request from 'origin' ('n'
 * bytes; an exact, case-sensitive match of a listed origin, as browsers
 * compare them): 'origin' itself, "*" when the list allows every origin
 * (and credentials is off), NULL when the origin is not allowed (the
 * response then carries no CORS header at all). */
const char *pc_WebCors_AllowOrigin(const pc_WebCors *cors, const char *origin, size_t n);

/* A preflight's Access-Control-Allow-Methods value, in 'a':
 * PC_WEB_CORS_METHODS, then cors->methods. NULL when the arena fails. */
const char *pc_WebCors_AllowMethods(const pc_WebCors *cors, pc_Arena *a);

/* A preflight's Access-Control-Allow-Headers value, in 'a':
 * PC_WEB_CORS_HEADERS, cors->headers, then each name of 'requested' (the
 * preflight's Access-Control-Request-Headers, 'n' bytes, comma-separated;
 * NULL: none) that begins with cors->header_prefix and is a field name
 * (RFC 9110 token). NULL when the arena fails. */
const char *pc_WebCors_AllowHeaders(const pc_WebCors *cors, const char *requested, size_t n,
                                    pc_Arena *a);

/* -- Connect GET ----------------------------------------------------------- */

/* A Connect GET request's query read back. */
typedef struct {
  pc_WebCodec codec;       /* from "encoding" */
  const char *compression; /* "gzip", "identity" or NULL (none given) */
  const char *message;     /* the request message's bytes (in the arena) */
  size_t message_len;
} pc_ConnectGet;

/* Parses the query 'q' ('len' bytes, after the '?') of a Connect GET:
 * "encoding" (proto or json, required), "message" (required; percent-
 * decoded, '+' a space as in forms; with "base64=1" then base64url,
 * padded or not), "compression" (gzip or identity), "connect" (v1 when
 * given). Other parameters are ignored (a cache-buster). Returns 1, or 0
 * with why in 'err' (naming the parameter). 'max' bounds the decoded
 * message (the receive limit): larger is an error too, '*too_big' set. */
int pc_Connect_ParseGet(pc_Arena *arena, const char *q, size_t len, size_t max, pc_ConnectGet *out,
                        int *too_big, pc_Error *err);

#endif
