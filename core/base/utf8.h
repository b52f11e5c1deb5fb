/* UTF-8 (RFC 3629) encoding of one code point: the core's one encoder,
 * for the escapes of .proto strings, JSON, CEL and text. */
#ifndef PC_BASE_UTF8_H
#define PC_BASE_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Writes code point 'cp' (at most 0x10FFFF; callers refuse or replace
 * surrogates as their format says) as 1-4 bytes at 'out', which has room
 * for 4; returns the count written. */
static inline size_t pc_Utf8_Put(uint32_t cp, char *out) {
  if (cp < 0x80) {
    out[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

#endif
