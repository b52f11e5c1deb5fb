/* The codec fuzz target (core/wire/fuzz/codec_fuzz.c) without libFuzzer: the
 * seeds, the hostile wire inputs of wire_cases_test.c, and a bounded number of
 * random mutations of the seeds (fixed PRNG, so every run is the same;
 * PC_FUZZ_ITERS overrides the count). The target aborts on any finding;
 * crashes found by libFuzzer are added to kRegressions below. */
#include "testing/check.h"

#include "wire/fuzz/codec_fuzz.c"

#include <stdio.h>

/* A seed from core/wire/fuzz/codec_seeds/ (a type byte, then a message with most
 * fields set, encoded by Debian's protoc --encode from text). */
static size_t read_seed(const char *name, uint8_t *buf, size_t cap) {
  char path[512];
  snprintf(path, sizeof path, "%s/core/wire/fuzz/codec_seeds/%s", PC_SOURCE_DIR, name);
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL);
  if (f == NULL) return 0;
  size_t n = fread(buf, 1, cap, f);
  fclose(f);
  return n;
}

static uint64_t rng = 0x9e3779b97f4a7c15u;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

/* Mutates 'in' into 'out' (capacity 'cap'); returns the new size. */
static size_t mutate(const uint8_t *in, size_t n, uint8_t *out, size_t cap) {
  memcpy(out, in, n);
  int edits = 1 + (int)(next() % 4);
  for (int e = 0; e < edits; e++) {
    size_t at = n > 1 ? 1 + (size_t)(next() % (n - 1)) : 1;
    switch (next() % 6) {
    case 0:
      if (at < n) out[at] ^= (uint8_t)(1u << (next() % 8));
      break;
    case 1:
      if (at < n) out[at] = (uint8_t)next();
      break;
    case 2: /* delete a run */
      if (at < n) {
        size_t len = 1 + (size_t)(next() % 8);
        if (len > n - at) len = n - at;
        memmove(out + at, out + at + len, n - at - len);
        n -= len;
      }
      break;
    case 3: /* insert random bytes */
      if (n + 8 < cap && at <= n) {
        size_t len = 1 + (size_t)(next() % 8);
        memmove(out + at + len, out + at, n - at);
        for (size_t i = 0; i < len; i++) out[at + i] = (uint8_t)next();
        n += len;
      }
      break;
    case 4: /* duplicate a run (repeats fields, merges messages) */
      if (at < n && n * 2 < cap) {
        size_t len = 1 + (size_t)(next() % (n - at));
        memmove(out + at + len, out + at, n - at);
        n += len;
      }
      break;
    default: /* truncate */
      if (at < n) n = at;
      break;
    }
  }
  return n;
}

int main(void) {
  static const char *kRegressions[] = {
      "\x00\x0b",
      "\x01\x1b\x24",
      "\x00\x1c",
      "\x00\x0e",
      "\x01\x0f",
      "\x00\x00\x01",
      "\x01\x88\x80\x80\x80\x40\xd2\x09",
      "\x00\xf8\xff\xff\xff\x0f\x01",
      "\x01\x0a\x05\x61\x62",
      /* libFuzzer with clang's UBSan: an empty string written first, into a
       * writer with no buffer yet (the NUL terminator is the length 0) */
      "\x01\xd2\x01",
  };
  for (size_t i = 0; i < sizeof kRegressions / sizeof kRegressions[0]; i++)
    LLVMFuzzerTestOneInput((const uint8_t *)kRegressions[i], strlen(kRegressions[i]) + 1);
  uint8_t *deep = malloc(200001);
  memset(deep, 0x0b, 200001);
  deep[0] = 0;
  LLVMFuzzerTestOneInput(deep, 200001);
  free(deep);

  static uint8_t seed2[2048], seed3[2048];
  size_t n2 = read_seed("p2.bin", seed2, sizeof seed2);
  size_t n3 = read_seed("p3.bin", seed3, sizeof seed3);
  CHECK(n2 > 100 && n3 > 100);
  LLVMFuzzerTestOneInput(seed2, n2);
  LLVMFuzzerTestOneInput(seed3, n3);
  long iters = getenv("PC_FUZZ_ITERS") ? atol(getenv("PC_FUZZ_ITERS")) : 100000;
  static uint8_t buf[4096];
  for (long i = 0; i < iters; i++) {
    const uint8_t *seed = (i & 1) ? seed3 : seed2;
    size_t n = (i & 1) ? n3 : n2;
    n = mutate(seed, n, buf, sizeof buf);
    LLVMFuzzerTestOneInput(buf, n);
  }
  printf("%ld mutated inputs, no finding\n", iters);
  return CHECK_DONE();
}
