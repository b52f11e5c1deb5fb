/* The C side of protocall_ffi.h: how the Lua binding (bindings/lua/lpc_ffi.c)
 * makes a pc_ffi_Codec and reaches the functions. */
#ifndef PC_FFI_CODEC_H
#define PC_FFI_CODEC_H

#include "base/arena.h"

#include <stddef.h>

#include "protocall_ffi.h"

/* Bytes a pc_ffi_Codec takes (the caller provides them, e.g. a userdata). */
size_t pc_ffi_CodecSize(void);

/* Readies the pc_ffi_CodecSize() bytes at 'c'; it allocates through
 * 'alloc' / 'ud' (lua_Alloc's contract) when first used. */
void pc_ffi_CodecInit(pc_ffi_Codec *c, pc_Alloc *alloc, void *ud);

/* Frees what 'c' allocated; it stays usable (empty). */
void pc_ffi_CodecFree(pc_ffi_Codec *c);

/* The functions, for ffi.cast("const pc_ffi_Api *", ...). */
extern const pc_ffi_Api pc_ffi_api;

#endif
