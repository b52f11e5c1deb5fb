/* Regular expressions for `matches`: RE2 syntax and RE2's linear-time
 * matching, through Debian's libre2 (regex.cc is the only C++ of the core,
 * a shim with C linkage). Private to core/cel. */
#ifndef PC_CEL_REGEX_INTERNAL_H
#define PC_CEL_REGEX_INTERNAL_H

#include <stddef.h>

/* As cel.h says (the C++ shim does not include cel.h). */
#define PC_CEL_MAX_PATTERN 8192

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pc_CelRegex pc_CelRegex;

/* Compiles the 'len' bytes at 'pattern' (UTF-8, RE2 syntax). NULL when the
 * pattern is refused, with the reason in 'why' ('room' bytes; "" when
 * memory ran out): RE2's message, "pattern too long" over PC_CEL_MAX_PATTERN
 * bytes (cel.h), "pattern nested too deeply" past 100 groups deep. Each
 * compiled pattern may take RE2 up to 1 MiB. */
pc_CelRegex *pc_CelRegex_New(const char *pattern, size_t len, char *why, size_t room);
void pc_CelRegex_Free(pc_CelRegex *re);

/* Whether the pattern matches a substring of the 'len' bytes at 's' (CEL's
 * `matches` is unanchored): 1 or 0, -1 when memory ran out. Safe from
 * several threads at once. */
int pc_CelRegex_Match(const pc_CelRegex *re, const char *s, size_t len);

#ifdef __cplusplus
}
#endif

#endif
