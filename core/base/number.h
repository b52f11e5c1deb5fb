/* The shortest decimal text of a double that reads back as it: the core's
 * one form of a number shown to a user (JSON's numbers, the Lua binding's
 * "integer expected, got 30.000000000000004"). */
#ifndef PC_BASE_NUMBER_H
#define PC_BASE_NUMBER_H

#include <stddef.h>

/* Writes 'd' into 'out' (room for 32 bytes, NUL-terminated) as the fewest
 * significant digits, in C's "%.*g" form, that strtod reads back as 'd':
 * "0.1", "1e+300", "30.000000000000004", "5e-324"; "nan", "inf", "-inf",
 * "0" and "-0" for those values. Returns the length written. A normal
 * double's form has 15 digits or more only when "%.15g" does not read
 * back (DBL_DIG); a subnormal's is searched from one digit. */
size_t pc_Number_Shortest(double d, char out[32]);

#endif
