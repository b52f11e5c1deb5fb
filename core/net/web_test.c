/* The gRPC-Web and Connect functions of web.h: content-types to
 * protocols, base64 fed in every split (padding inside, bad characters),
 * the gRPC-Web trailers message, Connect's codes, HTTP statuses, timeouts,
 * error JSON (details from a google.rpc.Status) and end-of-stream message,
 * each under every allocation failing. */
#include "testing/check.h"
#include "testing/failalloc.h"
#include "net/web.h"

#include <stdio.h>
#include <string.h>

static pc_WebProtocol classify(const char *method, const char *ct, pc_WebCodec *codec) {
  return pc_Web_Classify(method, ct, ct ? strlen(ct) : 0, codec);
}

/* Decodes 'in' fed in pieces of 'step' characters; the bytes in 'out',
 * their count returned, (size_t)-1 on an error (offset in '*at', counted
 * from the start). */
static size_t decode_split(const char *in, size_t step, unsigned char *out, size_t *at) {
  pc_WebBase64 b;
  memset(&b, 0, sizeof b);
  size_t n = strlen(in), o = 0;
  for (size_t i = 0; i < n; i += step) {
    size_t k = n - i < step ? n - i : step, where = 0;
    size_t got = pc_WebBase64_Decode(&b, in + i, k, out + o, &where);
    if (got == (size_t)-1) {
      *at = i + where;
      return got;
    }
    o += got;
  }
  if (pc_WebBase64_Pending(&b) != 0) {
    *at = n;
    return (size_t)-1;
  }
  return o;
}

/* Pairs read back, joined as "k=v;" into 'text'. */
typedef struct {
  char text[256];
  size_t n;
} Pairs;

static int collect(void *ud, const char *k, size_t kn, const char *v, size_t vn) {
  Pairs *p = ud;
  if (p->n + kn + vn + 3 > sizeof p->text) return 0;
  memcpy(p->text + p->n, k, kn);
  p->n += kn;
  p->text[p->n++] = '=';
  memcpy(p->text + p->n, v, vn);
  p->n += vn;
  p->text[p->n++] = ';';
  p->text[p->n] = '\0';
  return 1;
}

/* What the server writes, the client reads back: the error JSON and the
 * end-of-stream message (the details as the same google.rpc.Status), the
 * gRPC-Web trailers' lines; each under every allocation failing. */
static void read_back(const char *status, size_t status_len) {
  for (long at = 1;; at++) {
    fail_reset(at);
    pc_GrpcBuf b = {0};
    pc_GrpcStatus st;
    memset(&st, 0, sizeof st);
    st.code = kPc_Code_InvalidArgument;
    st.message = "m";
    st.message_len = 1;
    st.details = status;
    st.details_len = status_len;
    pc_GrpcPair md[2] = {{"x-a", 3, "1", 1}, {"x-b-bin", 7, "\x00\xff", 2}};
    pc_Arena *a = pc_Arena_New(fail_alloc, NULL);
    int ok = a != NULL;
    pc_Error err;
    pc_Error_Init(&err);
    pc_ConnectError ce;
    memset(&ce, 0, sizeof ce);
    if (ok && pc_Connect_ErrorJson(pc_DefaultAlloc, NULL, &b, &st)) {
      if (pc_Connect_ParseError(a, b.p, b.len, &ce, &err)) {
        CHECK(ce.present && ce.code == kPc_Code_InvalidArgument && strcmp(ce.message, "m") == 0);
        CHECK(ce.details_len == status_len && memcmp(ce.details, status, status_len) == 0);
      } else {
        ok = 0;
      }
    }
    b.len = 0;
    Pairs p = {{0}, 0};
    if (ok && pc_Connect_EndStream(pc_DefaultAlloc, NULL, &b, &st, md, 2)) {
      memset(&ce, 0, sizeof ce);
      if (pc_Connect_ParseEndStream(a, b.p + 5, b.len - 5, &ce, collect, &p, &err)) {
        CHECK(ce.present && ce.code == kPc_Code_InvalidArgument);
        CHECK(ce.details_len == status_len);
        CHECK(strcmp(p.text, "x-a=1;x-b-bin=AP8;") == 0);
      } else {
        ok = 0;
      }
    }
    b.len = 0;
    p.n = 0;
    p.text[0] = '\0';
    if (ok && pc_Web_GrpcWebTrailers(pc_DefaultAlloc, NULL, &b, &st, md, 2)) {
      if (pc_Web_ParseGrpcWebTrailers(a, b.p + 5, b.len - 5, collect, &p, &err)) {
        CHECK(strncmp(p.text, "grpc-status=3;grpc-message=m;grpc-status-details-bin=", 53) == 0);
        CHECK(strstr(p.text, ";x-a=1;x-b-bin=AP8;") != NULL);
      } else {
        ok = 0;
      }
    }
    pc_GrpcBuf_Free(pc_DefaultAlloc, NULL, &b);
    pc_Arena_Free(a);
    CHECK(fail_live == 0);
    if (!fail_hit) {
      CHECK(ok);
      break;
    }
  }
}

