/* The gRPC transport's pure parts (grpc-timeout, percent and base64
 * coding, metadata checks), a call through a channel to a closed port
 * ending UNAVAILABLE, a channel whose TLS setup fails ending its calls
 * UNAVAILABLE (a failed attempt, not a lame channel), and every allocation failure of channel and
 * call set-up leaking nothing. The engine's own tests are in engine_test.c, the calls against real
 * servers in spec/grpc_spec.lua. */
#include "testing/check.h"
#include "testing/failalloc.h"
#include "net/channel.h"

#include <string.h>

static int timeout_is(double seconds, const char *want) {
  char out[16];
  size_t n = pc_Grpc_FormatTimeout(seconds, out);
  return n == strlen(want) && strcmp(out, want) == 0;
}

static int decoded_is(const char *in, const char *want) {
  char buf[64];
  size_t n = strlen(in);
  memcpy(buf, in, n);
  n = pc_Grpc_PercentDecode(buf, n);
  return n == strlen(want) && memcmp(buf, want, n) == 0;
}

static int base64_is(const char *in, const char *want, size_t want_len) {
  unsigned char out[64];
  size_t n = pc_Grpc_Base64Decode(in, strlen(in), out);
  return n == want_len && memcmp(out, want, n) == 0;
}

static int pair_ok(const char *k, const char *v, const char *want_err) {
  pc_GrpcPair p = {k, strlen(k), v, strlen(v)};
  pc_Error err;
  pc_Error_Init(&err);
  int ok = pc_GrpcPair_Check(&p, &err);
  if (want_err == NULL) return ok && !err.set;
  return !ok && strcmp(err.msg, want_err) == 0;
}

/* A channel to 127.0.0.1:1, where nothing listens (NULL: no memory). */
static pc_GrpcChannel *closed_port(pc_Alloc *alloc, pc_Error *err) {
  pc_GrpcChannelOptions o;
  memset(&o, 0, sizeof o);
  o.host = "127.0.0.1";
  o.port = "1";
  pc_Error_Init(err);
  return pc_GrpcChannel_New(&o, alloc, NULL, err);
}

/* Pumps 'ch' until 'call' has a message or its end (10 s at most):
 * pc_GrpcCall_Next's last answer. */
static int pump_to_end(pc_GrpcChannel *ch, pc_GrpcCall *call) {
  const char *data;
  size_t len;
  int got;
  for (int i = 0; i < 100 && (got = pc_GrpcCall_Next(call, &data, &len)) == 0; i++)
    pc_Grpc_Pump(&ch, 1, 0.1);
  return got;
}

/* Start a call to a port nothing listens on; it must end UNAVAILABLE. */
static int refused_call(pc_Alloc *alloc, int *unavailable) {
  pc_Error err;
  pc_GrpcChannel *ch = closed_port(alloc, &err);
  if (ch == NULL) return 0;
  pc_GrpcPair md[2] = {{"x-a", 3, "b", 1}, {"x-b-bin", 7, "\0\1", 2}};
  pc_GrpcCallSettings s = {5.0, md, 2, 1, 0, 0, 0, 0, NULL};
  pc_GrpcCall *call = pc_GrpcChannel_Start(ch, "/a.B/C", &s, &err);
  if (call == NULL) {
    pc_GrpcChannel_Free(ch);
    return 0;
  }
  pc_GrpcCall_Send(call, "hello", 5);
  pc_GrpcCall_CloseSend(call);
  int got = pump_to_end(ch, call);
  const pc_GrpcStatus *st = pc_GrpcCall_Status(call);
  *unavailable = got == -1 && st != NULL && st->code == kPc_Code_Unavailable &&
                 strcmp(st->message, "connect to 127.0.0.1:1: Connection refused") == 0;
  pc_GrpcChannel_Free(ch); /* deferred: the call is alive */
  pc_GrpcCall_Free(call);  /* frees the channel too */
  return 1;
}

/* pc_GrpcChannel_Close with a call in flight: new calls are refused, the
 * call is still pumped to its end (UNAVAILABLE here), and the channel is
 * freed after it. */
static int closed_call(int *ended) {
  pc_Error err;
  pc_GrpcChannel *ch = closed_port(NULL, &err);
  if (ch == NULL) return 0;
  pc_GrpcCallSettings s = {5.0, NULL, 0, 0, 0, 0, 0, 0, NULL};
  pc_GrpcCall *call = pc_GrpcChannel_Start(ch, "/a.B/C", &s, &err);
  if (call == NULL) {
    pc_GrpcChannel_Free(ch);
    return 0;
  }
  pc_GrpcChannel_Close(ch);
  pc_GrpcChannel_Close(ch); /* idempotent */
  int refused = pc_GrpcChannel_Start(ch, "/a.B/C", &s, &err) == NULL &&
                strcmp(err.msg, "the channel is closed") == 0;
  int got = pump_to_end(ch, call);
  const pc_GrpcStatus *st = pc_GrpcCall_Status(call);
  *ended = refused && got == -1 && st != NULL && st->code == kPc_Code_Unavailable;
  pc_GrpcCall_Free(call);
  pc_GrpcChannel_Free(ch);
  return 1;
}

