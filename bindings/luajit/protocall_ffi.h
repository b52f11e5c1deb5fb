/* The C functions behind FFI struct messages (pc.ffi, lua/protocall/ffi/struct.lua),
 * as LuaJIT's ffi.cdef reads them: the module compiles this file's text in
 * (cmake/embed_lua.cmake) and lua/protocall/ffi/struct.lua feeds it to ffi.cdef;
 * ffi_codec.c implements it. No preprocessor lines (ffi.cdef takes none): a
 * C file includes <stddef.h> before it. The functions are reached through
 * the function pointers of a pc_ffi_Api (core.ffi_codec() gives its
 * address), since the module exports only its luaopen_* functions.
 *
 * An FFI struct message is the layout of a pc_MessageDef (core/message/
 * message.h) without its first 8 bytes (the type word): "the body", the
 * 'body_size' bytes from offset 8 of a message of that type (up to the end
 * of its last slot: presence bits, oneof case slots and field slots at
 * their offsets minus 8). Only types of numeric, bool and enum fields (no
 * strings, sub-messages, repeated fields, maps or extension ranges) have
 * one. A 'body_size' above def->size - 8 is taken as def->size - 8. */
typedef struct pc_ffi_Codec pc_ffi_Codec; /* per lua_State: buffers reused by every call */

typedef struct pc_ffi_Api {
  /* The wire encoding (protobuf encoding spec: fields in field-number
   * order, then the unknown bytes verbatim) of the body at 'body' of a
   * message of type 'def' (a const pc_MessageDef *) whose unknown fields
   * are the 'unknown_size' bytes at 'unknown' (NULL when none). Returns
   * the bytes, valid until the next call on 'c', with their count in
   * '*size'; NULL on failure (a proto2 required field unset, unless
   * 'partial'; memory): error() says why. */
  const char *(*encode)(pc_ffi_Codec *c, const void *def, const void *body, size_t body_size,
                        const char *unknown, size_t unknown_size, int partial, size_t *size);
  /* Decodes the 'size' bytes at 'data' as a message of type 'def' into the
   * zeroed body at 'body' ('body_size' bytes). Returns 0 on success, with
   * the unknown fields' bytes in '*unknown' / '*unknown_size' (NULL and 0
   * when none; valid until the next call on 'c'); 1 for bad input (the body
   * holds what was decoded before the error; error() names the type, the
   * reason and the byte offset, as pc.decode), 2 when memory runs out. */
  int (*decode)(pc_ffi_Codec *c, const void *def, const char *data, size_t size, int partial,
                void *body, size_t body_size, const char **unknown, size_t *unknown_size);
  /* The reason of the last failure on 'c' (NUL-terminated). */
  const char *(*error)(const pc_ffi_Codec *c);
} pc_ffi_Api;
