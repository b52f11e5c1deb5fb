/* The well-known types: google/protobuf/{any, api, descriptor, duration,
 * empty, field_mask, source_context, struct, timestamp, type,
 * wrappers}.proto and google/rpc/{code, error_details, status}.proto (gRPC's
 * rich error status, google.rpc.Status and its detail messages), built into
 * the library as .proto text, so an import of any of them resolves with no
 * file on disk (pc_LoadProto falls back to them when the caller's source
 * function has no such file). The text is protocall's own, kept as real
 * files in core/schema/protos/ (by import name) that the build embeds
 * (cmake/embed_protos.cmake); names, numbers and options are protobuf's, so
 * parsing and resolving one gives the FileDescriptorProto protoc gives.
 * gRPC's grpc/health/v1/health.proto, grpc/reflection/v1/reflection.proto
 * and grpc/reflection/v1alpha/reflection.proto are built in the same way
 * (pc_Wkt_Source answers for them; pc_Wkt_Name and pc_Wkt_FileOf list the
 * well-known types only: the files of google/protobuf/ and google/rpc/). */
#ifndef PC_WKT_H
#define PC_WKT_H

#include <stddef.h>

/* The .proto text of the built-in file with import name 'name'
 * ("google/protobuf/timestamp.proto", "grpc/health/v1/health.proto"), its length in '*len' (when
 * 'len' is not NULL); NULL when 'name' is not one of them. Static storage. */
const char *pc_Wkt_Source(const char *name, size_t *len);

/* The import name of the i-th built-in file (0-based, in alphabetical
 * order), or NULL past the last. */
const char *pc_Wkt_Name(size_t i);

/* The import name of the built-in file that defines the google.protobuf or
 * google.rpc message or enum 'full_name' ("google.protobuf.Timestamp" ->
 * "google/protobuf/timestamp.proto", "google.rpc.RetryInfo" ->
 * "google/rpc/error_details.proto"; nested names by their outermost type),
 * or NULL when 'full_name' is not a built-in type. */
const char *pc_Wkt_FileOf(const char *full_name);

#endif
