/* Every canonical code round-trips by name, unknown names and numbers are
 * refused, and the HTTP mapping follows grpc/grpc doc/http-grpc-status-mapping.md. */
#include "testing/check.h"
#include "base/status.h"

#include <string.h>

int main(void) {
  for (int i = 0; i < PC_CODE_COUNT; i++) {
    const char *name = pc_Code_Name(i);
    CHECK(name != NULL);
    if (name) CHECK(pc_Code_FromName(name, strlen(name)) == i);
  }
  CHECK(strcmp(pc_Code_Name(kPc_Code_Unavailable), "UNAVAILABLE") == 0);
  CHECK(strcmp(pc_Code_Name(kPc_Code_Unauthenticated), "UNAUTHENTICATED") == 0);
  CHECK(pc_Code_Name(-1) == NULL);
  CHECK(pc_Code_Name(17) == NULL);
  CHECK(pc_Code_FromName("unavailable", 11) == -1);
  CHECK(pc_Code_FromName("UNAVAILABLEX", 12) == -1);
  CHECK(pc_Code_FromName("UNAVAILABLEX", 11) == kPc_Code_Unavailable);
  CHECK(pc_Code_FromName("", 0) == -1);

  CHECK(pc_Code_FromHttpStatus(400) == kPc_Code_Internal);
  CHECK(pc_Code_FromHttpStatus(401) == kPc_Code_Unauthenticated);
  CHECK(pc_Code_FromHttpStatus(403) == kPc_Code_PermissionDenied);
  CHECK(pc_Code_FromHttpStatus(404) == kPc_Code_Unimplemented);
  CHECK(pc_Code_FromHttpStatus(429) == kPc_Code_Unavailable);
  CHECK(pc_Code_FromHttpStatus(502) == kPc_Code_Unavailable);
  CHECK(pc_Code_FromHttpStatus(503) == kPc_Code_Unavailable);
  CHECK(pc_Code_FromHttpStatus(504) == kPc_Code_Unavailable);
  CHECK(pc_Code_FromHttpStatus(200) == kPc_Code_Unknown);
  CHECK(pc_Code_FromHttpStatus(500) == kPc_Code_Unknown);
  return CHECK_DONE();
}
