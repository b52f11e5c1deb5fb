/* protocall for C hosts that embed Lua 5.4 (doc/c-hosts.md).
 *
 * Link: the static library libprotocall.a (the core and the Lua binding,
 * built by CMake as target protocall_static), liblua5.4, libnghttp2,
 * c-ares, OpenSSL, zlib, RE2, the C++ runtime and libm (doc/c-hosts.md has
 * the command line, pkg-config and CMake's find_package); include this header (bindings/lua/). examples/host.c is a complete
 * host, built and run by ctest.
 *
 * Open the module in a state with
 *   luaL_requiref(L, "protocall", luaopen_protocall, 0);
 * or put luaopen_protocall in package.preload["protocall"] so scripts can
 * `require "protocall"`. No file on disk is needed: the Lua layer (the files
 * under lua/protocall/) is built into the library.
 *
 * No global state: everything a state needs lives in its registry, so two
 * lua_States in one process are independent. The only thing they may share
 * is a FROZEN pool the host owns (see "Pools" below).
 *
 * Conventions: sizes are bytes, times are seconds (double). Strings taken
 * with a length may hold NUL bytes; strings without one are NUL-terminated.
 * Functions taking 'err' and 'errsize' write a NUL-terminated message there
 * on failure ('err' may be NULL), as the Lua API words it
 * ("a.proto:2:25: Expected \";\".", "demo.User.id: truncated input at
 * offset 1"). Functions whose name has no lua_State never raise and never
 * call Lua; functions taking a lua_State raise Lua errors as Lua's own API
 * does (out of memory, bad arguments), so call them under lua_pcall when
 * that matters. */
#ifndef PROTOCALL_H
#define PROTOCALL_H

