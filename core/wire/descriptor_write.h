/* Descriptors out: a pc_FileDesc (core/schema/descriptor.h) serialized as a
 * google.protobuf.FileDescriptorProto, the reverse of core/wire/descriptor_set.h.
 *
 * The bytes are what protoc writes for the file in a descriptor set
 * (`protoc -o`, no source info): fields in number order; for every field
 * its label and type, type_name and extendee as held (fully qualified with
 * a leading dot in a pool), json_name always (protoc's default when the
 * description has none, as `protoc -o` writes it); client_streaming /
 * server_streaming and proto3_optional only when true; syntax only for
 * proto3 (protoc omits "proto2"); every *Options message copied verbatim
 * from pc_OptionsDesc (custom options included) when 'present', else, for
 * descriptions made without option bytes (Lua declarations), the decoded
 * standard options that are set (packed, deprecated, map_entry,
 * message_set_wire_format, allow_alias) written as protoc writes them.
 * This is what a reflection service or a protoc plugin needs. */
#ifndef PC_DESCRIPTOR_WRITE_H
#define PC_DESCRIPTOR_WRITE_H

#include "schema/descriptor.h"
#include "base/error.h"
#include "wire/wire.h"

/* Prepends the serialized FileDescriptorProto of 'file' to what 'w' holds
 * (the result is pc_WireWriter_Data(w) / pc_WireWriter_Size(w)). Returns 1,
 * or 0 with "out of memory" in 'err' (may be NULL) and 'w' holding part of
 * the encoding (free or reset it). */
int pc_FileDesc_Write(const pc_FileDesc *file, pc_WireWriter *w, pc_Error *err);

#endif
