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
 * does not open (missing, from another build, lacking a function), a TLS
 * setup fails with "TLS is not available: ..." and a pattern is refused
 * with "RE2 is not available: ...", through the error each already has.
 * PROTOCALL_SIBLING_ABI (CMakeLists.txt) names this module's build. */
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

/* -- the two objects: what each holds and how it is opened ------------------ */

/* Every function a sibling object holds: its type, name, parameters and
 * arguments, in one list per object for the table of addresses, the
 * look-ups and the forwarders. The openers (the calls that make a first
 * object: a TLS setup, a pattern) are written out below; the frees take
 * NULL, also before the object opened; nothing else is reached before an
 * opener made an object. */
#define RE2_FREES(X) X(void, pc_CelRegex_Free, (pc_CelRegex * t), (t))
#define RE2_VALUES(X)                                                                              \
  X(size_t, pc_CelRegex_ProgramSize, (const pc_CelRegex *re), (re))                                \
  X(int, pc_CelRegex_Match, (const pc_CelRegex *re, const char *s, size_t len), (re, s, len))      \
  X(int, pc_CelRegex_FullMatch, (const pc_CelRegex *re, const char *s, size_t len), (re, s, len))
#define RE2_ALL(X)                                                                                 \
  X(pc_CelRegex *, pc_CelRegex_New, (const char *pattern, size_t len, char *why, size_t room),     \
    (pattern, len, why, room))                                                                     \
  RE2_FREES(X) RE2_VALUES(X)

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
  X(pc_NetTls *, pc_NetTls_NewClient,                                                              \
    (pc_NetTlsClient * t, const char *name, int named, int insecure), (t, name, named, insecure))  \
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

/* The addresses, one field per function (a declarator and a parameter list
 * take no parentheses). */
#define LAZY_FIELD(type, name, params, args)                                                       \
  type(*name) params; /* NOLINT(bugprone-macro-parentheses) */
static struct { RE2_ALL(LAZY_FIELD) } re2;
static struct { TLS_ALL(LAZY_FIELD) } tls;

/* A function's name and where its address goes. */
typedef struct {
  const char *name;
  void **to;
} Symbol;
#define LAZY_SYMBOL_RE2(type, name, params, args) {#name, (void **)&re2.name},
#define LAZY_SYMBOL_TLS(type, name, params, args) {#name, (void **)&tls.name},
static const Symbol re2_symbols[] = {RE2_ALL(LAZY_SYMBOL_RE2)};
static const Symbol tls_symbols[] = {TLS_ALL(LAZY_SYMBOL_TLS)};

/* A sibling object: opened once per process (pthread_once), 'ok' once
 * every address of its table is found and its build is this module's. */
typedef struct {
  const char *file;
  const Symbol *symbols;
  size_t count;
  int ok;
  char why[PATH_MAX + 320]; /* why it did not open: room for the path and the longest text */
} Sibling;
static Sibling re2_sibling = {"protocall_re2.so", re2_symbols,
                              sizeof re2_symbols / sizeof *re2_symbols, 0, ""};
static Sibling tls_sibling = {"protocall_tls.so", tls_symbols,
                              sizeof tls_symbols / sizeof *tls_symbols, 0, ""};
static pthread_once_t re2_once = PTHREAD_ONCE_INIT;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

/* Opens 'sib' from protocall.so's folder: checks that it comes from this
 * module's build (lpc_sibling_abi: the version and the interface both were
 * built with, lpc_sibling.c) and finds every function of its table. */
static void open_sibling(Sibling *sib) {
  char path[PATH_MAX + 64];
  snprintf(path, sizeof path, "%s%s", lazy_dir, sib->file);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    const char *e = dlerror();
    snprintf(sib->why, sizeof sib->why, "%s", e ? e : path);
    return;
  }
  const char *abi = dlsym(h, "lpc_sibling_abi");
  if (abi == NULL || strcmp(abi, PROTOCALL_SIBLING_ABI) != 0) {
    snprintf(sib->why, sizeof sib->why,
             "%s is from another build (%s%.40s; protocall.so's is %s): install the module and "
             "its siblings from one build",
             path, abi ? "its ABI is " : "it has no ABI mark", abi ? abi : "",
             PROTOCALL_SIBLING_ABI);
    dlclose(h);
    return;
  }
  for (size_t i = 0; i < sib->count; i++) {
    *sib->symbols[i].to = dlsym(h, sib->symbols[i].name);
    if (*sib->symbols[i].to == NULL) {
      snprintf(sib->why, sizeof sib->why, "%s lacks %s", path, sib->symbols[i].name);
      dlclose(h);
      return;
    }
  }
  sib->ok = 1;
}

static void re2_open(void) {
  open_sibling(&re2_sibling);
}

static void tls_open(void) {
  open_sibling(&tls_sibling);
}

/* -- the openers: they open the object, and fail through their error ------- */

pc_CelRegex *pc_CelRegex_New(const char *pattern, size_t len, char *why, size_t room) {
  pthread_once(&re2_once, re2_open);
  if (!re2_sibling.ok) {
    if (room > 0) snprintf(why, room, "RE2 is not available: %s", re2_sibling.why);
    return NULL;
  }
  return re2.pc_CelRegex_New(pattern, len, why, room);
}

int pc_NetTls_Available(pc_Error *err) {
  pthread_once(&tls_once, tls_open);
  if (!tls_sibling.ok) {
    pc_Error_Set(err, "TLS is not available: %s", tls_sibling.why);
    return 0;
  }
  return 1;
}

pc_NetTlsClient *pc_NetTlsClient_New(const pc_NetOptions *o, pc_Error *err) {
  pthread_once(&tls_once, tls_open);
  if (!tls_sibling.ok) {
    pc_Error_Set(err, "TLS is not available: %s", tls_sibling.why);
    return NULL;
  }
  return tls.pc_NetTlsClient_New(o, err);
}

pc_NetTlsServer *pc_NetTlsServer_New(const char *cert, const char *key, const char *ca,
                                     pc_Error *err) {
  pthread_once(&tls_once, tls_open);
  if (!tls_sibling.ok) {
    pc_Error_Set(err, "TLS is not available: %s", tls_sibling.why);
    return NULL;
  }
  return tls.pc_NetTlsServer_New(cert, key, ca, err);
}

/* -- the rest: forwarders ---------------------------------------------------- */

#define LAZY_FREE(fns, type, name, params, args)                                                   \
  type name params {                                                                               \
    if (t != NULL) (fns).name args;                                                                \
  }
#define LAZY_VALUE(fns, type, name, params, args)                                                  \
  type name params {                                                                               \
    return (fns).name args;                                                                        \
  }
#define LAZY_VOID(fns, type, name, params, args)                                                   \
  type name params {                                                                               \
    (fns).name args;                                                                               \
  }
#define RE2_FREE(...)  LAZY_FREE(re2, __VA_ARGS__)
#define RE2_VALUE(...) LAZY_VALUE(re2, __VA_ARGS__)
#define TLS_FREE(...)  LAZY_FREE(tls, __VA_ARGS__)
#define TLS_VALUE(...) LAZY_VALUE(tls, __VA_ARGS__)
#define TLS_VOID(...)  LAZY_VOID(tls, __VA_ARGS__)
RE2_FREES(RE2_FREE)
RE2_VALUES(RE2_VALUE)
TLS_FREES(TLS_FREE)
TLS_VALUES(TLS_VALUE)
TLS_VOIDS(TLS_VOID)
