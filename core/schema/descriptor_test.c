/* Type keywords both ways and protoc's json_name rule. */
#include "testing/check.h"
#include "schema/descriptor.h"

#include <string.h>

int main(void) {
  for (int t = 1; t <= 18; t++) {
    const char *name = pc_FieldType_Name(t);
    CHECK(name != NULL);
    if (t == kPc_Type_Group || t == kPc_Type_Message || t == kPc_Type_Enum) continue;
    CHECK(pc_FieldType_FromName(name, strlen(name)) == (pc_FieldType)t);
  }
  CHECK(pc_FieldType_Name(0) == NULL);
  CHECK(pc_FieldType_Name(19) == NULL);
  CHECK(pc_FieldType_FromName("message", 7) == 0);
  CHECK(pc_FieldType_FromName("int", 3) == 0);

  char buf[64];
  CHECK(pc_JsonName("foo_bar_baz", buf, sizeof buf) == 9 && strcmp(buf, "fooBarBaz") == 0);
  CHECK(pc_JsonName("trace_id", buf, sizeof buf) == 7 && strcmp(buf, "traceId") == 0);
  CHECK(pc_JsonName("_leading", buf, sizeof buf) == 7 && strcmp(buf, "Leading") == 0);
  CHECK(pc_JsonName("a__b", buf, sizeof buf) == 2 && strcmp(buf, "aB") == 0);
  CHECK(pc_JsonName("field_1", buf, sizeof buf) == 6 && strcmp(buf, "field1") == 0);
  CHECK(pc_JsonName("already_Upper", buf, sizeof buf) == 12 && strcmp(buf, "alreadyUpper") == 0);
  CHECK(pc_JsonName("long_name", buf, 4) == 8 && strcmp(buf, "lon") == 0);
  return CHECK_DONE();
}
