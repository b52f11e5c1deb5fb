/* protocall.so's stand-ins for the core functions that need a heavy
 * library, so that `require "protocall"` does not make the dynamic linker
 * load it: core/net/tls.h with socket.h's TLS setups (OpenSSL, for TLS)
 * and core/cel/regex.h (RE2 and the C++ runtime, for CEL's `matches`,
 * protovalidate's string.pattern and core.regex). The real functions live
 * in protocall_tls.so (core/net/tls.c) and protocall_re2.so
 * (core/cel/regex.cc), installed beside protocall.so; the first call that
 * needs one opens it (dlopen, once per process, from the folder
 * protocall.so was loaded from) and forwards through the addresses it
 * finds there. Only the calls that make a first object (a TLS setup, a
 * pattern) open; every other one takes an object that such a call made.
 *
 * Linked into the Lua module alone (CMakeLists.txt: protocall_module); the
 * host libraries, the `protocall` command and the C tests link the real
 * functions. Process-wide tables, each set once under pthread_once: the
 * dynamic linker's state they mirror is process-wide too. When an object
 * does not open, a TLS setup fails with "TLS is not available: ..." and a
 * pattern is refused with "RE2 is not available: ...", through the error
 * each already has. */
#define _GNU_SOURCE /* dladdr */
#include "base/error.h"
#include "cel/regex.h"
#include "net/tls.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The folder protocall.so was loaded from (absolute, with its '/'), found
 * while dlopen runs it: a relative path given to dlopen would not hold
 * after a chdir. "" when unknown (then the dynamic linker's search). */
static char lazy_dir[PATH_MAX];

__attribute__((constructor)) static void lazy_find_dir(void) {
  Dl_info info;
  char *real;
  if (dladdr((void *)&lazy_find_dir, &info) == 0 || info.dli_fname == NULL) return;
  real = realpath(info.dli_fname, NULL);
  if (real == NULL) return;
  const char *slash = strrchr(real, '/');
  size_t n = slash ? (size_t)(slash - real) + 1 : 0;
  if (n < sizeof lazy_dir) {
    memcpy(lazy_dir, real, n);
    lazy_dir[n] = '\0';
  }
  free(real);
}

/* Opens 'file' from protocall.so's folder: the handle, or NULL with why in
 * 'why' ('room' bytes). */
static void *open_beside(const char *file, char *why, size_t room) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s%s", lazy_dir, file);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    const char *e = dlerror();
    snprintf(why, room, "%.*s", room > 0 ? (int)room - 1 : 0, e ? e : path);
  }
  return h;
}

/* -- core/cel/regex.h, from protocall_re2.so -------------------------------- */

static struct {
  pc_CelRegex *(*new_)(const char *, size_t, char *, size_t);
  void (*free_)(pc_CelRegex *);
  size_t (*program_size)(const pc_CelRegex *);
  int (*match)(const pc_CelRegex *, const char *, size_t);
  int (*full_match)(const pc_CelRegex *, const char *, size_t);
  char why[200]; /* why it did not open ("" when it did) */
} re2;
static pthread_once_t re2_once = PTHREAD_ONCE_INIT;

static void re2_open(void) {
  void *h = open_beside("protocall_re2.so", re2.why, sizeof re2.why);
  if (h == NULL) return;
  *(void **)&re2.new_ = dlsym(h, "pc_CelRegex_New");
  *(void **)&re2.free_ = dlsym(h, "pc_CelRegex_Free");
  *(void **)&re2.program_size = dlsym(h, "pc_CelRegex_ProgramSize");
  *(void **)&re2.match = dlsym(h, "pc_CelRegex_Match");
  *(void **)&re2.full_match = dlsym(h, "pc_CelRegex_FullMatch");
  if (!re2.new_ || !re2.free_ || !re2.program_size || !re2.match || !re2.full_match) {
    snprintf(re2.why, sizeof re2.why, "protocall_re2.so lacks pc_CelRegex_*");
    re2.new_ = NULL;
  }
}

pc_CelRegex *pc_CelRegex_New(const char *pattern, size_t len, char *why, size_t room) {
  pthread_once(&re2_once, re2_open);
  if (re2.new_ == NULL) {
    if (room > 0) snprintf(why, room, "RE2 is not available: %s", re2.why);
    return NULL;
  }
  return re2.new_(pattern, len, why, room);
}

/* A pattern exists only once the object opened: no call below opens it. */
void pc_CelRegex_Free(pc_CelRegex *re) {
  if (re != NULL) re2.free_(re);
}

size_t pc_CelRegex_ProgramSize(const pc_CelRegex *re) {
  return re2.program_size(re);
}

int pc_CelRegex_Match(const pc_CelRegex *re, const char *s, size_t len) {
  return re2.match(re, s, len);
}

int pc_CelRegex_FullMatch(const pc_CelRegex *re, const char *s, size_t len) {
  return re2.full_match(re, s, len);
}

/* -- core/net/tls.h and socket.h's setups, from protocall_tls.so ----------- */

