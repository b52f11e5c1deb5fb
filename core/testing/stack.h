/* The stack of the threads the deep-nesting C tests run on (decode,
 * core/wire/depth_test.c; validation, core/validate/validate_test.c):
 * 1 MiB, the smallest a host is likely to give a thread; the sanitizer
 * build, whose frames are larger, gets 4 MiB. */
#ifndef PC_TESTS_STACK_H
#define PC_TESTS_STACK_H

#if defined(__SANITIZE_ADDRESS__)
#define STACK_BYTES (4u << 20)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define STACK_BYTES (4u << 20)
#endif
#endif
#ifndef STACK_BYTES
#define STACK_BYTES (1u << 20)
#endif

#endif
