/* The built-in .proto files as the build embeds them: every file under
 * core/schema/protos/, by its path there (its import name), and the
 * top-level messages and enums each declares. cmake/embed_protos.cmake
 * writes the definitions (builtin_protos.c in the build folder); wkt.c
 * answers from them. */
#ifndef PC_WKT_INTERNAL_H
#define PC_WKT_INTERNAL_H

#include <stddef.h>

typedef struct {
  const char *name; /* "google/protobuf/any.proto" */
  const char *src;  /* the .proto text, 'len' bytes and a NUL */
  size_t len;
} pc_WktFile;

typedef struct {
  const char *full_name; /* "google.protobuf.Any" */
  size_t file;           /* index into pc_wkt_files */
} pc_WktType;

extern const pc_WktFile pc_wkt_files[]; /* by name */
extern const size_t pc_wkt_file_count;
extern const pc_WktType pc_wkt_types[]; /* by full name */
extern const size_t pc_wkt_type_count;

#endif
