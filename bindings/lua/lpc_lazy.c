/* protocall.so's stand-ins for the core functions that need a heavy
 * library, so that `require "protocall"` does not make the dynamic linker
 * load it: core/cel/regex.h (RE2 and the C++ runtime, for CEL's `matches`,
 * protovalidate's string.pattern and core.regex). The real functions live
 * in protocall_re2.so, built from core/cel/regex.cc and installed beside
 * protocall.so; the first call that needs one opens it (dlopen, once per
 * process, from the folder protocall.so was loaded from) and forwards
 * through the addresses it finds there.
 *
 * Linked into the Lua module alone (CMakeLists.txt: protocall_module); the
 * host libraries, the `protocall` command and the C tests link the real
 * functions. A process-wide table, set once under pthread_once: the
 * dynamic linker's state it mirrors is process-wide too. When the object
 * does not open, a pattern is refused with why ("RE2 is not available:
 * ..."), as RE2 refuses a bad one. */
#define _GNU_SOURCE /* dladdr */
#include "cel/regex.h"

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
  if (!re2.new_ || !re2.free_ || !re2.program_size || !re2.match) {
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
