/* FNV-1a, 64 bits: the core's one hash of names and bytes (symbol tables,
 * the descriptor-set import graph, map keys, name sets), and fmix64, its
 * mixer of 64-bit keys. Not for hostile input that could pick collisions:
 * each table using them bounds its probes by its own size or a budget. */
#ifndef PC_BASE_HASH_H
#define PC_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

/* The hash of no bytes (FNV-1a's offset basis): where a new hash starts. */
#define PC_HASH_START 0xcbf29ce484222325ull

/* 'h' continued over 'n' bytes at 's' (n may be 0), so the hash of a
 * dotted name is its scope's continued: pc_Hash_More(pc_Hash_More(
 * PC_HASH_START, "a", 1), ".b", 2) == pc_Hash_More(PC_HASH_START, "a.b", 3). */
static inline uint64_t pc_Hash_More(uint64_t h, const void *s, size_t n) {
  const unsigned char *p = s;
  for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

/* The hash of a NUL-terminated string. */
static inline uint64_t pc_Hash_String(const char *s) {
  uint64_t h = PC_HASH_START;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
  return h;
}

/* The murmur3 fmix64 finalizer: every bit of 'x' reaches every bit of the
 * result, so keys whose low bits are alike (doubles, multiples of a large
 * power of two, pointers) still spread over a table indexed by low bits. */
static inline uint64_t pc_Hash_Mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

#endif
