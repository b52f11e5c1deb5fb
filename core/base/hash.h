/* FNV-1a, 64 bits: the core's one hash of names and bytes (symbol tables,
 * the descriptor-set import graph, map keys, name sets). Not for hostile
 * input that could pick collisions: each table using it bounds its probes
 * by its own size. */
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

#endif
