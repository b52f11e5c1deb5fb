/* gRPC status codes: the canonical numbers and names, and the HTTP mapping.
 *
 * Implements grpc/grpc doc/statuscodes.md (codes 0..16) and
 * doc/http-grpc-status-mapping.md (HTTP status -> gRPC code when a response
 * carries no grpc-status). Pure data: no allocation, no state. */
#ifndef PC_STATUS_H
#define PC_STATUS_H

#include <stddef.h>

/* ORDER CODE: keep in step with the name table in status.c. */
typedef enum {
  kPc_Code_Ok = 0,
  kPc_Code_Cancelled = 1,
  kPc_Code_Unknown = 2,
  kPc_Code_InvalidArgument = 3,
  kPc_Code_DeadlineExceeded = 4,
  kPc_Code_NotFound = 5,
  kPc_Code_AlreadyExists = 6,
  kPc_Code_PermissionDenied = 7,
  kPc_Code_ResourceExhausted = 8,
  kPc_Code_FailedPrecondition = 9,
  kPc_Code_Aborted = 10,
  kPc_Code_OutOfRange = 11,
  kPc_Code_Unimplemented = 12,
  kPc_Code_Internal = 13,
  kPc_Code_Unavailable = 14,
  kPc_Code_DataLoss = 15,
  kPc_Code_Unauthenticated = 16
} pc_Code;

#define PC_CODE_COUNT 17

/* The canonical upper-case name of 'code' ("UNAVAILABLE"), or NULL when
 * 'code' is outside 0..16. */
const char *pc_Code_Name(int code);

/* The code whose canonical name is the 'len' bytes at 'name' (case-sensitive,
 * as the spec spells them), or -1 when no code has that name. */
int pc_Code_FromName(const char *name, size_t len);

/* The gRPC code for an HTTP ':status' seen without any grpc-status
 * (grpc/grpc doc/http-grpc-status-mapping.md): 400 INTERNAL, 401 UNAUTHENTICATED,
 * 403 PERMISSION_DENIED, 404 UNIMPLEMENTED, 429/502/503/504 UNAVAILABLE,
 * anything else UNKNOWN. */
pc_Code pc_Code_FromHttpStatus(int http_status);

#endif