/* Whether {"x": 'n' arrays nested} parses (the object is one level more). */
static int nested(pc_Arena *a, int n, pc_Error *err) {
  char deep[300];
  size_t d = (size_t)snprintf(deep, sizeof deep, "{\"x\":");
  for (int i = 0; i < n; i++) deep[d++] = '[';
  for (int i = 0; i < n; i++) deep[d++] = ']';
  deep[d++] = '}';
  pc_ConnectError ce;
  memset(&ce, 0, sizeof ce);
  pc_Error_Init(err);
  return pc_Connect_ParseError(a, deep, d, &ce, err);
}

static int buf_is(const pc_GrpcBuf *b, const void *p, size_t n) {
  return b->len == n && memcmp(b->p, p, n) == 0;
}

/* Whether 'b' is one message with 'flags' and the text 'body'. */
static int envelope_is(const pc_GrpcBuf *b, unsigned flags, const char *body) {
  size_t n = strlen(body);
  const unsigned char *h = (const unsigned char *)b->p;
  if (b->len != 5 + n || h[0] != flags) return 0;
  size_t len = (size_t)h[1] << 24 | (size_t)h[2] << 16 | (size_t)h[3] << 8 | h[4];
  return len == n && memcmp(b->p + 5, body, n) == 0;
}

/* google.rpc.Status{code 3, message "m", details [Any{type_url
 * "type.googleapis.com/google.rpc.ErrorInfo", value "\x0a\x01x"}]} */
static const char STATUS[] = "\x08\x03\x12\x01m\x1a\x2f"
                             "\x0a\x28type.googleapis.com/google.rpc.ErrorInfo"
                             "\x12\x03\x0a\x01x";

