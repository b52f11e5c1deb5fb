/* Wake lists: the calls something happened to since a driver last looked,
 * so a scheduler of many waiting tasks resumes only the tasks of those
 * calls, and the cost of a round of I/O follows the work that is ready,
 * not the calls that exist.
 *
 * A listener (listener.h) and a channel (channel.h) each keep one for their
 * calls. A call takes part once its driver gave it a token (non-zero, the
 * driver's name for it: pc_GrpcCall_SetWakeToken,
 * pc_GrpcServerCall_SetWakeToken); from then on anything its waiter may
 * care about (a message or headers arrived, its send buffer moved, it
 * ended, was reset, cancelled, refused, timed out, lost its connection)
 * lists its token, once until the list is cleared. The driver reads the
 * tokens after each round of I/O (_Items) and clears the list (_Clear).
 * When a token cannot be listed (out of memory, PC_GRPC_WAKE_MAX tokens
 * not yet cleared) the list says so (_Overflow): every waiter must look.
 * So a wake is never lost: a waiter checks its call, then waits; whatever
 * happens after its check lists its token. Not thread-safe. */
#ifndef PC_NET_WAKE_H
#define PC_NET_WAKE_H

#include "base/arena.h"

#include <stddef.h>
#include <stdint.h>

/* Tokens a list holds at most between two clears (then it overflows). */
#define PC_GRPC_WAKE_MAX ((size_t)1 << 20)

typedef struct {
  uint64_t *items;
  size_t count, cap;
  uint64_t round; /* bumped by _Clear: a call is listed once per round */
  int overflow;
  pc_Alloc *alloc;
  void *ud;
} pc_GrpcWakeList;

/* A call's part: its token (0: none, the call is never listed) and the
 * round it was last listed in. Zeroed with the call. */
typedef struct {
  uint64_t token;
  uint64_t round;
} pc_GrpcWaker;

/* An empty list allocating through 'alloc' (NULL: pc_DefaultAlloc). */
void pc_GrpcWakeList_Init(pc_GrpcWakeList *w, pc_Alloc *alloc, void *ud);
void pc_GrpcWakeList_Free(pc_GrpcWakeList *w);

/* Lists the call of 'k' (nothing when its token is 0 or it is listed
 * already). */
void pc_GrpcWakeList_Add(pc_GrpcWakeList *w, pc_GrpcWaker *k);

/* The tokens listed: '*items' points at them (valid until the next _Add or
 * _Clear), returns how many. */
size_t pc_GrpcWakeList_Items(const pc_GrpcWakeList *w, const uint64_t **items);

/* Whether a token could not be listed since the last clear. */
int pc_GrpcWakeList_Overflow(const pc_GrpcWakeList *w);

/* Whether there is anything to read (tokens or an overflow). */
int pc_GrpcWakeList_Pending(const pc_GrpcWakeList *w);

/* Empties the list: the calls listed may be listed again. */
void pc_GrpcWakeList_Clear(pc_GrpcWakeList *w);

#endif