/* A channel whose TLS setup fails (a CA file that is no PEM bundle, as one
 * half-written during a rotation) is not lame: the attempt fails
 * UNAVAILABLE with why, and the next call, within the backoff, fails at
 * once saying so (the attempt after it sets TLS up anew). Only TLS missing
 * from the process (the Lua module without its TLS object:
 * spec/module_load_spec.lua) makes a lame channel. */
static int tls_setup_calls(pc_Alloc *alloc, int *failed) {
  pc_GrpcChannelOptions o;
  memset(&o, 0, sizeof o);
  o.host = "127.0.0.1";
  o.port = "1";
  o.tls = 1;
  o.ca_file = "/dev/null";
  pc_Error err;
  pc_Error_Init(&err);
  pc_GrpcChannel *ch = pc_GrpcChannel_New(&o, alloc, NULL, &err);
  if (ch == NULL) return 0;
  pc_GrpcCallSettings s = {30.0, NULL, 0, 0, 0, 0, 0, 0, NULL};
  *failed = 1;
  static const char why[] = "ca_file '/dev/null': not a PEM certificate bundle";
  for (int i = 0; i < 2; i++) {
    pc_GrpcCall *call = pc_GrpcChannel_Start(ch, "/a.B/C", &s, &err);
    if (call == NULL) {
      pc_GrpcChannel_Free(ch);
      return 0;
    }
    pc_GrpcCall_CloseSend(call);
    int got = pump_to_end(ch, call);
    const pc_GrpcStatus *st = pc_GrpcCall_Status(call);
    *failed &= got == -1 && st != NULL && st->code == kPc_Code_Unavailable &&
               strncmp(st->message, why, sizeof why - 1) == 0;
    if (i == 0)
      *failed &= st != NULL && strcmp(st->message, why) == 0;
    else
      *failed &=
          st != NULL && strstr(st->message, "(reconnection backoff: the next attempt in") != NULL;
    pc_GrpcCall_Free(call);
  }
  pc_GrpcChannel_Free(ch);
  return 1;
}

int main(void) {
  CHECK(timeout_is(0.05, "50000000n"));
  CHECK(timeout_is(1, "1000000u"));
  CHECK(timeout_is(200, "200000m"));
  CHECK(timeout_is(1e6, "1000000S"));
  CHECK(timeout_is(1e8, "1666667M"));
  CHECK(timeout_is(1e12, "99999999H"));
  CHECK(timeout_is(1e-12, "1n"));
  CHECK(timeout_is(0.099999999, "99999999n"));
  CHECK(timeout_is(0.1000000001, "100001u"));

  CHECK(decoded_is("a%20b", "a b"));
  CHECK(decoded_is("100%", "100%"));
  CHECK(decoded_is("%zz%4", "%zz%4"));
  CHECK(decoded_is("%C3%A9", "\xc3\xa9"));

  CHECK(base64_is("AAH/", "\x00\x01\xff", 3));
  CHECK(base64_is("/w==", "\xff", 1));
  CHECK(base64_is("/w", "\xff", 1));
  CHECK(base64_is("", "", 0));
  unsigned char out[8];
  CHECK(pc_Grpc_Base64Decode("a", 1, out) == (size_t)-1);
  CHECK(pc_Grpc_Base64Decode("a*bc", 4, out) == (size_t)-1);

  CHECK(pair_ok("x-a.b_c", "printable ~", NULL));
  CHECK(pair_ok("x-bin", "\x01\xff", NULL));
  CHECK(pair_ok("X-A", "v", "metadata key 'X-A': only lowercase letters, digits, '_', '-', '.'"));
  CHECK(pair_ok("", "v", "metadata key is empty"));
  CHECK(pair_ok("grpc-x", "v", "metadata key 'grpc-x' is reserved for the transport"));
  CHECK(pair_ok("te", "v", "metadata key 'te' is reserved for the transport"));
  CHECK(pair_ok("x-a", "a\r\nb",
                "metadata 'x-a': value must be printable ASCII (use a '-bin' key for bytes)"));

  unsigned char raw[] = {0, 1, 0xfe, 0xff};
  char b64[16];
  size_t bn = pc_Grpc_Base64Encode(raw, 4, b64);
  CHECK(bn == 6 && memcmp(b64, "AAH+/w", 6) == 0);
  pc_Error err;
  pc_Error_Init(&err);
  CHECK(!pc_Grpc_PathCheck("/a b", &err));
  CHECK(strcmp(err.msg, "method path '/a b': unexpected character") == 0);
  CHECK(pc_Grpc_PathCheck("/a.B/C", &err));

  int unavailable = 0;
  CHECK(refused_call(NULL, &unavailable));
  CHECK(unavailable);

  int tls_failed = 0;
  CHECK(tls_setup_calls(NULL, &tls_failed));
  CHECK(tls_failed);

  int closed_ended = 0;
  CHECK(closed_call(&closed_ended));
  CHECK(closed_ended);

  /* Every allocation failing in turn: no leak, and a clean refusal. */
  for (long n = 1;; n++) {
    fail_reset(n);
    int ok = refused_call(fail_alloc, &unavailable);
    if (fail_live != 0) fprintf(stderr, "leak %lld bytes failing allocation %ld\n", fail_live, n);
    CHECK(fail_live == 0);
    if (!fail_hit) {
      CHECK(ok && unavailable);
      break;
    }
  }
  return CHECK_DONE();
}