/* Every function of tls.c: its type, name, parameters and arguments, in
 * one list for the table, the look-ups and the forwarders: the setups that
 * open the object, the frees (they take NULL), the rest. */
#define TLS_OPENERS(X)                                                                             \
  X(pc_NetTlsClient *, pc_NetTlsClient_New, (const pc_NetOptions *o, pc_Error *err), (o, err))     \
  X(pc_NetTlsServer *, pc_NetTlsServer_New,                                                        \
    (const char *cert, const char *key, const char *ca, pc_Error *err), (cert, key, ca, err))
#define TLS_FREES(X)                                                                               \
  X(void, pc_NetTlsClient_Free, (pc_NetTlsClient * t), (t))                                        \
  X(void, pc_NetTlsServer_Free, (pc_NetTlsServer * t), (t))                                        \
  X(void, pc_NetTls_Free, (pc_NetTls * t), (t))
#define TLS_VALUES(X)                                                                              \
  X(int, pc_NetTlsClient_HasCert, (const pc_NetTlsClient *t), (t))                                 \
  X(pc_NetTls *, pc_NetTls_NewClient, (pc_NetTlsClient * t, const char *name, int insecure),       \
    (t, name, insecure))                                                                           \
  X(pc_NetTls *, pc_NetTls_NewServer, (pc_NetTlsServer * t), (t))                                  \
  X(int, pc_NetTls_Handshake, (pc_NetTls * c), (c))                                                \
  X(const char *, pc_NetTls_AlpnRefused, (const pc_NetTls *c), (c))                                \
  X(long, pc_NetTls_Read, (pc_NetTls * c, void *buf, size_t n), (c, buf, n))                       \
  X(long, pc_NetTls_Write, (pc_NetTls * c, const void *buf, size_t n), (c, buf, n))                \
  X(size_t, pc_NetTls_Output, (pc_NetTls * c, const char **data), (c, data))                       \
  X(int, pc_NetTls_Input, (pc_NetTls * c, const void *data, size_t len), (c, data, len))           \
  X(int, pc_NetTls_Resumed, (const pc_NetTls *c), (c))
#define TLS_VOIDS(X)                                                                               \
  X(void, pc_NetTlsClient_Hold, (pc_NetTlsClient * t), (t))                                        \
  X(void, pc_NetTls_Shutdown, (pc_NetTls * c), (c))                                                \
  X(void, pc_NetTls_Sent, (pc_NetTls * c, size_t n), (c, n))                                       \
  X(void, pc_NetTls_Why, (const pc_NetTls *c, char *text, size_t room), (c, text, room))
#define TLS_ALL(X) TLS_OPENERS(X) TLS_FREES(X) TLS_VALUES(X) TLS_VOIDS(X)

/* a declarator and a parameter list take no parentheses */
#define TLS_FIELD(type, name, params, args)                                                        \
  type(*name) params; /* NOLINT(bugprone-macro-parentheses) */
static struct {
  TLS_ALL(TLS_FIELD)
  int ok;
  char why[200]; /* why it did not open */
} tls;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void tls_open(void) {
  void *h = open_beside("protocall_tls.so", tls.why, sizeof tls.why);
  if (h == NULL) return;
  int found = 1;
#define TLS_FIND(type, name, params, args) found &= (*(void **)&tls.name = dlsym(h, #name)) != NULL;
  TLS_ALL(TLS_FIND)
  if (!found) snprintf(tls.why, sizeof tls.why, "protocall_tls.so lacks a function of tls.h");
  tls.ok = found;
}

/* The setups open the object; nothing else is reached before one was made. */
pc_NetTlsClient *pc_NetTlsClient_New(const pc_NetOptions *o, pc_Error *err) {
  pthread_once(&tls_once, tls_open);
  if (!tls.ok) {
    pc_Error_Set(err, "TLS is not available: %s", tls.why);
    return NULL;
  }
  return tls.pc_NetTlsClient_New(o, err);
}

pc_NetTlsServer *pc_NetTlsServer_New(const char *cert, const char *key, const char *ca,
                                     pc_Error *err) {
  pthread_once(&tls_once, tls_open);
  if (!tls.ok) {
    pc_Error_Set(err, "TLS is not available: %s", tls.why);
    return NULL;
  }
  return tls.pc_NetTlsServer_New(cert, key, ca, err);
}

/* The frees take NULL, also before the object opened. */
#define TLS_FREE(type, name, params, args)                                                         \
  type name params {                                                                               \
    if (t != NULL) tls.name args;                                                                  \
  }
#define TLS_VALUE(type, name, params, args)                                                        \
  type name params {                                                                               \
    return tls.name args;                                                                          \
  }
#define TLS_VOID(type, name, params, args)                                                         \
  type name params {                                                                               \
    tls.name args;                                                                                 \
  }
TLS_FREES(TLS_FREE)
TLS_VALUES(TLS_VALUE)
TLS_VOIDS(TLS_VOID)
