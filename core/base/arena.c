#include "base/arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define PC_ARENA_ALIGN       8
#define PC_ARENA_FIRST_BLOCK 256
#define PC_ARENA_MAX_BLOCK   ((size_t)64 * 1024)

typedef struct pc_Block {
  struct pc_Block *next;
  size_t size; /* bytes of this block, header included */
} pc_Block;

struct pc_Arena {
  pc_ArenaHead head; /* first: the free space in the newest block (arena.h) */
  pc_Alloc *alloc;
  void *ud;
  pc_Block *blocks;
  size_t allocated;
  size_t own;        /* of 'allocated': blocks of their own any arena would give (arena_grow) */
  size_t next_block; /* size of the next ordinary block */
};

void *pc_DefaultAlloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud;
  (void)osize;
  if (nsize == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, nsize);
}

pc_Arena *pc_Arena_New(pc_Alloc *alloc, void *ud) {
  return pc_Arena_NewSized(alloc, ud, PC_ARENA_FIRST_BLOCK);
}

pc_Arena *pc_Arena_NewSized(pc_Alloc *alloc, void *ud, size_t first) {
  if (alloc == NULL) alloc = pc_DefaultAlloc;
  pc_Arena *a = alloc(ud, NULL, 0, sizeof(pc_Arena));
  if (a == NULL) return NULL;
  a->alloc = alloc;
  a->ud = ud;
  a->blocks = NULL;
  a->head.ptr = a->head.end = NULL;
  a->allocated = sizeof(pc_Arena);
  a->own = 0;
  a->next_block = first < PC_ARENA_FIRST_BLOCK ? PC_ARENA_FIRST_BLOCK
                  : first > PC_ARENA_MAX_BLOCK
                      ? PC_ARENA_MAX_BLOCK
                      : (first + PC_ARENA_ALIGN - 1) & ~(size_t)(PC_ARENA_ALIGN - 1);
  return a;
}

void pc_Arena_Free(pc_Arena *a) {
  if (a == NULL) return;
  pc_Block *b = a->blocks;
  while (b != NULL) {
    pc_Block *next = b->next;
    a->alloc(a->ud, b, b->size, 0);
    b = next;
  }
  a->alloc(a->ud, a, sizeof(pc_Arena), 0);
}

static size_t align_up(size_t n) {
  return (n + PC_ARENA_ALIGN - 1) & ~(size_t)(PC_ARENA_ALIGN - 1);
}

/* Slow path: a new block large enough for 'size'. Large requests get a block
 * of their own behind the current one, so the free space is not wasted. */
static void *arena_grow(pc_Arena *a, size_t size) {
  size_t header = align_up(sizeof(pc_Block));
  if (size > SIZE_MAX - header) return NULL;
  size_t want = size + header;
  int own = want > a->next_block / 2;
  size_t bsize = own ? want : a->next_block;
  pc_Block *b = a->alloc(a->ud, NULL, 0, bsize);
  if (b == NULL) return NULL;
  b->size = bsize;
  a->allocated += bsize;
  if (want > PC_ARENA_MAX_BLOCK / 2) a->own += bsize; /* its own at any next_block */
  char *mem = (char *)b + header;
  if (own && a->blocks != NULL) {
    b->next = a->blocks->next;
    a->blocks->next = b;
    return mem;
  }
  b->next = a->blocks;
  a->blocks = b;
  a->head.ptr = mem + size;
  a->head.end = (char *)b + bsize;
  if (a->next_block < PC_ARENA_MAX_BLOCK)
    a->next_block = a->next_block > PC_ARENA_MAX_BLOCK / 2 ? PC_ARENA_MAX_BLOCK : a->next_block * 2;
  return mem;
}

void *pc_Arena_MallocSlow(pc_Arena *a, size_t size) {
  if (size > SIZE_MAX - PC_ARENA_ALIGN) return NULL;
  size = align_up(size == 0 ? 1 : size);
  if (a->head.ptr != NULL && (size_t)(a->head.end - a->head.ptr) >= size) {
    void *p = a->head.ptr;
    a->head.ptr += size;
    return p;
  }
  return arena_grow(a, size);
}

char *pc_Arena_StrDup(pc_Arena *a, const char *s, size_t len) {
  if (len == SIZE_MAX) return NULL;
  char *p = pc_Arena_Malloc(a, len + 1);
  if (p == NULL) return NULL;
  if (len > 0) memcpy(p, s, len);
  p[len] = '\0';
  return p;
}

void pc_Arena_Reset(pc_Arena *a) {
  pc_Block *keep = a->blocks;
  if (keep == NULL) return;
  pc_Block *b = keep->next;
  while (b != NULL) {
    pc_Block *next = b->next;
    a->alloc(a->ud, b, b->size, 0);
    b = next;
  }
  keep->next = NULL;
  a->head.ptr = (char *)keep + align_up(sizeof(pc_Block));
  a->head.end = (char *)keep + keep->size;
  a->allocated = sizeof(pc_Arena) + keep->size;
  a->own = 0; /* the block kept is the ordinary one now */
}

size_t pc_Arena_SpaceAllocated(const pc_Arena *a) {
  return a->allocated;
}

size_t pc_Arena_SpaceUsed(const pc_Arena *a) {
  return a->allocated - a->own - (size_t)(a->head.end - a->head.ptr);
}
