/* web_http.h: CORS origins (exact, "*", credentials), a preflight's
 * methods and headers (more of each, the prefixed names asked for), and
 * Connect GET's
 * query (codecs, percent-encoding, base64url padded or not, compression,
 * the receive limit, every refusal naming its parameter). */
#include "testing/check.h"
#include "net/web_http.h"

#include <string.h>

static const char *allow(const pc_WebCors *c, const char *origin) {
  return pc_WebCors_AllowOrigin(c, origin, strlen(origin));
}

/* Parses 'q' with limit 'max'; 1 when it parsed, else 0 with the error
 * in 'err'. */
static int get(pc_Arena *a, const char *q, size_t max, pc_ConnectGet *g, int *big, pc_Error *err) {
  pc_Error_Init(err);
  return pc_Connect_ParseGet(a, q, strlen(q), max, g, big, err);
}

static int refused(pc_Arena *a, const char *q, const char *why) {
  pc_ConnectGet g;
  pc_Error err;
  int big;
  return !get(a, q, 1024, &g, &big, &err) && strstr(err.msg, why) != NULL && !big;
}

int main(void) {
  /* CORS */
  pc_WebCors c = {.origins = "https://app.example\nhttp://localhost:8080\n"};
  CHECK(strcmp(allow(&c, "https://app.example"), "https://app.example") == 0);
  CHECK(strcmp(allow(&c, "http://localhost:8080"), "http://localhost:8080") == 0);
  CHECK(allow(&c, "https://app.example.evil") == NULL);
  CHECK(allow(&c, "https://app.exampl") == NULL);
  CHECK(allow(&c, "HTTPS://APP.EXAMPLE") == NULL); /* browsers send it lowercased */
  CHECK(allow(&c, "") == NULL);
  CHECK(pc_WebCors_AllowOrigin(NULL, "x", 1) == NULL);
  c.origins = "https://app.example\n*\n";
  CHECK(strcmp(allow(&c, "https://other.example"), "*") == 0);
  CHECK(strcmp(allow(&c, "https://app.example"), "https://app.example") == 0);
  c.credentials = 1; /* never "*" with credentials: the origin echoed */
  CHECK(strcmp(allow(&c, "https://other.example"), "https://other.example") == 0);
  c.origins = "https://app.example"; /* a last line without '\n' */
  CHECK(allow(&c, "https://app.example") != NULL);

  /* a preflight's methods and headers */
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_WebCors p = {.origins = "*\n"};
  CHECK(strcmp(pc_WebCors_AllowMethods(&p, a), "GET, POST") == 0);
  CHECK(strcmp(pc_WebCors_AllowHeaders(&p, "grpc-metadata-x", 15, a), PC_WEB_CORS_HEADERS) == 0);
  p.methods = "DELETE, PUT";
  p.headers = "authorization, X-Req";
  CHECK(strcmp(pc_WebCors_AllowMethods(&p, a), "GET, POST, DELETE, PUT") == 0);
  CHECK(strcmp(pc_WebCors_AllowHeaders(&p, NULL, 0, a),
               PC_WEB_CORS_HEADERS ", authorization, X-Req") == 0);
  p.header_prefix = "grpc-metadata-";
  /* names beginning with the prefix in either case, trimmed; not the prefix alone, another
   * header, a name with a character no field name has, nor what lies past 'n' */
  static const char asked[] = " Grpc-Metadata-A ,content-type,,grpc-metadata-, grpc-metadata-b\t,"
                              "x-grpc-metadata-c,grpc-metadata-d e,grpc-metadata-z";
  CHECK(strcmp(pc_WebCors_AllowHeaders(&p, asked, sizeof asked - 1 - 16, a), PC_WEB_CORS_HEADERS
               ", authorization, X-Req, Grpc-Metadata-A, grpc-metadata-b") == 0);
  CHECK(strcmp(pc_WebCors_AllowHeaders(&p, "grpc-metadata-x,", 16, a),
               PC_WEB_CORS_HEADERS ", authorization, X-Req, grpc-metadata-x") == 0);
  /* the most names: each one byte past the prefix, one comma apart */
  p.header_prefix = "";
  p.headers = NULL;
  CHECK(strcmp(pc_WebCors_AllowHeaders(&p, "a,b,c", 5, a), PC_WEB_CORS_HEADERS ", a, b, c") == 0);

  /* Connect GET */
  pc_ConnectGet g;
  pc_Error err;
  int big;
  CHECK(get(a, "connect=v1&encoding=json&message=%7B%22x%22%3A+1%7D", 1024, &g, &big, &err));
  CHECK(g.codec == kPc_WebCodec_Json && g.compression == NULL && g.message_len == 8 &&
        memcmp(g.message, "{\"x\": 1}", 8) == 0);
  /* 08 06 10 07, padded or not, '-' and '_' of base64url */
  CHECK(get(a, "encoding=proto&base64=1&message=CAYQBw", 1024, &g, &big, &err));
  CHECK(g.codec == kPc_WebCodec_Proto && g.message_len == 4 &&
        memcmp(g.message, "\10\6\20\7", 4) == 0);
  CHECK(get(a, "message=CAYQBw%3D%3D&base64=1&encoding=proto&_=7", 1024, &g, &big, &err));
  CHECK(g.message_len == 4 && memcmp(g.message, "\10\6\20\7", 4) == 0);
  /* names and short values percent-decoded; the first of a repeated parameter wins (Go's
   * url.ParseQuery and Query().Get, as connect-go reads them) */
  CHECK(get(a, "encod%69ng=json&message=%7B%7D", 1024, &g, &big, &err));
  CHECK(g.codec == kPc_WebCodec_Json && g.message_len == 2);
  CHECK(get(a, "encoding=json&encoding=proto&message=%7B%7D", 1024, &g, &big, &err));
  CHECK(g.codec == kPc_WebCodec_Json);
  CHECK(get(a, "encoding=json&message=%7B%7D&message=%7B%22x%22%3A1%7D", 1024, &g, &big, &err));
  CHECK(g.message_len == 2 && memcmp(g.message, "{}", 2) == 0);
  CHECK(get(a, "encoding=pro%74o&base64=%31&message=CAYQBw", 1024, &g, &big, &err));
  CHECK(g.codec == kPc_WebCodec_Proto && g.message_len == 4);
  CHECK(get(a, "encoding=proto&base64=1&message=-_8", 1024, &g, &big, &err));
  CHECK(g.message_len == 2 && (unsigned char)g.message[0] == 0xfb &&
        (unsigned char)g.message[1] == 0xff);
  CHECK(get(a, "encoding=proto&compression=gzip&base64=1&message=", 1024, &g, &big, &err));
  CHECK(strcmp(g.compression, "gzip") == 0 && g.message_len == 0);
  CHECK(get(a, "encoding=json&compression=identity&message=", 1024, &g, &big, &err));
  CHECK(strcmp(g.compression, "identity") == 0);
  CHECK(!get(a, "encoding=json&message=12345", 4, &g, &big, &err) && big &&
        strstr(err.msg, "5 bytes exceeds the limit of 4 bytes") != NULL);
  CHECK(refused(a, "", "'encoding' is missing"));
  CHECK(refused(a, "message=x", "'encoding' is missing"));
  CHECK(refused(a, "encoding=xml&message=x", "'encoding' must be proto or json, got 'xml'"));
  CHECK(refused(a, "encoding=json", "'message' is missing"));
  CHECK(refused(a, "connect=v2&encoding=json&message=x", "'connect' must be v1, got 'v2'"));
  CHECK(refused(a, "encoding=json&compression=br&message=x",
                "'compression' must be gzip or identity, got 'br'"));
  CHECK(refused(a, "encoding=json&base64=2&message=x", "'base64' must be 1 or 0"));
  CHECK(refused(a, "encoding=json&message=%4", "has a '%' not followed by two hex digits"));
  CHECK(refused(a, "encoding=json&message=%zz", "has a '%' not followed by two hex digits"));
  CHECK(refused(a, "encoding=proto&base64=1&message=C", "is not base64url"));
  CHECK(refused(a, "encoding=proto&base64=1&message=C%2B*", "is not base64url"));
  pc_Arena_Free(a);
  return CHECK_DONE();
}
