/* libFuzzer target for the text format parser: text -> message -> wire ->
 * message. The first input byte picks the type (fz.P2, proto2 with groups
 * and extensions' shapes, or fz3.P3, proto3; core/wire/fuzz/codec_fuzz.proto);
 * the rest is text. Whatever parses must encode, decode again and re-encode
 * to the same bytes; a failure must say why. Anything else aborts. */
#include "base/arena.h"
#include "text/text.h"
#include "wire/decode.h"
#include "wire/descriptor_set.h"
#include "wire/encode.h"

#include "wire/fuzz/codec_fuzz_pb.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static pc_Pool *fuzz_pool(void) {
  static pc_Pool *pool;
  if (pool == NULL) {
    size_t first;
    pool = pc_Pool_New(NULL, NULL);
    if (pool == NULL ||
        pc_Pool_AddDescriptorSet(pool, (const char *)kFuzzPb, sizeof kFuzzPb, &first, NULL) != 2)
      abort();
  }
  return pool;
}

static void encode_or_die(const pc_Message *msg, const pc_MessageDef *m, pc_WireWriter *w) {
  pc_EncodeOptions o = {1};
  if (pc_Encode(msg, m, &o, w, NULL) != kPc_EncodeStatus_Ok) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1) return 0;
  const pc_MessageDef *m = pc_Pool_FindMessage(fuzz_pool(), data[0] & 1 ? "fz3.P3" : "fz.P2");
  if (m == NULL) abort();
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_Message *msg = a != NULL ? pc_Message_New(m, a) : NULL;
  if (msg == NULL) abort();
  pc_Error err;
  pc_Error_Init(&err);
  pc_TextStatus st = pc_Text_Parse((const char *)data + 1, size - 1, msg, m, a, NULL, &err);
  if (st == kPc_TextStatus_Ok) {
    pc_WireWriter w1, w2;
    pc_WireWriter_Init(&w1, NULL, NULL);
    pc_WireWriter_Init(&w2, NULL, NULL);
    encode_or_die(msg, m, &w1);
    pc_Message *again = pc_Message_New(m, a);
    if (again == NULL || pc_Decode((const char *)pc_WireWriter_Data(&w1), pc_WireWriter_Size(&w1),
                                   again, m, a, NULL, NULL) != kPc_DecodeStatus_Ok)
      abort();
    encode_or_die(again, m, &w2);
    if (pc_WireWriter_Size(&w1) != pc_WireWriter_Size(&w2) ||
        (pc_WireWriter_Size(&w1) > 0 &&
         memcmp(pc_WireWriter_Data(&w1), pc_WireWriter_Data(&w2), pc_WireWriter_Size(&w1)) != 0))
      abort();
    pc_WireWriter_Free(&w1);
    pc_WireWriter_Free(&w2);
  } else if (st != kPc_TextStatus_Invalid || !err.set) {
    abort();
  }
  pc_Arena_Free(a);
  return 0;
}
