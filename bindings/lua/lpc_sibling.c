/* The mark protocall_tls.so and protocall_re2.so carry: the build they
 * come from, as PROTOCALL_SIBLING_ABI names it (CMakeLists.txt: the
 * version and a digest of the headers they share with protocall.so).
 * lpc_lazy.c opens a sibling only when its mark is the module's own, so a
 * sibling left from another build is refused by name, not called with
 * structures laid out otherwise. Linked into the two siblings alone. */
extern const char lpc_sibling_abi[];
const char lpc_sibling_abi[] = PROTOCALL_SIBLING_ABI;
