/* libFuzzer target for the .proto parser and resolver: the input is the
 * text of "fuzz.proto", loaded with its imports (only the built-in
 * well-known types exist, so options and extensions of descriptor.proto are
 * reachable). Must never crash, leak, hang or read out of bounds; errors
 * are expected. Built with PROTOCALL_FUZZ=ON (see CMakeLists.txt). */
#include "base/arena.h"
#include "compiler/load.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct {
  const uint8_t *data;
  size_t size;
} Input;

static int source(void *ud, const char *name, const char **src, size_t *len, pc_Error *err) {
  const Input *in = ud;
  (void)err;
  if (name[0] != 'f' || name[1] != 'u' || name[2] != 'z' || name[3] != 'z' || name[4] != '.')
    return 0;
  *src = (const char *)in->data;
  *len = in->size;
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Input in = {data, size};
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  if (a == NULL) return 0;
  pc_ProtoSet set = {0};
  pc_Error err;
  pc_Error_Init(&err);
  pc_LoadProto(a, &set, "fuzz.proto", source, &in, &err);
  pc_Arena_Free(a);
  return 0;
}
