/* Name resolution for targets of several backends: every address a host
 * name resolves to (getaddrinfo, IPv4 and IPv6, in its order, duplicates
 * dropped), as numeric strings a channel connects to (channel.h, one
 * channel per address). Blocks for the lookup, as a connection's own
 * resolution does (socket.h). */
#ifndef PC_NET_RESOLVE_H
#define PC_NET_RESOLVE_H

#include "base/error.h"

#include <stddef.h>

/* Room for one numeric address (an IPv6 address with a zone included). */
#define PC_NET_ADDRESS_MAX 64

/* Resolves 'host' (a name or an address, no brackets) for TCP port 'port'
 * (decimal) into at most 'max' numeric addresses ("127.0.0.1", "::1")
 * written to 'out'; returns how many (at least 1), or 0 with 'err' set
 * ("resolve NAME: REASON") when the name does not resolve. */
size_t pc_Net_Resolve(const char *host, const char *port, char (*out)[PC_NET_ADDRESS_MAX],
                      size_t max, pc_Error *err);

#endif
