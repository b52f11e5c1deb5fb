/* Regular expressions for `matches`: RE2 syntax and RE2's linear-time
 * matching, through Debian's libre2 (regex.cc is the only C++ of the core,
 * a shim with C linkage). Part of cel.h's API (cel.h includes it;
 * core/validate compiles `string.pattern` rules with it); C and C++ alike,
 * so regex.cc includes it alone. */
#ifndef PC_CEL_REGEX_H
#define PC_CEL_REGEX_H

#include <stddef.h>

/* The longest pattern compiled (bytes). */
#define PC_CEL_MAX_PATTERN 8192

#ifdef __cplusplus
extern "C" {
#endif

typedef struct pc_CelRegex pc_CelRegex;

/* Compiles the 'len' bytes at 'pattern' (UTF-8, RE2 syntax). NULL when the
 * pattern is refused, with the reason in 'why' ('room' bytes; "" when
 * memory ran out): RE2's message, "pattern too long" over PC_CEL_MAX_PATTERN
 * bytes (cel.h), "pattern nested too deeply" past 100 groups deep. Each
 * compiled pattern's program may take RE2 up to 1 MiB (a larger one is
 * refused), and up to 8 MiB with the states its DFA builds while matching. */
pc_CelRegex *pc_CelRegex_New(const char *pattern, size_t len, char *why, size_t room);
void pc_CelRegex_Free(pc_CelRegex *re);

/* The size of the compiled program (RE2's instructions): what compiling
 * the pattern cost, in proportion. */
size_t pc_CelRegex_ProgramSize(const pc_CelRegex *re);

/* Whether the pattern matches a substring of the 'len' bytes at 's' (CEL's
 * `matches` is unanchored): 1 or 0, -1 when memory ran out. Safe from
 * several threads at once. */
int pc_CelRegex_Match(const pc_CelRegex *re, const char *s, size_t len);

/* Whether the pattern matches the whole of the 'len' bytes at 's' (what
 * "^(?:pattern)$" finds, without the 6 bytes counting against
 * PC_CEL_MAX_PATTERN: the xDS route matchers' safe_regex): 1 or 0, -1 when
 * memory ran out. Safe from several threads at once. */
int pc_CelRegex_FullMatch(const pc_CelRegex *re, const char *s, size_t len);

#ifdef __cplusplus
}
#endif

#endif
