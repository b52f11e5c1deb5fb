/* gRPC over HTTP/2: the types and pure helpers every part of core/net
 * shares (engine.h, channel.h).
 *
 * Implements grpc/grpc doc/PROTOCOL-HTTP2.md (grpc-timeout, metadata
 * names and -bin values, grpc-message percent-encoding). */
#ifndef PC_NET_GRPC_H
#define PC_NET_GRPC_H

#include "base/error.h"
#include "base/status.h"

#include <stddef.h>

#define PC_GRPC_DEFAULT_MAX_RECEIVE ((size_t)4 * 1024 * 1024)

/* One metadata entry. Keys are lowercase; a key ending in "-bin" has a
 * binary value (base64 on the wire, raw bytes here). */
typedef struct {
  const char *key;
  size_t key_len;
  const char *value;
  size_t value_len;
} pc_GrpcPair;

typedef struct {
  double timeout;              /* seconds; < 0: no deadline */
  const pc_GrpcPair *metadata; /* request metadata, 'metadata_count' entries */
  size_t metadata_count;
  int gzip; /* non-zero: compress the request messages with gzip */
  /* > 0: sent as grpc-previous-rpc-attempts, the attempts of this call made
   * before this one (a retry or a hedge; gRFC A6 "Exposed Retry Metadata") */
  unsigned previous_attempts;
} pc_GrpcCallSettings;

/* The end of a call. 'message' is percent-decoded grpc-message (or a
 * description of a local or connection failure), 'details' the raw bytes
 * of grpc-status-details-bin (a google.rpc.Status), both NUL-terminated
 * and valid until the call is freed. */
typedef struct {
  pc_Code code;
  const char *message;
  size_t message_len;
  const char *details;
  size_t details_len;
  int local;          /* raised on this side for a failure that would recur */
  int has_pushback;   /* grpc-retry-pushback-ms was present */
  int no_retry;       /* ...and negative or malformed: do not retry (A6) */
  double retry_delay; /* ...and valid: the delay in seconds */
} pc_GrpcStatus;

/* Checks one request metadata entry: the key is 1+ chars of [0-9a-z_.-],
 * not reserved (starting with "grpc-" or one of content-type, te,
 * user-agent); a non-"-bin" value is printable ASCII. Returns 0 and writes
 * the reason to 'err' when invalid. */
int pc_GrpcPair_Check(const pc_GrpcPair *p, pc_Error *err);

/* Checks a method path: "/" then no space, control character, '?', '#'
 * or '%'. Returns 0 and writes the reason to 'err' when invalid. */
int pc_Grpc_PathCheck(const char *path, pc_Error *err);

/* Whether the key 'k' of 'n' bytes ends in "-bin" (a binary value). */
int pc_Grpc_IsBinKey(const char *k, size_t n);

/* The grpc-timeout value for 'seconds' (> 0) into 'out' (at least 10
 * bytes): at most 8 digits and a unit (n, u, m, S, M, H), rounded up so
 * it is never shorter than the time left. Returns the length written. */
size_t pc_Grpc_FormatTimeout(double seconds, char *out);

/* Percent-decodes grpc-message in place ('s' of 'len' bytes); an invalid
 * escape is kept as text. Returns the new length. */
size_t pc_Grpc_PercentDecode(char *s, size_t len);

/* Decodes base64 (standard alphabet, padded or not) from 'in' into 'out'
 * (room for len*3/4+3 bytes). Returns the decoded length or (size_t)-1
 * when 'in' is not base64. */
size_t pc_Grpc_Base64Decode(const char *in, size_t len, unsigned char *out);

/* Unpadded base64 of the 'len' bytes at 'in' into 'out' (room for
 * len*4/3+4 bytes). Returns the length written. */
size_t pc_Grpc_Base64Encode(const unsigned char *in, size_t len, char *out);

#endif
