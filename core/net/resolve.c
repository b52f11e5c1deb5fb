/* Name resolution into every address (resolve.h). */
#define _POSIX_C_SOURCE 200809L
#include "net/resolve.h"

#include <netdb.h>
#include <string.h>
#include <sys/socket.h>

size_t pc_Net_Resolve(const char *host, const char *port, char (*out)[PC_NET_ADDRESS_MAX],
                      size_t max, pc_Error *err) {
  struct addrinfo hints, *list = NULL;
  memset(&hints, 0, sizeof hints);
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_ADDRCONFIG;
  int r = getaddrinfo(host, port, &hints, &list);
  if (r != 0) {
    pc_Error_Set(err, "resolve %.200s: %s", host, gai_strerror(r));
    return 0;
  }
  size_t n = 0;
  for (const struct addrinfo *ai = list; ai != NULL && n < max; ai = ai->ai_next) {
    char a[PC_NET_ADDRESS_MAX];
    if (getnameinfo(ai->ai_addr, ai->ai_addrlen, a, sizeof a, NULL, 0, NI_NUMERICHOST) != 0)
      continue;
    int seen = 0;
    for (size_t i = 0; i < n && !seen; i++) seen = strcmp(out[i], a) == 0;
    if (!seen) memcpy(out[n++], a, sizeof a);
  }
  freeaddrinfo(list);
  if (n == 0) pc_Error_Set(err, "resolve %.200s: no address", host);
  return n;
}
