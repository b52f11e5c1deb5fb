/* libFuzzer target for the JSON codec: JSON -> message -> JSON -> message.
 *
 * The input is JSON for jf.J (json_fuzz.proto: every field kind and the
 * well-known types). Whatever reads must write (everything a read accepts
 * is expressible), the written JSON must read again, and writing that
 * message must give the same text byte for byte; indented output must read
 * to the same message too. Anything else aborts, which is what libFuzzer
 * reports. Hostile input may only fail cleanly. */
#include "base/arena.h"
#include "json/json.h"
#include "wire/descriptor_set.h"

#include "json/fuzz/json_fuzz_pb.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const pc_MessageDef *fuzz_type(void) {
  static const pc_MessageDef *m;
  if (m == NULL) {
    size_t first;
    pc_Pool *pool = pc_Pool_New(NULL, NULL);
    if (pool == NULL || pc_Pool_AddDescriptorSet(pool, (const char *)kJsonFuzzPb,
                                                 sizeof kJsonFuzzPb, &first, NULL) <= 0)
      abort();
    m = pc_Pool_FindMessage(pool, "jf.J");
    if (m == NULL) abort();
  }
  return m;
}

/* Writes 'msg' into 'out' (emptied first) or aborts. */
static void write_or_die(const pc_Message *msg, const pc_MessageDef *m, int indent,
                         pc_JsonBuf *out) {
  pc_JsonWriteOptions o;
  memset(&o, 0, sizeof o);
  o.indent = indent;
  out->size = 0;
  if (pc_Json_Write(msg, m, &o, out, NULL) != kPc_JsonStatus_Ok) abort();
}

static pc_Message *read_or_die(const pc_JsonBuf *in, const pc_MessageDef *m, pc_Arena *a) {
  pc_Message *msg = pc_Message_New(m, a);
  if (msg == NULL || pc_Json_Read(in->data, in->size, msg, m, a, NULL, NULL) != kPc_JsonStatus_Ok)
    abort();
  return msg;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const pc_MessageDef *m = fuzz_type();
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_Message *msg = a != NULL ? pc_Message_New(m, a) : NULL;
  if (msg == NULL) abort();
  pc_Error err;
  pc_Error_Init(&err);
  pc_JsonStatus st = pc_Json_Read((const char *)data, size, msg, m, a, NULL, &err);
  if (st == kPc_JsonStatus_OutOfMemory) abort();
  if (st == kPc_JsonStatus_Ok) {
    pc_JsonBuf j1, j2, j3;
    pc_JsonBuf_Init(&j1, NULL, NULL);
    pc_JsonBuf_Init(&j2, NULL, NULL);
    pc_JsonBuf_Init(&j3, NULL, NULL);
    write_or_die(msg, m, 0, &j1);
    write_or_die(read_or_die(&j1, m, a), m, 0, &j2);
    if (j1.size != j2.size || (j1.size > 0 && memcmp(j1.data, j2.data, j1.size) != 0)) abort();
    write_or_die(msg, m, 2, &j3);
    write_or_die(read_or_die(&j3, m, a), m, 0, &j2);
    if (j1.size != j2.size || (j1.size > 0 && memcmp(j1.data, j2.data, j1.size) != 0)) abort();
    pc_JsonBuf_Free(&j1);
    pc_JsonBuf_Free(&j2);
    pc_JsonBuf_Free(&j3);
  } else if (!err.set) {
    abort(); /* a failure always says why */
  }
  pc_Arena_Free(a);
  return 0;
}
