// The RE2 shim of core/cel (regex.h): the one C++ file of the
// core, with C linkage. RE2 allocates with C++ new, so its memory is the
// one the core's pc_Alloc does not see; each pattern is bounded (1 MiB of
// RE2 program, 8 MiB with the DFA's states, PC_CEL_MAX_PATTERN bytes of text) and an
// allocation failure inside RE2 is caught here, never let through C.
#include "cel/regex.h"

#include <re2/re2.h>

#include <cstdio>
#include <cstring>
#include <new>

struct pc_CelRegex {
  re2::RE2 *re;
};

static const int kMaxNesting = 100;
// A pattern is refused when its program takes more than kMaxMem (a cheap
// refusal: RE2 gives up at that size), then compiled again with kMatchMem
// for matching: RE2's own default, room for the DFA's states. With 1 MiB
// the DFA of an unanchored counted repetition ran out of room on a 4 MB
// string and RE2 fell back to its NFA, 1 to 3 s a match.
static const int64_t kMaxMem = (int64_t)1 << 20;
static const int64_t kMatchMem = (int64_t)8 << 20;

static void say(char *why, size_t room, const char *what) {
  if (room > 0) std::snprintf(why, room, "%s", what);
}

// Deepest nesting of groups, brackets and escapes skipped.
static int nesting(const char *p, size_t n) {
  int depth = 0, most = 0, in_class = 0;
  for (size_t i = 0; i < n; i++) {
    char c = p[i];
    if (c == '\\') {
      i++;
    } else if (in_class) {
      if (c == ']') in_class = 0;
    } else if (c == '[') {
      in_class = 1;
      if (i + 1 < n && p[i + 1] == ']') i++; // "[]...]": the first ']' is literal
    } else if (c == '(') {
      if (++depth > most) most = depth;
    } else if (c == ')') {
      if (depth > 0) depth--;
    }
  }
  return most;
}

extern "C" pc_CelRegex *pc_CelRegex_New(const char *pattern, size_t len, char *why, size_t room) {
  if (len > PC_CEL_MAX_PATTERN) {
    say(why, room, "pattern too long");
    return nullptr;
  }
  if (nesting(pattern, len) > kMaxNesting) {
    say(why, room, "pattern nested too deeply");
    return nullptr;
  }
  try {
    re2::RE2::Options o;
    o.set_log_errors(false);
    o.set_max_mem(kMaxMem);
    re2::RE2 *re = new re2::RE2(re2::StringPiece(pattern, len), o);
    if (!re->ok()) {
      say(why, room, re->error().c_str());
      delete re;
      return nullptr;
    }
    delete re;
    o.set_max_mem(kMatchMem);
    re = new re2::RE2(re2::StringPiece(pattern, len), o);
    if (!re->ok()) {
      say(why, room, re->error().c_str());
      delete re;
      return nullptr;
    }
    pc_CelRegex *r = new (std::nothrow) pc_CelRegex;
    if (r == nullptr) {
      delete re;
      say(why, room, "");
      return nullptr;
    }
    r->re = re;
    return r;
  } catch (...) { // std::bad_alloc from RE2's parser or compiler
    say(why, room, "");
    return nullptr;
  }
}

extern "C" size_t pc_CelRegex_ProgramSize(const pc_CelRegex *re) {
  int n = re->re->ProgramSize();
  return n > 0 ? (size_t)n : 0;
}

extern "C" void pc_CelRegex_Free(pc_CelRegex *re) {
  if (re == nullptr) return;
  delete re->re;
  delete re;
}

extern "C" int pc_CelRegex_Match(const pc_CelRegex *re, const char *s, size_t len) {
  try {
    return re2::RE2::PartialMatchN(re2::StringPiece(s, len), *re->re, nullptr, 0) ? 1 : 0;
  } catch (...) { // memory ran out
    return -1;
  }
}

extern "C" int pc_CelRegex_FullMatch(const pc_CelRegex *re, const char *s, size_t len) {
  try {
    return re2::RE2::FullMatchN(re2::StringPiece(s, len), *re->re, nullptr, 0) ? 1 : 0;
  } catch (...) { // memory ran out
    return -1;
  }
}