int main(void) {
  pc_WebCodec codec;
  /* content-types */
  CHECK(classify("POST", "application/grpc", &codec) == kPc_WebProtocol_Grpc);
  CHECK(classify("POST", "application/grpc+thrift", &codec) == kPc_WebProtocol_Grpc &&
        codec == kPc_WebCodec_Proto);
  CHECK(classify("POST", "application/grpc+JSON; charset=utf-8", &codec) == kPc_WebProtocol_Grpc &&
        codec == kPc_WebCodec_Json);
  CHECK(classify("POST", "application/grpc-web", &codec) == kPc_WebProtocol_GrpcWeb &&
        codec == kPc_WebCodec_Proto);
  CHECK(classify("POST", "application/grpc-web+json", &codec) == kPc_WebProtocol_GrpcWeb &&
        codec == kPc_WebCodec_Json);
  CHECK(classify("POST", "Application/GRPC-Web-Text+proto; charset=x", &codec) ==
            kPc_WebProtocol_GrpcWebText &&
        codec == kPc_WebCodec_Proto);
  CHECK(classify("POST", "application/grpc-web+thrift", &codec) == kPc_WebProtocol_None);
  CHECK(classify("POST", "application/connect+json", &codec) == kPc_WebProtocol_ConnectStream &&
        codec == kPc_WebCodec_Json);
  CHECK(classify("POST", "application/connect", &codec) == kPc_WebProtocol_None);
  CHECK(classify("POST", "application/proto", &codec) == kPc_WebProtocol_ConnectUnary &&
        codec == kPc_WebCodec_Proto);
  CHECK(classify(NULL, "application/json; charset=utf-8", &codec) == kPc_WebProtocol_ConnectUnary &&
        codec == kPc_WebCodec_Json);
  CHECK(classify("GET", "application/json", &codec) == kPc_WebProtocol_None);
  CHECK(classify("POST", "application/xml", &codec) == kPc_WebProtocol_None);
  CHECK(classify("POST", "text/plain", &codec) == kPc_WebProtocol_None);
  CHECK(classify("POST", NULL, &codec) == kPc_WebProtocol_None);
  CHECK(strcmp(pc_WebProtocol_Name(kPc_WebProtocol_GrpcWebText), "grpc-web-text") == 0);

  /* base64 in every split; padding inside the stream (chunks padded each);
   * CR and LF skipped (wrapped lines), other white space refused */
  {
    static const char *const ok[] = {"aGk=", "aGVsbG8=",     "aA==aGk=aGVs", "AAEC/w==",
                                     "",     "aGVs\nbG8=\n", "aG\r\nk=",     "aA=\n=aGk=\r\naGVs"};
    static const char *const raw[] = {"hi", "hello", "hhihel", "\x00\x01\x02\xff",
                                      "",   "hello", "hi",     "hhihel"};
    static const size_t rawn[] = {2, 5, 6, 4, 0, 5, 2, 6};
    for (size_t i = 0; i < 8; i++)
      for (size_t step = 1; step <= 9; step++) {
        unsigned char out[32];
        size_t at = 0, n = decode_split(ok[i], step, out, &at);
        CHECK(n == rawn[i] && memcmp(out, raw[i], n) == 0);
      }
    static const char *const bad[] = {"aGk",   "a===",  "=AAA",      "aG=k",   "aGk!",
                                      "aGk=x", "aGV\n", "aGVs bG8=", "aG\tk=", "aG\n\n="};
    static const size_t where[] = {3, 1, 0, 3, 3, 5, 4, 4, 2, 5};
    for (size_t i = 0; i < 10; i++)
      for (size_t step = 1; step <= 6; step++) {
        unsigned char out[32];
        size_t at = 99;
        CHECK(decode_split(bad[i], step, out, &at) == (size_t)-1 && at == where[i]);
      }
    char enc[16];
    CHECK(pc_Web_Base64Encode((const unsigned char *)"hello", 5, enc) == 8 &&
          memcmp(enc, "aGVsbG8=", 8) == 0);
  }

  /* Connect codes, statuses, timeouts */
  CHECK(strcmp(pc_Connect_CodeName(kPc_Code_Cancelled), "canceled") == 0);
  CHECK(strcmp(pc_Connect_CodeName(kPc_Code_InvalidArgument), "invalid_argument") == 0);
  CHECK(strcmp(pc_Connect_CodeName((pc_Code)99), "unknown") == 0);
  CHECK(pc_Connect_HttpStatus(kPc_Code_Ok) == 200);
  CHECK(pc_Connect_HttpStatus(kPc_Code_Cancelled) == 499);
  CHECK(pc_Connect_HttpStatus(kPc_Code_FailedPrecondition) == 400);
  CHECK(pc_Connect_HttpStatus(kPc_Code_DeadlineExceeded) == 504);
  CHECK(pc_Connect_HttpStatus(kPc_Code_ResourceExhausted) == 429);
  CHECK(pc_Connect_HttpStatus(kPc_Code_Unimplemented) == 501);
  CHECK(pc_Connect_HttpStatus(kPc_Code_Unavailable) == 503);
  CHECK(pc_Connect_HttpStatus(kPc_Code_DataLoss) == 500);
  CHECK(pc_Connect_ParseTimeout("1500", 4) == 1.5);
  CHECK(pc_Connect_ParseTimeout("9999999999", 10) == 9999999.999);
  CHECK(pc_Connect_ParseTimeout("12345678901", 11) < 0);
  CHECK(pc_Connect_ParseTimeout("", 0) < 0);
  CHECK(pc_Connect_ParseTimeout("1s", 2) < 0);
  CHECK(pc_Connect_ParseTimeout("-1", 2) < 0);

  /* bodies, each under every allocation failing */
  for (long at = 1;; at++) {
    fail_reset(at);
    pc_GrpcBuf b = {0};
    pc_GrpcStatus st;
    memset(&st, 0, sizeof st);
    st.code = kPc_Code_InvalidArgument;
    st.message = "bad \"x\"\n100%";
    st.message_len = strlen(st.message);
    st.details = STATUS;
    st.details_len = sizeof STATUS - 1;
    pc_GrpcPair md[3] = {{"x-a", 3, "1", 1}, {"x-b-bin", 7, "\x00\xff", 2}, {"x-a", 3, "2", 1}};
    int ok = 1;
    if (pc_Web_GrpcWebTrailers(fail_alloc, NULL, &b, &st, md, 3)) {
      CHECK(
          envelope_is(&b, 0x80,
                      "grpc-status:3\r\ngrpc-message:bad \"x\"%0A100%25\r\n"
                      "grpc-status-details-bin:"
                      "CAMSAW0aLwoodHlwZS5nb29nbGVhcGlzLmNvbS9nb29nbGUucnBjLkVycm9ySW5mbxIDCgF4\r\n"
                      "x-a:1\r\nx-b-bin:AP8\r\nx-a:2\r\n"));
    } else {
      ok = 0;
      CHECK(b.len == 0);
    }
    b.len = 0;
    if (pc_Connect_ErrorJson(fail_alloc, NULL, &b, &st)) {
      static const char want[] =
          "{\"code\":\"invalid_argument\",\"message\":\"bad \\\"x\\\"\\u000a100%\","
          "\"details\":[{\"type\":\"google.rpc.ErrorInfo\",\"value\":\"CgF4\"}]}";
      CHECK(buf_is(&b, want, sizeof want - 1));
    } else {
      ok = 0;
      CHECK(b.len == 0);
    }
    b.len = 0;
    if (pc_Connect_EndStream(fail_alloc, NULL, &b, &st, md, 3)) {
      CHECK(envelope_is(&b, 0x02,
                        "{\"error\":{\"code\":\"invalid_argument\",\"message\":\"bad "
                        "\\\"x\\\"\\u000a100%\",\"details\":[{\"type\":\"google.rpc.ErrorInfo\","
                        "\"value\":\"CgF4\"}]},\"metadata\":{\"x-a\":[\"1\",\"2\"],"
                        "\"x-b-bin\":[\"AP8\"]}}"));
    } else {
      ok = 0;
      CHECK(b.len == 0);
    }
    b.len = 0;
    st.code = kPc_Code_Ok;
    if (pc_Connect_EndStream(fail_alloc, NULL, &b, &st, NULL, 0)) {
      CHECK(envelope_is(&b, 0x02, "{}"));
    } else {
      ok = 0;
    }
    pc_GrpcBuf_Free(fail_alloc, NULL, &b);
    CHECK(fail_live == 0);
    if (!fail_hit) {
      CHECK(ok);
      break;
    }
  }

  /* details that are not a google.rpc.Status: none listed, no crash */
  {
    pc_GrpcBuf b = {0};
    pc_GrpcStatus st;
    memset(&st, 0, sizeof st);
    st.code = kPc_Code_Internal;
    st.details = "\x1a\xff\xff";
    st.details_len = 3;
    CHECK(pc_Connect_ErrorJson(pc_DefaultAlloc, NULL, &b, &st));
    CHECK(buf_is(&b, "{\"code\":\"internal\"}", 19));
    pc_GrpcBuf_Free(pc_DefaultAlloc, NULL, &b);
  }
  read_back(STATUS, sizeof STATUS - 1);
  /* Connect-Timeout-Ms: rounded up, at least 1, at most 10 digits */
  char t[12];
  CHECK(pc_Connect_FormatTimeout(1.5, t) == 4 && strcmp(t, "1500") == 0);
  CHECK(pc_Connect_FormatTimeout(0.0001, t) == 1 && strcmp(t, "1") == 0);
  CHECK(pc_Connect_FormatTimeout(0, t) == 1 && strcmp(t, "1") == 0);
  CHECK(pc_Connect_FormatTimeout(0.0021, t) == 1 && strcmp(t, "3") == 0);
  CHECK(pc_Connect_FormatTimeout(1e12, t) == 10 && strcmp(t, "9999999999") == 0);
  /* JSON the parser takes and refuses */
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_Error err;
  pc_ConnectError ce;
  static const struct {
    const char *json;
    pc_Code code;
    const char *message; /* NULL: refused */
  } cases[] = {
      {" { \"code\" : \"unavailable\" , \"extra\":[1,-2.5e3,true,false,null,{}] } ",
       kPc_Code_Unavailable, ""},
      {"{\"code\":\"nope\",\"message\":\"\\ud83d\\ude00\\/\\t\"}", kPc_Code_Unknown,
       "\xf0\x9f\x98\x80/\t"},
      {"{\"message\":\"no code\"}", kPc_Code_Internal, "no code"},
      {"{\"code\":\"aborted\"", kPc_Code_Ok, NULL},
      {"{\"code\":\"aborted\",}", kPc_Code_Ok, NULL},
      {"{\"code\":nul}", kPc_Code_Ok, NULL},
      {"{\"message\":\"\\x\"}", kPc_Code_Ok, NULL},
      {"{\"message\":\"\\u12\"}", kPc_Code_Ok, NULL},
      {"{\"message\":\"a\nb\"}", kPc_Code_Ok, NULL},
      {"{\"details\":{}}", kPc_Code_Ok, NULL},
      {"", kPc_Code_Ok, NULL},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    memset(&ce, 0, sizeof ce);
    ce.code = kPc_Code_Internal;
    pc_Error_Init(&err);
    int ok = pc_Connect_ParseError(a, cases[i].json, strlen(cases[i].json), &ce, &err);
    CHECK(ok == (cases[i].message != NULL));
    if (ok) CHECK(ce.code == cases[i].code && strcmp(ce.message, cases[i].message) == 0);
    if (!ok) CHECK(err.msg[0] != '\0');
  }
  /* nesting: 64 levels are read, more are refused before the stack runs out */
  CHECK(nested(a, 63, &err));
  CHECK(!nested(a, 64, &err) && strstr(err.msg, "nesting too deep") != NULL);
  pc_Arena_Free(a);
  return CHECK_DONE();
}
