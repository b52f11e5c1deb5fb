/* XXH64 (xxHash, 64 bits, https://github.com/Cyan4973/xxHash): the hash
 * gRPC's ring_hash load balancing (gRFC A42) and Envoy's RING_HASH put
 * backends and requests on their ring with, so a ring built here places
 * each key where theirs do. Pure, no state; not for the core's tables
 * (those use hash.h's FNV-1a). */
#ifndef PC_BASE_XXHASH_H
#define PC_BASE_XXHASH_H

#include <stddef.h>
#include <stdint.h>

#define PC_XXH_P1 0x9E3779B185EBCA87ull
#define PC_XXH_P2 0xC2B2AE3D27D4EB4Full
#define PC_XXH_P3 0x165667B19E3779F9ull
#define PC_XXH_P4 0x85EBCA77C2B2AE63ull
#define PC_XXH_P5 0x27D4EB2F165667C5ull

static inline uint64_t pc_XxHash_Rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

/* The little-endian 8 and 4 bytes at 'p', whatever the host's order. */
static inline uint64_t pc_XxHash_Read64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
  return v;
}
static inline uint64_t pc_XxHash_Read32(const unsigned char *p) {
  return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24;
}

static inline uint64_t pc_XxHash_Round(uint64_t acc, uint64_t input) {
  acc += input * PC_XXH_P2;
  return pc_XxHash_Rotl(acc, 31) * PC_XXH_P1;
}

static inline uint64_t pc_XxHash_Merge(uint64_t acc, uint64_t v) {
  acc ^= pc_XxHash_Round(0, v);
  return acc * PC_XXH_P1 + PC_XXH_P4;
}

/* XXH64 of the 'n' bytes at 'data' (n may be 0, data then may be NULL)
 * with 'seed' (gRPC's ring hash: 0): the reference's XXH64(data, n, seed).
 * Unsigned arithmetic wraps, as the algorithm wants. */
static inline uint64_t pc_XxHash64(const void *data, size_t n, uint64_t seed) {
  const unsigned char *p = data;
  size_t i = 0; /* bytes taken so far: indices, not pointers (data may be NULL when n is 0) */
  uint64_t h;
  if (n >= 32) {
    uint64_t v1 = seed + PC_XXH_P1 + PC_XXH_P2, v2 = seed + PC_XXH_P2, v3 = seed,
             v4 = seed - PC_XXH_P1;
    for (; n - i >= 32; i += 32) {
      v1 = pc_XxHash_Round(v1, pc_XxHash_Read64(p + i));
      v2 = pc_XxHash_Round(v2, pc_XxHash_Read64(p + i + 8));
      v3 = pc_XxHash_Round(v3, pc_XxHash_Read64(p + i + 16));
      v4 = pc_XxHash_Round(v4, pc_XxHash_Read64(p + i + 24));
    }
    h = pc_XxHash_Rotl(v1, 1) + pc_XxHash_Rotl(v2, 7) + pc_XxHash_Rotl(v3, 12) +
        pc_XxHash_Rotl(v4, 18);
    h = pc_XxHash_Merge(h, v1);
    h = pc_XxHash_Merge(h, v2);
    h = pc_XxHash_Merge(h, v3);
    h = pc_XxHash_Merge(h, v4);
  } else {
    h = seed + PC_XXH_P5;
  }
  h += (uint64_t)n;
  for (; n - i >= 8; i += 8) {
    h ^= pc_XxHash_Round(0, pc_XxHash_Read64(p + i));
    h = pc_XxHash_Rotl(h, 27) * PC_XXH_P1 + PC_XXH_P4;
  }
  if (n - i >= 4) {
    h ^= pc_XxHash_Read32(p + i) * PC_XXH_P1;
    h = pc_XxHash_Rotl(h, 23) * PC_XXH_P2 + PC_XXH_P3;
    i += 4;
  }
  for (; i < n; i++) {
    h ^= (uint64_t)p[i] * PC_XXH_P5;
    h = pc_XxHash_Rotl(h, 11) * PC_XXH_P1;
  }
  h ^= h >> 33;
  h *= PC_XXH_P2;
  h ^= h >> 29;
  h *= PC_XXH_P3;
  h ^= h >> 32;
  return h;
}

#endif
