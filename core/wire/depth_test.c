/* The nesting limit PC_MESSAGE_MAX_DEPTH (core/message/message.h) holds
 * everywhere on a thread with a 1 MiB stack, the smallest a host is likely
 * to give a thread: a message nested that deep decodes (max_depth at its
 * largest), re-encodes to the same bytes, clones, merges, compares, is
 * checked for required fields and searched by pc_Message_Contains; one
 * level more is refused by the decoder and the encoder with an error. The
 * sanitizer build, whose frames are larger, gets 4 MiB. */
#include "base/arena.h"
#include "testing/check.h"
#include "testing/stack.h"
#include "wire/decode.h"
#include "wire/descriptor_set.h"
#include "wire/encode.h"
#include "wire/wire_cases_pb.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* t.Rec { Rec child = 1; int32 v = 2; } nested 'levels' deep below the
 * root, the innermost with v = 7: built inside out into 'buf' (written
 * backwards from its end). Returns the start; '*size' the length. */
static char *nested(char *buf, size_t cap, int levels, size_t *size) {
  char *p = buf + cap;
  *--p = 7;
  *--p = 0x10;
  for (int i = 0; i < levels; i++) {
    size_t len = (size_t)(buf + cap - p);
    char tmp[10]; /* the length as a varint, then copied in front */
    int n = 0;
    do {
      tmp[n++] = (char)((len & 0x7f) | (len > 0x7f ? 0x80 : 0));
      len >>= 7;
    } while (len != 0);
    while (n > 0) *--p = tmp[--n];
    *--p = 0x0a;
  }
  *size = (size_t)(buf + cap - p);
  return p;
}

/* An allocator that has no memory to give. */
static void *no_memory(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud;
  (void)osize;
  if (nsize == 0) free(ptr);
  return NULL;
}

static void *run(void *arg) {
  (void)arg;
  pc_Pool *pool = pc_Pool_New(NULL, NULL);
  size_t first;
  pc_Error err;
  pc_Error_Init(&err);
  CHECK(pc_Pool_AddDescriptorSet(pool, (const char *)kCasesPb, sizeof kCasesPb, &first, &err) > 0);
  const pc_MessageDef *rec = pc_Pool_FindMessage(pool, "t.Rec");
  CHECK(rec != NULL);
  if (rec == NULL) return NULL;
  size_t cap = 16 * (PC_MESSAGE_MAX_DEPTH + 2);
  char *buf = malloc(cap);
  size_t size;
  const char *bytes = nested(buf, cap, PC_MESSAGE_MAX_DEPTH, &size);

  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_DecodeOptions opts = {.max_depth = PC_MESSAGE_MAX_DEPTH};
  pc_Message *m = pc_Message_New(rec, a);
  pc_Error_Init(&err);
  CHECK(pc_Decode(bytes, size, m, rec, a, &opts, &err) == kPc_DecodeStatus_Ok);

  pc_WireWriter w;
  pc_WireWriter_Init(&w, NULL, NULL);
  pc_Error_Init(&err);
  CHECK(pc_Encode(m, rec, NULL, &w, &err) == kPc_EncodeStatus_Ok);
  CHECK(pc_WireWriter_Size(&w) == size && memcmp(pc_WireWriter_Data(&w), bytes, size) == 0);
  pc_WireWriter_Free(&w);

  pc_Message *copy = pc_Message_Clone(m, rec, a);
  CHECK(copy != NULL && pc_Message_Equal(m, copy, rec));
  pc_Message *merged = pc_Message_New(rec, a);
  CHECK(pc_Message_Merge(merged, m, rec, a) && pc_Message_Equal(m, merged, rec));
  CHECK(pc_Message_CheckRequired(m, rec, &err) == 0);
  CHECK(pc_Message_Contains(m, rec, merged) == 0);

  /* The innermost message: reachable at exactly the limit. */
  const pc_FieldDef *child = pc_MessageDef_FindFieldByNumber(rec, 1);
  pc_Message *inner = m;
  for (int i = 0; i < PC_MESSAGE_MAX_DEPTH; i++) inner = pc_Message_Get(inner, child).m;
  CHECK(inner != NULL && pc_Message_Contains(m, rec, inner) == 1);

  /* One level more: the decoder refuses it, whatever max_depth says ... */
  bytes = nested(buf, cap, PC_MESSAGE_MAX_DEPTH + 1, &size);
  pc_Message *deep = pc_Message_New(rec, a);
  opts.max_depth = 1 << 20;
  pc_Error_Init(&err);
  CHECK(pc_Decode(bytes, size, deep, rec, a, &opts, &err) == kPc_DecodeStatus_Malformed);
  CHECK(strstr(err.msg, "t.Rec.child: messages nested deeper than 1000 (max_depth) at offset ") ==
        err.msg);

  /* ... and the encoder a message built one level deeper. */
  pc_Message *top = pc_Message_New(rec, a);
  pc_Value v;
  v.m = m;
  pc_Message_Set(top, child, v);
  pc_WireWriter_Init(&w, NULL, NULL);
  pc_Error_Init(&err);
  CHECK(pc_Encode(top, rec, NULL, &w, &err) == kPc_EncodeStatus_TooDeep);
  CHECK(strcmp(err.msg, "t.Rec: nesting too deep") == 0);
  CHECK(pc_Message_Contains(top, rec, inner) == 2);
  pc_WireWriter_Free(&w);

  /* A failure that many levels down names its place, the outer steps left
   * out ("..."), the innermost and the reason kept. */
  pc_WireWriter_Init(&w, no_memory, NULL);
  pc_Error_Init(&err);
  CHECK(pc_Encode(m, rec, NULL, &w, &err) == kPc_EncodeStatus_OutOfMemory);
  const char *end = ".child.child.v: out of memory"; /* the innermost level sets v */
  size_t n = strlen(err.msg);
  CHECK(strncmp(err.msg, "t.Rec....child.child", 20) == 0 && n > strlen(end) &&
        strcmp(err.msg + n - strlen(end), end) == 0);
  pc_WireWriter_Free(&w);

  pc_Arena_Free(a);
  free(buf);
  pc_Pool_Free(pool);
  return NULL;
}

int main(void) {
  pthread_attr_t attr;
  pthread_t t;
  CHECK(pthread_attr_init(&attr) == 0);
  CHECK(pthread_attr_setstacksize(&attr, STACK_BYTES) == 0);
  CHECK(pthread_create(&t, &attr, run, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  pthread_attr_destroy(&attr);
  return CHECK_DONE();
}