/* C linkage for C++ hosts, lua.h's declarations included (lua.hpp's way). */
#ifdef __cplusplus
extern "C" {
#endif

#include <lua.h>
#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define PROTOCALL_API __declspec(dllexport)
#else
#define PROTOCALL_API __attribute__((visibility("default")))
#endif

#define PROTOCALL_VERSION "0.1.0"

/* The core's types (core/schema/def.h, core/message/message.h, core/base/arena.h), opaque here.
 * A host that needs more than this header gives may include those headers
 * too (the same types) and call the core directly; that interface is the
 * core's and less stable than this one. */
typedef struct pc_Pool pc_Pool;             /* a set of schemas */
typedef struct pc_MessageDef pc_MessageDef; /* a message type of a pool */
typedef struct pc_Arena pc_Arena;           /* memory of C-side messages */
typedef void pc_Message;                    /* a message instance */

/* ---------------------------------------------------------------------------
 * Opening the module */

/* -- protocall = require "protocall"
 * Opens the whole module: registers the built-in Lua layer in
 * package.preload (for the submodules a host has not preloaded itself) and
 * runs its init chunk. Returns 1 (the module table). Raises on a Lua error
 * in the layer, which would be a build fault. */
PROTOCALL_API int luaopen_protocall(lua_State *L);

/* -- core = require "protocall.core"
 * Opens only the C part (what lua/protocall/init.lua requires). Returns 1. */
PROTOCALL_API int luaopen_protocall_core(lua_State *L);

/* ---------------------------------------------------------------------------
 * Pools: schemas loaded from C
 *
 * A pool made here is the host's: it lives until protocall_pool_free, and
 * protocall_pushpool hands it to Lua states without giving it away. One
 * pool may be SHARED by several lua_States, in one thread or several at
 * once, once it is frozen (protocall_pool_freeze): a frozen pool never
 * changes, every read of it is a read of immutable memory, and each state
 * keeps its own Lua objects for it (its Pool userdata, and one Type per
 * message type, cached per (state, type)). Messages live in the state that
 * made them. The host must keep the pool alive until every state it was
 * pushed into is closed (lua_close), then free it; no reference counting.
 * Loading into a pool (from C, or pool:load in Lua) is refused once it is
 * frozen; an unfrozen host pool must be used by one state / thread at a
 * time. */

/* A new empty pool (malloc-backed), or NULL when out of memory. */
PROTOCALL_API pc_Pool *protocall_pool_new(void);

/* Frees the pool and every type in it. NULL allowed. See above for when. */
PROTOCALL_API void protocall_pool_free(pc_Pool *pool);

/* Loads .proto text and what it imports into 'pool'. 'name' is the file's
 * name (in errors and imports, "pkg/a.proto"); 'source' its 'len' bytes of
 * text, or NULL to read the file 'name' from 'import_paths'. Imports are
 * read from 'import_paths' (a NULL-terminated list of folders, NULL for
 * none), in order; the well-known types google/protobuf/ *.proto are built
 * in. Files the pool holds already, 'name' included, are reused, not read
 * again (so loading a name twice keeps the first text). Returns 1, or 0
 * with the message in 'err': parse and resolve errors as
 * "file.proto:line:column: what is wrong" (nothing is added), "b.proto:
 * File not found.", "<name>: pool is frozen", or a pool validation error
 * such as a name another file defined (the files added before the one that
 * failed stay). */
PROTOCALL_API int protocall_pool_load(pc_Pool *pool, const char *name, const char *source,
                                      size_t len, const char *const *import_paths, char *err,
                                      size_t errsize);

/* Loads a serialized google.protobuf.FileDescriptorSet ('len' bytes, as
 * `protoc --include_imports -o` writes) into 'pool'; files it holds by name
 * already are skipped. Returns the number of files added, or -1 with the
 * message in 'err'. */
PROTOCALL_API long protocall_pool_load_descriptor_set(pc_Pool *pool, const char *bytes, size_t len,
                                                      char *err, size_t errsize);

/* Refuses further loads from now on (idempotent); required before the
 * pool is shared by several states. */
PROTOCALL_API void protocall_pool_freeze(pc_Pool *pool);

/* The message type "pkg.Name" (no leading dot) of 'pool', or NULL. Valid
 * as long as the pool. */
PROTOCALL_API const pc_MessageDef *protocall_pool_type(const pc_Pool *pool, const char *full_name);

/* The full name of a type ("pkg.Name"); valid as long as its pool. */
PROTOCALL_API const char *protocall_type_name(const pc_MessageDef *type);

/* ---------------------------------------------------------------------------
 * Messages in C
 *
 * A C-side message and everything it holds live in a pc_Arena, freed at
 * once with protocall_arena_free (the message is never freed alone).
 * Values written are copied into the arena. */

/* A new arena (malloc-backed), or NULL when out of memory. */
PROTOCALL_API pc_Arena *protocall_arena_new(void);

/* Frees the arena and every message in it. NULL allowed. */
PROTOCALL_API void protocall_arena_free(pc_Arena *arena);

/* A new empty message of 'type' in 'arena', or NULL when out of memory. */
PROTOCALL_API pc_Message *protocall_message_new(const pc_MessageDef *type, pc_Arena *arena);

/* Results of the field accessors below. */
enum {
  PROTOCALL_OK = 0,
  PROTOCALL_NO_FIELD = -1,      /* the type has no field of that name */
  PROTOCALL_WRONG_TYPE = -2,    /* the field's type does not take that value
                                   (maps take the protocall_map_* functions) */
  PROTOCALL_OUT_OF_RANGE = -3,  /* an integer outside the field's range, or
                                   an enum number the (closed) enum lacks */
  PROTOCALL_OUT_OF_MEMORY = -4, /* the arena's allocation failed */
  PROTOCALL_NOT_SET = -5        /* get: a message field that is not set */
};

/* Setters by field name. On a repeated field they APPEND one element.
 *   set_integer: int32, int64, uint32, uint64 (any int64: two's complement,
 *                as Lua integers), sint*, fixed*, sfixed*, enum, bool
 *                (0 or 1); range-checked for 32-bit fields.
 *   set_number:  float, double.
 *   set_string:  string and bytes, copied into 'arena' (UTF-8 is not
 *                checked here: protocall_encode refuses a proto3 string
 *                that is not, as pc.encode does).
 * Return PROTOCALL_OK or a negative result above. */
PROTOCALL_API int protocall_set_integer(pc_Message *msg, const pc_MessageDef *type,
                                        const char *field, int64_t value, pc_Arena *arena);
PROTOCALL_API int protocall_set_number(pc_Message *msg, const pc_MessageDef *type,
                                       const char *field, double value, pc_Arena *arena);
PROTOCALL_API int protocall_set_string(pc_Message *msg, const pc_MessageDef *type,
                                       const char *field, const char *data, size_t len,
                                       pc_Arena *arena);

/* The sub-message of a message field to fill in: a singular field's (made
 * empty in 'arena' when unset), or, on a repeated field, a new element
 * appended. '*sub_type' (may be NULL) receives its type. NULL when there
 * is no such message field or memory runs out. */
PROTOCALL_API pc_Message *protocall_mutable_message(pc_Message *msg, const pc_MessageDef *type,
                                                    const char *field, pc_Arena *arena,
                                                    const pc_MessageDef **sub_type);

/* Getters by field name of singular fields (an unset field reads its
 * default, as in Lua): the same type groups as the setters; get_string
 * points into the message's memory; get_message gives PROTOCALL_NOT_SET
 * for an unset message field. Return PROTOCALL_OK or a negative result. */
PROTOCALL_API int protocall_get_integer(const pc_Message *msg, const pc_MessageDef *type,
                                        const char *field, int64_t *value);
PROTOCALL_API int protocall_get_number(const pc_Message *msg, const pc_MessageDef *type,
                                       const char *field, double *value);
PROTOCALL_API int protocall_get_string(const pc_Message *msg, const pc_MessageDef *type,
                                       const char *field, const char **data, size_t *len);
PROTOCALL_API int protocall_get_message(const pc_Message *msg, const pc_MessageDef *type,
                                        const char *field, const pc_Message **sub,
                                        const pc_MessageDef **sub_type);

/* Repeated fields: the number of elements of a repeated (or map) field,
 * and element 'index' (0-based) of a repeated message field. Return
 * PROTOCALL_OK, or PROTOCALL_WRONG_TYPE for a singular field (for
 * get_message_at: a field that is not repeated messages) and
 * PROTOCALL_OUT_OF_RANGE for an index past the end. */
PROTOCALL_API int protocall_get_size(const pc_Message *msg, const pc_MessageDef *type,
                                     const char *field, size_t *size);
PROTOCALL_API int protocall_get_message_at(const pc_Message *msg, const pc_MessageDef *type,
                                           const char *field, size_t index, const pc_Message **sub,
                                           const pc_MessageDef **sub_type);

/* One value of any field kind, for repeated elements and map keys and
 * values: the member the field's type names is the one read or written.
 *   integer       int32, int64, uint32, uint64 (two's complement), sint*,
 *                 fixed*, sfixed*, enum, bool (0 or 1)
 *   number        float, double
 *   data, len     string, bytes (reading: pointing into the message's memory)
 *   message, message_type   message values (reading: the element; writing:
 *                 a message of that type, deep-copied in) */
typedef struct {
  int64_t integer;
  double number;
  const char *data;
  size_t len;
  const pc_Message *message;
  const pc_MessageDef *message_type;
} protocall_Value;

/* Element 'index' (0-based) of a repeated field of any kind into '*value'.
 * PROTOCALL_WRONG_TYPE for a singular or map field, PROTOCALL_OUT_OF_RANGE
 * past the end. (Append with the setters above.) */
PROTOCALL_API int protocall_get_at(const pc_Message *msg, const pc_MessageDef *type,
                                   const char *field, size_t index, protocall_Value *value);

/* Maps by field name ('field' a map field, else PROTOCALL_WRONG_TYPE).
 *   map_entry   the key and value (either may be NULL) of entry 'index'
 *               (0-based, insertion order; protocall_get_size counts them):
 *               PROTOCALL_OUT_OF_RANGE past the end.
 *   map_get     the value under 'key': PROTOCALL_NOT_SET when absent.
 *   map_set     stores 'value' under 'key' (replacing), copying strings and
 *               messages into 'arena'; keys and values range-checked as the
 *               setters above.
 *   map_mutable_message   the message value under 'key' to fill in (made
 *               empty when absent); NULL for a map without message values
 *               or when memory runs out.
 *   map_delete  removes 'key': PROTOCALL_NOT_SET when it was absent.
 * Keys read 'integer' or 'data'/'len' by the key type. Return PROTOCALL_OK
 * or a negative result. */
PROTOCALL_API int protocall_map_entry(const pc_Message *msg, const pc_MessageDef *type,
                                      const char *field, size_t index, protocall_Value *key,
                                      protocall_Value *value);
PROTOCALL_API int protocall_map_get(const pc_Message *msg, const pc_MessageDef *type,
                                    const char *field, const protocall_Value *key,
                                    protocall_Value *value);
PROTOCALL_API int protocall_map_set(pc_Message *msg, const pc_MessageDef *type, const char *field,
                                    const protocall_Value *key, const protocall_Value *value,
                                    pc_Arena *arena);
PROTOCALL_API pc_Message *protocall_map_mutable_message(pc_Message *msg, const pc_MessageDef *type,
                                                        const char *field,
                                                        const protocall_Value *key, pc_Arena *arena,
                                                        const pc_MessageDef **sub_type);
PROTOCALL_API int protocall_map_delete(pc_Message *msg, const pc_MessageDef *type,
                                       const char *field, const protocall_Value *key);

/* Serializes 'msg' (of 'type'); the bytes are allocated in 'arena' and
 * '*len' receives their number. 'deterministic' non-zero sorts map entries
 * by key (as pc.encode(m, {deterministic = true})). NULL with the message
 * in 'err' when memory runs out, nesting is too deep, a proto3 string is
 * not UTF-8 ("demo.Route.tags[2]: invalid UTF-8 at byte 3", its place from
 * the root, an index counted from 0, and its first bad byte, 1-based) or a
 * proto2 required field is unset ("missing required fields: r.Req.name",
 * as pc.encode). */
PROTOCALL_API const char *protocall_encode(const pc_Message *msg, const pc_MessageDef *type,
                                           int deterministic, pc_Arena *arena, size_t *len,
                                           char *err, size_t errsize);

/* Parses 'len' bytes as a message of 'type' into a new message in 'arena'
 * (bytes copied; the input may go once this returns). NULL with the
 * message in 'err' for malformed input ("<field>: <reason> at offset <n>"),
 * input lacking a proto2 required field ("missing required fields: ...")
 * or when memory runs out. */
PROTOCALL_API pc_Message *protocall_decode(const pc_MessageDef *type, const char *bytes, size_t len,
                                           pc_Arena *arena, char *err, size_t errsize);

/* A deep copy of 'msg' in 'arena', or NULL when memory runs out. */
PROTOCALL_API pc_Message *protocall_clone(const pc_Message *msg, const pc_MessageDef *type,
                                          pc_Arena *arena);

/* ---------------------------------------------------------------------------
 * Between C and a lua_State */

/* Pushes the state's Pool for the host's 'pool' (the same Lua value on
 * every call while the state holds it): scripts use its methods
 * (pool:type("pkg.Name"), pool:file_descriptor(name), ...) and pass it as
 * `pool =` where the API takes one (pc.client, pc.server, pc.load, ...).
 * The state never frees the pool; see "Pools" for sharing and lifetime. */
PROTOCALL_API void protocall_pushpool(lua_State *L, pc_Pool *pool);

/* Pushes a Lua message that is a deep copy of 'msg' (of 'type'); the copy
 * belongs to the state, 'msg' stays the caller's. 'type' must come from a
 * pool this state knows: one pushed with protocall_pushpool (do that
 * first) or one the state made itself. Raises otherwise ("protocall:
 * <type>: its pool is not known to this state"), or when memory runs
 * out. */
PROTOCALL_API void protocall_pushmessage(lua_State *L, const pc_MessageDef *type,
                                         const pc_Message *msg);

/* The message at stack index 'idx' and its type ('*type' may be NULL), or
 * NULL when the value is not a protocall message. The message is the Lua
 * value's memory: read it while the value is alive and unchanged, or
 * protocall_clone it into an arena of the host's. Never raises. */
PROTOCALL_API const pc_Message *protocall_tomessage(lua_State *L, int idx,
                                                    const pc_MessageDef **type);

/* Makes the host's 'pool' the state's default pool: the one pc.type,
 * pc.message, pc.enum, pc.extend, pc.fields, pc.load, pc.load_file,
 * pc.service, pc.file, pc.file_descriptor, pc.load_descriptor_set,
 * pc.server and pc.client use when no `pool =` is given (as
 * pc.set_default_pool(pool) in Lua). Call it before scripts copy those
 * functions into locals. Requires the module opened in 'L'
 * (luaopen_protocall); raises otherwise. The state never frees the pool;
 * see "Pools" for sharing and lifetime. */
PROTOCALL_API void protocall_setdefaultpool(lua_State *L, pc_Pool *pool);

/* ---------------------------------------------------------------------------
 * Host transports: RPCs through the host's own network stack
 *
 * A host transport is a set of C functions doing calls; it is pushed as a
 * Lua value that works as `pc.client(service, {transport = t, ...})` (the
 * transport shape of lua/protocall/rpc/inproc.lua: unary, server_stream,
 * stream), so the client's retry and timeout policies apply around it,
 * once per attempt. A host gives either one unary function
 * (protocall_pushtransport, the first form) or a protocall_Transport
 * (protocall_pushhosttransport): a unary function and/or the stream
 * functions start / send / close_send / recv / finish, which serve every
 * call shape (unary too, when 'unary' is NULL).
 *
 * ABI rules (this header's structs across versions of a shared
 * libprotocall.so):
 *   - PROTOCALL_ABI counts the versions of these structs; it is 2 here
 *     (1: protocall_pushtransport and protocall_Request up to
 *     'compression').
 *   - Fields are only ever appended, never removed, reordered or resized.
 *   - A struct the HOST fills for protocall (protocall_Transport) starts
 *     with 'size', set by the host to sizeof the struct as it was
 *     compiled; protocall reads the fields within 'size' and takes the
 *     rest as NULL / 0, so a host built against an older header keeps
 *     working with a newer library.
 *   - A struct PROTOCALL fills or allocates for the host (protocall_Request,
 *     protocall_Status) is always protocall's newest, zeroed first; a host
 *     reads and writes only the fields its header knows.
 *   - Pointers a host writes into a protocall_Status, and the bytes a recv
 *     returns, need to stay valid only until the host function returns:
 *     protocall copies them before doing anything else. */

#define PROTOCALL_ABI 2

typedef struct {
  const char *key, *value; /* "x-trace", "abc"; '-bin' values are raw bytes */
  size_t key_len, value_len;
} protocall_Metadata;

/* What a host function reports beyond its return code (ABI 2). protocall
 * zeroes it before each call; the host sets what it has:
 *   message         the status message (for a failure; message_len bytes)
 *   details         the status details: google.rpc.Status bytes, as a
 *                   server sends them in grpc-status-details-bin (raised as
 *                   the pc.Error's `details`)
 *   headers         response headers (kept from the first host function
 *                   that reports any; call:headers() in Lua)
 *   trailers        trailers (at the end of the call, OK or not:
 *                   call:trailers() in Lua, the pc.Error's `metadata`)
 *   has_retry_delay, retry_delay   the server's pushback
 *                   (grpc-retry-pushback-ms) in seconds: >= 0 retries
 *                   after that long (never sooner than the retry policy's
 *                   min_pushback), negative asks not to retry at all. */
typedef struct {
  const char *message;
  size_t message_len;
  const char *details;
  size_t details_len;
  const protocall_Metadata *headers;
  size_t header_count;
  const protocall_Metadata *trailers;
  size_t trailer_count;
  int has_retry_delay;
  double retry_delay;
} protocall_Status;

typedef struct {
  const char *path;    /* "/pkg.Service/Method" */
  const char *request; /* the serialized request message; NULL in 'start' */
  size_t request_len;
  double timeout;                     /* seconds this attempt may take; negative: no timeout */
  const protocall_Metadata *metadata; /* the call's pairs, in order */
  size_t metadata_count;
  const char *compression;  /* "gzip", or NULL for none */
  protocall_Status *status; /* ABI 2: where the host reports trailers etc. (never NULL) */
} protocall_Request;

/* Performs one unary call; everything in 'req' is valid until it returns.
 * On success pushes the response bytes (one Lua string) and returns
 * PROTOCALL_OK. On failure returns the gRPC status code (1..16, say 14 for
 * UNAVAILABLE) and pushes the status message (a string; nothing pushed
 * reads as ""; req->status->message, when set, wins); the call then fails
 * with pc.Error{code = <name>, message = <message>, details =, metadata =
 * <trailers>, headers =, retry_delay =} from req->status, which the retry
 * policy sees (UNAVAILABLE is retried by default, a pushback replaces the
 * backoff). It may also raise a Lua error (lua_error), which reaches the
 * caller as is. It may block (run the host's event loop until the response
 * is there); it must not yield. 'ud' is the value given to
 * protocall_pushtransport (the Transport's 'ud'). */
typedef int protocall_UnaryFn(lua_State *L, void *ud, const protocall_Request *req);

/* Starts a call of any shape (server streaming, client streaming, bidi;
 * unary too when the transport has no 'unary'): 'req' as for unary with
 * req->request NULL (the requests come through 'send'). Returns
 * PROTOCALL_OK with '*call' set to the host's handle for the call (any
 * value; protocall passes it back and never reads it), or a status code
 * 1..16 with req->status filled: the call failed before it started (then
 * 'finish' is not called). */
typedef int protocall_StartFn(lua_State *L, void *ud, const protocall_Request *req, void **call);

/* Sends one request message ('len' bytes, valid until it returns). Returns
 * PROTOCALL_OK, or a status code 1..16 with 'st' filled: the call ended
 * with that status (the server failed it; its trailers in 'st'). */
typedef int protocall_SendFn(lua_State *L, void *ud, void *call, const char *bytes, size_t len,
                             protocall_Status *st);

/* No more request messages (half-close). Returns as 'send'. Called at most
 * once per call. */
typedef int protocall_CloseSendFn(lua_State *L, void *ud, void *call, protocall_Status *st);

/* The next response message, waiting for it: PROTOCALL_OK with '*bytes' /
 * '*len' set to it (valid until the next function called on this call),
 * or PROTOCALL_OK with '*bytes' NULL when the call ended OK (trailers in
 * 'st'), or a status code 1..16 with 'st' filled: the call failed. After
 * the end (either way) protocall calls recv no more. */
typedef int protocall_RecvFn(lua_State *L, void *ud, void *call, const char **bytes, size_t *len,
                             protocall_Status *st);

/* start, send, close_send and recv may block (the host's loop running until
 * they can answer) but must not yield; they may raise a Lua error, which
 * reaches the caller as is (after send, close_send or recv raised, the
 * call is finished later with 'cancel' set; a start that raised started
 * nothing, so it frees what it made first). */

/* protocall is done with 'call' (started with PROTOCALL_OK): called once,
 * when the Lua call object is closed or collected, a stream loop ends or
 * is left early, or the state is closed. 'cancel' is non-zero when the
 * call had not ended (recv never reported its end): the host cancels it
 * (an HTTP/2 RST_STREAM CANCEL; the server sees CANCELLED). Then it frees
 * what it keeps for the call. Must not raise or call Lua. */
typedef void protocall_FinishFn(void *ud, void *call, int cancel);

/* Called with 'ud' once the transport value is collected (or the state
 * closed), after every 'finish'. */
typedef void protocall_ReleaseFn(void *ud);

/* A host transport's functions (ABI 2; see the rules above). */
typedef struct {
  size_t size;                       /* sizeof(protocall_Transport), as the host is compiled */
  void *ud;                          /* passed to every function */
  protocall_ReleaseFn *release;      /* may be NULL */
  protocall_UnaryFn *unary;          /* may be NULL when 'start' is set */
  protocall_StartFn *start;          /* NULL: streaming calls fail UNIMPLEMENTED */
  protocall_SendFn *send;            /* required with 'start' */
  protocall_CloseSendFn *close_send; /* required with 'start' */
  protocall_RecvFn *recv;            /* required with 'start' */
  protocall_FinishFn *finish;        /* required with 'start' */
} protocall_Transport;

/* Pushes a transport (a Lua value) calling 'unary'; 'release' (may be
 * NULL) is called with 'ud' when it is collected. Streaming methods through
 * it fail with UNIMPLEMENTED. The same as protocall_pushhosttransport with
 * only 'unary', 'release' and 'ud' set. Requires the module opened in 'L'
 * (luaopen_protocall); raises otherwise, or when out of memory (then
 * 'release' is not called). */
PROTOCALL_API void protocall_pushtransport(lua_State *L, protocall_UnaryFn *unary,
                                           protocall_ReleaseFn *release, void *ud);

/* Pushes a transport (a Lua value) calling the functions of '*t' (copied:
 * 't' may go once this returns). Raises "protocall_pushhosttransport: ..."
 * when t->size is below the ABI 1 fields (size, ud, release, unary), when
 * it has neither 'unary' nor 'start', or 'start' without all of send,
 * close_send, recv and finish; when the module is not opened, or out of
 * memory (then 'release' is not called). In Lua: transport:unary(path,
 * bytes, settings), transport:server_stream(path, bytes, settings) (an
 * iterator; its fourth value the call, closing it cancels), and
 * transport:stream(path, settings) -> call with send, close_send, recv,
 * close_and_recv, headers, trailers, cancel, close (as pc.grpc's,
 * lua/protocall/transport/grpc.lua). */
PROTOCALL_API void protocall_pushhosttransport(lua_State *L, const protocall_Transport *t);

/* ---------------------------------------------------------------------------
 * Host I/O drivers: pc.grpc's connections over the host's sockets
 *
 * Where a host transport replaces the whole call, a driver replaces only
 * the sockets: pc.grpc keeps HTTP/2, gRPC framing, several connections,
 * GOAWAY, deadlines and backoff, and moves the bytes through these
 * functions (the Lua form, a table shaped like an OpenResty cosocket, is in
 * doc/guide.md "Host I/O drivers"). Push one with protocall_pushdriver and give it to
 * `pc.grpc(target, {driver = d})`. The functions may block (the host's
 * loop running until they can answer) but must not yield (a driver that
 * yields is written in Lua), never raise and never call Lua. Errors go to
 * 'err' ('errsize' bytes, NUL-terminated), which the calls on the
 * connection fail with (UNAVAILABLE). Times are seconds. The struct
 * follows the ABI rules above (it starts with 'size'). */

typedef struct {
  int tls;                 /* 0 from pc.grpc: TLS runs in protocall over the driver's bytes */
  const char *server_name; /* the name TLS verifies and sends */
  int verify;              /* 0: the pc.grpc option insecure = true */
  const char *ca_file, *cert_file, *key_file; /* the pc.grpc options, or NULL */
  double timeout;                             /* seconds the connect may take */
} protocall_DriverConnect;

/* Connects to 'host' ('port' 1..65535): 0 with '*sock' set (any value,
 * passed back), or -1 with 'err' set. */
typedef int protocall_DriverConnectFn(void *ud, const char *host, int port,
                                      const protocall_DriverConnect *o, void **sock, char *err,
                                      size_t errsize);

/* Sends up to 'len' bytes: how many it took (0..len; the rest comes
 * again), or -1 with 'err' set. */
typedef long protocall_DriverSendFn(void *ud, void *sock, const char *bytes, size_t len, char *err,
                                    size_t errsize);

/* Receives what is there, at most 'max' bytes into 'buf', waiting at most
 * the read timeout: the count (> 0), 0 when nothing came in time, -1 when
 * the peer closed the connection, -2 on an error ('err' set). */
typedef long protocall_DriverReceiveFn(void *ud, void *sock, char *buf, size_t max, char *err,
                                       size_t errsize);

/* The timeouts of the later functions on 'sock', in seconds. */
typedef void protocall_DriverTimeoutsFn(void *ud, void *sock, double connect, double send,
                                        double read);

/* TLS on a connected 'sock' (ALPN h2 required): 0, or -1 with 'err'. */
typedef int protocall_DriverHandshakeFn(void *ud, void *sock, const char *server_name, int verify,
                                        char *err, size_t errsize);

/* Closes 'sock' and frees what the driver keeps for it; called once. */
typedef void protocall_DriverCloseFn(void *ud, void *sock);

typedef struct {
  size_t size;                        /* sizeof(protocall_Driver), as the host is compiled */
  void *ud;                           /* passed to every function */
  protocall_ReleaseFn *release;       /* may be NULL: once the driver and its sockets are gone */
  protocall_DriverConnectFn *connect; /* required */
  protocall_DriverSendFn *send;       /* required */
  protocall_DriverReceiveFn *receive; /* required */
  protocall_DriverCloseFn *close;     /* required */
  protocall_DriverTimeoutsFn *settimeouts;   /* may be NULL */
  protocall_DriverHandshakeFn *sslhandshake; /* may be NULL; pc.grpc no longer calls it */
} protocall_Driver;

/* Pushes a driver (a Lua table with `connect`, whose sockets have send,
 * receiveany, settimeouts, sslhandshake and close) calling the functions
 * of '*d' (copied). Raises "protocall_pushdriver: ..." when d->size is
 * below the fields up to 'close' or one of connect, send, receive, close
 * is NULL (then 'release' is not called), or when out of memory. */
PROTOCALL_API void protocall_pushdriver(lua_State *L, const protocall_Driver *d);

/* ---------------------------------------------------------------------------
 * Host time: the clock and sleep of call policies
 *
 * By default callables read CLOCK_MONOTONIC and sleep with nanosleep
 * (pc.now, pc.sleep). A host with an event loop installs its own per
 * state; from then on pc.now(), pc.sleep(s) and every callable made or
 * called in that state (retry backoff, deadlines, timeouts) use them,
 * except where a script passes its own `clock =` / `sleep =`. */

/* Seconds, never decreasing (the host loop's notion of now). */
typedef double protocall_ClockFn(void *ud);

/* Waits 'seconds' (>= 0; fractions allowed). Called as the body of a
 * lua_CFunction from Lua code: return 0 after waiting, or suspend the
 * running coroutine with `return lua_yield(L, 0);` and resume it from the
 * host loop when the time has passed (the retry loop is Lua, so the yield
 * is allowed). May raise. */
typedef int protocall_SleepFn(lua_State *L, void *ud, double seconds);

/* Installs 'clock' and 'sleep' (either NULL: the default) with 'ud' for
 * state 'L'. Call it before or after opening the module; the last call
 * wins. Raises only when out of memory. */
PROTOCALL_API void protocall_settime(lua_State *L, protocall_ClockFn *clock,
                                     protocall_SleepFn *sleep, void *ud);

/* ---------------------------------------------------------------------------
 * Host loops: the scheduler, listeners and channels run from the host's loop
 *
 * pc.run() blocks until every task of pc.spawn has finished (a listener's
 * serve, calls made in tasks). A host with its own event loop (poll,
 * epoll, libuv) runs them a step at a time instead: before it waits it
 * asks protocall_pollfds what to wait for, and whenever one of those
 * descriptors is ready or the timeout has passed it calls
 * protocall_step(L, 0); nothing blocks but the host's own wait. Several
 * states can share one loop (poll the union of their descriptors). In Lua
 * these are pc.poll_fds() and pc.step(seconds) (doc/guide.md "Serving").
 * examples: bindings/lua/loop_test.c serves from one state and calls it
 * from another, both on one poll(2) loop. */

struct pollfd; /* <poll.h> */

/* pc.step(seconds): runs the tasks that are ready, one round of I/O over
 * what the others wait on (waiting at most 'seconds' for a socket; 0: not
 * at all), then the tasks that can go on. Returns the number of tasks left
 * (0: all have finished). Raises as pc.step does: a task's error (the
 * other tasks are dropped), called inside pc.run or a task, or before the
 * module is opened. */
PROTOCALL_API int protocall_step(lua_State *L, double seconds);

/* pc.poll_fds(): fills at most 'max' entries of 'fds' (fd; events POLLIN
 * and/or POLLOUT; revents 0) with the descriptors the tasks wait on and
 * returns how many there are (above 'max': call again with room for that
 * many); sets '*timeout' to the seconds until protocall_step must run even
 * with no descriptor ready (0: a task is ready now), or -1 when only a
 * descriptor can wake the tasks ('timeout' may be NULL). Raises as
 * pc.poll_fds does; like protocall_step, call it inside a protected call
 * (lua_pcall, or a lua_CFunction the host runs protected): an error
 * outside one ends the process through Lua's panic handler. */
PROTOCALL_API int protocall_pollfds(lua_State *L, struct pollfd *fds, int max, double *timeout);

#ifdef __cplusplus
}
#endif

#endif
