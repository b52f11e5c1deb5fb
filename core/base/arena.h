/* Arenas: bump allocation of many small objects, freed all at once.
 *
 * Everything the core allocates goes through a pc_Alloc, which has
 * lua_Alloc's shape, so a host (or the Lua binding) can supply its own
 * allocator and every byte stays accounted. */
#ifndef PC_ARENA_H
#define PC_ARENA_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* lua_Alloc's contract: nsize == 0 frees 'ptr' and returns NULL; otherwise
 * (re)allocates 'ptr' from 'osize' to 'nsize' bytes, returning NULL on
 * failure (and leaving 'ptr' intact). */
typedef void *pc_Alloc(void *ud, void *ptr, size_t osize, size_t nsize);

/* The C library's realloc/free behind pc_Alloc. */
void *pc_DefaultAlloc(void *ud, void *ptr, size_t osize, size_t nsize);

typedef struct pc_Arena pc_Arena;

/* A new, empty arena drawing blocks from 'alloc' ('ud' passed through); NULL
 * when 'alloc' fails. A NULL 'alloc' means pc_DefaultAlloc. */
pc_Arena *pc_Arena_New(pc_Alloc *alloc, void *ud);

/* As pc_Arena_New, its first ordinary block 'first' bytes (its header
 * included; clamped to the arena's smallest and largest block sizes): a
 * caller that knows about how much it will allocate gets one block where
 * the doubling from the smallest would take several and leave more unused. */
pc_Arena *pc_Arena_NewSized(pc_Alloc *alloc, void *ud, size_t first);

/* Frees every block and the arena itself. NULL is allowed. */
void pc_Arena_Free(pc_Arena *a);

/* Forgets everything allocated from 'a' (all of it becomes invalid) and
 * frees every block but the newest, which the next allocations reuse: an
 * arena reset between uses of the same size allocates nothing. */
void pc_Arena_Reset(pc_Arena *a);

/* The start of every pc_Arena: the free space of its newest block, which
 * pc_Arena_Malloc takes from inline (as upb's upb_Arena_Malloc). */
typedef struct {
  char *ptr, *end;
} pc_ArenaHead;

/* pc_Arena_Malloc past its inline case: a new block, a size of 0 or one
 * that overflows. */
void *pc_Arena_MallocSlow(pc_Arena *a, size_t size);

/* 'size' bytes aligned to 8 (max_align_t where that is less), valid until
 * the arena is freed; NULL on allocation failure. Memory is not zeroed. */
static inline void *pc_Arena_Malloc(pc_Arena *a, size_t size) {
  pc_ArenaHead *h = (pc_ArenaHead *)(void *)a;
  size_t n = (size + 7) & ~(size_t)7; /* 0 for 0 and on overflow: the slow path */
  if (n - 1 < (size_t)((uintptr_t)h->end - (uintptr_t)h->ptr)) {
    void *p = h->ptr;
    h->ptr += n;
    return p;
  }
  return pc_Arena_MallocSlow(a, size);
}

/* As pc_Arena_Malloc, zeroed. */
static inline void *pc_Arena_Calloc(pc_Arena *a, size_t size) {
  void *p = pc_Arena_Malloc(a, size);
  if (p != NULL) memset(p, 0, size);
  return p;
}

/* A NUL-terminated copy of the 'len' bytes at 's' (which may hold NULs);
 * NULL on allocation failure. */
char *pc_Arena_StrDup(pc_Arena *a, const char *s, size_t len);

/* Bytes obtained from the allocator so far, blocks and header included. */
size_t pc_Arena_SpaceAllocated(const pc_Arena *a);

/* pc_Arena_SpaceAllocated less the free space of the newest block and
 * less the blocks of an allocation's own that any arena would give it its
 * own block for (one larger than half the largest block): what the other
 * allocations so far took, block headers and older blocks' unused ends
 * included (a pc_Arena_NewSized 'first' for the same work again). */
size_t pc_Arena_SpaceUsed(const pc_Arena *a);

#endif
