/* The gRPC-Web and Connect functions of web.h: content-types to
 * protocols, base64 fed in every split (padding inside, bad characters),
 * the gRPC-Web trailers message, Connect's codes, HTTP statuses, timeouts,
 * error JSON (details from a google.rpc.Status) and end-of-stream message,
 * each under every allocation failing. */
#include "testing/check.h"
#include "testing/failalloc.h"
#include "net/web.h"

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
  CHECK(classify("POST", "application/grpc+thrift", &codec) == kPc_WebProtocol_Grpc);
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

  /* base64 in every split; padding inside the stream (chunks padded each) */
  {
    static const char *const ok[] = {"aGk=", "aGVsbG8=", "aA==aGk=aGVs", "AAEC/w==", ""};
    static const char *const raw[] = {"hi", "hello", "hhihel", "\x00\x01\x02\xff", ""};
    static const size_t rawn[] = {2, 5, 6, 4, 0};
    for (size_t i = 0; i < 5; i++)
      for (size_t step = 1; step <= 9; step++) {
        unsigned char out[32];
        size_t at = 0, n = decode_split(ok[i], step, out, &at);
        CHECK(n == rawn[i] && memcmp(out, raw[i], n) == 0);
      }
    static const char *const bad[] = {"aGk", "a===", "=AAA", "aG=k", "aGk!", "aGk=x", "aGVs\n"};
    static const size_t where[] = {3, 1, 0, 3, 3, 5, 4};
    for (size_t i = 0; i < 7; i++)
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
  return CHECK_DONE();
}
