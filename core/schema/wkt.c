/* The built-in .proto files (wkt.h): protocall's own text of the well-known
 * types, of google/rpc's status files and of gRPC's health and reflection
 * services (names, numbers and options are protobuf's, googleapis' and
 * grpc-proto's facts), kept as real files in core/schema/protos/ and
 * embedded by the build (wkt_internal.h). */
#include "schema/wkt.h"
#include "schema/wkt_internal.h"

#include <string.h>

/* The well-known types: the files of google/protobuf/ and google/rpc/. */
static int is_wkt(const char *name) {
  return strncmp(name, "google/protobuf/", 16) == 0 || strncmp(name, "google/rpc/", 11) == 0;
}

const char *pc_Wkt_Source(const char *name, size_t *len) {
  for (size_t i = 0; i < pc_wkt_file_count; i++) {
    if (strcmp(pc_wkt_files[i].name, name) == 0) {
      if (len) *len = pc_wkt_files[i].len;
      return pc_wkt_files[i].src;
    }
  }
  return NULL;
}

const char *pc_Wkt_Name(size_t i) {
  for (size_t k = 0; k < pc_wkt_file_count; k++)
    if (is_wkt(pc_wkt_files[k].name) && i-- == 0) return pc_wkt_files[k].name;
  return NULL;
}

const char *pc_Wkt_FileOf(const char *full_name) {
  for (size_t i = 0; i < pc_wkt_type_count; i++) {
    const char *type = pc_wkt_types[i].full_name, *file = pc_wkt_files[pc_wkt_types[i].file].name;
    size_t n = strlen(type);
    if (strncmp(full_name, type, n) == 0 && (full_name[n] == '\0' || full_name[n] == '.') &&
        is_wkt(file))
      return file;
  }
  return NULL;
}
