/* The binary codec of FFI struct messages (protocall_ffi.h): each call
 * puts the body into a scratch message of its type (the type word in front)
 * and runs the core codec (core/wire) on it. */
#include "ffi_codec.h"

#include "wire/decode.h"
#include "wire/encode.h"

#include <string.h>

struct pc_ffi_Codec {
  pc_Alloc *alloc;
  void *ud;
  pc_WireWriter w; /* encode's output, kept between calls */
  pc_Arena *arena; /* unknown fields of the message at hand; reset per call */
  char *scratch;   /* room for the largest message seen ('scratch_size' bytes) */
  size_t scratch_size;
  pc_Error err;
};

size_t pc_ffi_CodecSize(void) {
  return sizeof(pc_ffi_Codec);
}

void pc_ffi_CodecInit(pc_ffi_Codec *c, pc_Alloc *alloc, void *ud) {
  memset(c, 0, sizeof *c);
  c->alloc = alloc;
  c->ud = ud;
  pc_WireWriter_Init(&c->w, alloc, ud);
  pc_Error_Init(&c->err);
}

void pc_ffi_CodecFree(pc_ffi_Codec *c) {
  pc_WireWriter_Free(&c->w);
  pc_Arena_Free(c->arena);
  if (c->scratch != NULL) c->alloc(c->ud, c->scratch, c->scratch_size, 0);
  c->arena = NULL;
  c->scratch = NULL;
  c->scratch_size = 0;
}

/* An empty message of type 'def' in the scratch block (its arena reset);
 * NULL when memory runs out. */
static pc_Message *scratch_message(pc_ffi_Codec *c, const pc_MessageDef *def) {
  if (c->scratch_size < def->size) {
    char *p = c->alloc(c->ud, c->scratch, c->scratch_size, def->size);
    if (p == NULL) return NULL;
    c->scratch = p;
    c->scratch_size = def->size;
  }
  if (c->arena == NULL && (c->arena = pc_Arena_New(c->alloc, c->ud)) == NULL) return NULL;
  pc_Arena_Reset(c->arena);
  pc_Message_Init(def, c->scratch);
  return c->scratch;
}

static void out_of_memory(pc_ffi_Codec *c) {
  pc_Error_Init(&c->err);
  pc_Error_Set(&c->err, "not enough memory");
}

/* Encode buffers above this size are freed after the call. */
#define PC_FFI_ENCODEBUF_KEEP ((size_t)64 * 1024)

/* The bytes of a body of 'def' to copy: 'body_size', at most the message's. */
static size_t body_bytes(const pc_MessageDef *def, size_t body_size) {
  return body_size < def->size - 8 ? body_size : def->size - 8;
}

static const char *ffi_encode(pc_ffi_Codec *c, const void *def_, const void *body, size_t body_size,
                              const char *unknown, size_t unknown_size, int partial, size_t *size) {
  const pc_MessageDef *def = def_;
  pc_Message *msg = scratch_message(c, def);
  if (msg == NULL ||
      (unknown_size > 0 && !pc_Message_AddUnknown(msg, unknown, unknown_size, c->arena))) {
    out_of_memory(c);
    return NULL;
  }
  memcpy((char *)msg + 8, body, body_bytes(def, body_size));
  if (c->w.cap > PC_FFI_ENCODEBUF_KEEP) pc_WireWriter_Free(&c->w);
  pc_WireWriter_Reset(&c->w);
  pc_EncodeOptions opts = {0, partial};
  pc_Error_Init(&c->err);
  if (pc_Encode(msg, def, &opts, &c->w, &c->err) != kPc_EncodeStatus_Ok) return NULL;
  *size = pc_WireWriter_Size(&c->w);
  const char *out = (const char *)pc_WireWriter_Data(&c->w);
  return out != NULL ? out : ""; /* nothing written: no buffer yet */
}

static int ffi_decode(pc_ffi_Codec *c, const void *def_, const char *data, size_t size, int partial,
                      void *body, size_t body_size, const char **unknown, size_t *unknown_size) {
  const pc_MessageDef *def = def_;
  *unknown = NULL;
  *unknown_size = 0;
  pc_Message *msg = scratch_message(c, def);
  if (msg == NULL) {
    out_of_memory(c);
    return 2;
  }
  pc_DecodeOptions opts = {0, 0, partial, 0};
  pc_Error_Init(&c->err);
  pc_DecodeStatus st = pc_Decode(data, size, msg, def, c->arena, &opts, &c->err);
  memcpy(body, (char *)msg + 8, body_bytes(def, body_size));
  if (st == kPc_DecodeStatus_OutOfMemory) {
    out_of_memory(c);
    return 2;
  }
  if (st != kPc_DecodeStatus_Ok) return 1;
  *unknown = pc_Message_GetUnknown(msg, unknown_size);
  return 0;
}

static const char *ffi_error(const pc_ffi_Codec *c) {
  return c->err.msg;
}

const pc_ffi_Api pc_ffi_api = {ffi_encode, ffi_decode, ffi_error};
