/* The start block under AddressSanitizer (built and registered in the
 * sanitizer build only): nghttp2's pieces in it are separated by poisoned
 * gaps, so an overflow from one piece into the next is reported although
 * the block is one allocation; a piece nghttp2 frees reads poisoned again,
 * and the block is all unpoisoned when it goes back to the allocator. */
#include "testing/check.h"
#include "net/session_internal.h"

#include <sanitizer/asan_interface.h>

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* -- an allocator that checks what it gets back ---------------------------- */

/* Blocks given back (freed or moved by realloc) and those of them with a
 * poisoned byte: the allocator may read or reuse them, so none may have. */
static int given_back, poisoned_back;
static const void *block_seen; /* the start block under test, once freed */

static void *checking_alloc(void *ud, void *ptr, size_t osize, size_t nsize) {
  (void)ud;
  if (ptr && osize > 0) {
    given_back++;
    if (__asan_region_is_poisoned(ptr, osize) != NULL) poisoned_back++;
  }
  if (ptr && nsize == 0 && ptr == block_seen) block_seen = NULL;
  if (nsize == 0) {
    free(ptr);
    return NULL;
  }
  return realloc(ptr, nsize);
}

/* -- a session with no traffic --------------------------------------------- */

static int on_header(void *user, void *stream, const nghttp2_frame *frame, const uint8_t *name,
                     size_t namelen, const uint8_t *value, size_t valuelen, int over) {
  (void)user, (void)stream, (void)frame, (void)name, (void)namelen, (void)value, (void)valuelen,
      (void)over;
  return 0;
}

static ssize_t on_body(void *user, void *stream, uint8_t *buf, size_t length,
                       uint32_t *data_flags) {
  (void)user, (void)stream, (void)buf, (void)length;
  *data_flags |= NGHTTP2_DATA_FLAG_EOF;
  return 0;
}

static pc_GrpcSession *session(const pc_GrpcSessionRole *role) {
  pc_Error err;
  pc_Error_Init(&err);
  pc_GrpcSession *s = pc_GrpcSession_New(role, checking_alloc, NULL, sizeof *s, &err);
  pc_GrpcSessionSettings set = {100, 0, 0, 16384};
  if (s == NULL || !pc_GrpcSession_Start(s, &set, &err)) {
    fprintf(stderr, "cannot start a session: %s\n", err.msg);
    exit(1);
  }
  return s;
}

/* -- checks -------------------------------------------------------------- */

static int poisoned(const unsigned char *p) {
  return __asan_address_is_poisoned(p);
}

/* 'n' bytes at 'p' are all addressable. */
static int addressable(unsigned char *p, size_t n) {
  return __asan_region_is_poisoned(p, n) == NULL;
}

/* Writing the byte at 'p' in a child process: 1 when AddressSanitizer
 * stopped it (its report goes to /dev/null), 0 when the write went
 * through. */
static int write_dies(unsigned char *p) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    int null = open("/dev/null", O_WRONLY);
    if (null >= 0) dup2(null, 2);
    memset(p, 0x5a, 1); /* checked as nghttp2's memcpy and memset are */
    _exit(0);
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid) return 0;
  return !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static void check_block(const pc_GrpcSessionRole *role) {
  pc_GrpcSession *s = session(role);
  CHECK(s->block != NULL && s->block_live >= 4);
  if (s->block == NULL) {
    pc_GrpcSession_Free(s, sizeof *s);
    return;
  }
  unsigned char *b = s->block, *end = b + s->block_size;
  /* The pieces handed out are the block's addressable runs, each
   * followed by a gap of at least 16 poisoned bytes but the last. */
  unsigned runs = 0;
  size_t gap = 0, least_gap = (size_t)-1;
  for (unsigned char *q = b; q < end; q++) {
    if (poisoned(q)) {
      gap++;
      continue;
    }
    if (q == b || poisoned(q - 1)) {
      runs++;
      if (q > b && gap < least_gap) least_gap = gap;
    }
    gap = 0;
  }
  CHECK(runs == s->block_live);
  CHECK(least_gap >= 16 && least_gap != (size_t)-1);
  /* The frame buffer, inside the block: all of it addressable, the bytes
   * either side not, and a write one past its end is stopped. */
  unsigned char *f = s->frames;
  CHECK(f > b && f + s->frames_size < end);
  if (f > b && f + s->frames_size < end) {
    CHECK(addressable(f, s->frames_size));
    CHECK(poisoned(f - 1) && poisoned(f + s->frames_size));
    CHECK(write_dies(f + s->frames_size));
    CHECK(!write_dies(f + s->frames_size - 1));
    /* A piece nghttp2 frees reads poisoned (the session frees it again
     * when it goes: counted live once more for that). */
    s->block_live++;
    s->mem.free(f, s->mem.mem_user_data);
    CHECK(poisoned(f) && poisoned(f + s->frames_size - 1));
    CHECK(s->block != NULL);
  }
  /* Every block given back to the allocator (the scratch the first
   * session was made in, the start block) reads unpoisoned. */
  block_seen = b;
  pc_GrpcSession_Free(s, sizeof *s);
  CHECK(block_seen == NULL);
  CHECK(given_back > 0 && poisoned_back == 0);
}

int main(void) {
  static const pc_GrpcSessionRole client = {0, NULL, on_header, on_body, {0}};
  static const pc_GrpcSessionRole server = {1, NULL, on_header, on_body, {0}};
  check_block(&client);
  check_block(&server);
  return CHECK_DONE();
}
