/* File descriptions: descriptor.proto's shape as plain C data.
 *
 * One model for every way a schema arrives. The .proto parser
 * (pc_ParseProto), the descriptor-set reader and Lua declarations
 * (pc.message / pc.enum) each produce a pc_FileDesc; the schema pool adds a
 * pc_FileDesc (resolving names and validating it) to build the definitions
 * messages are made from, and can emit a pc_FileDesc back for a loaded file
 * (FileDescriptorProto out, for reflection and for comparison with protoc).
 *
 * Each struct mirrors the descriptor.proto message of the same name (field
 * numbers in comments), keeping what protoc puts in a descriptor set
 * (source_code_info is not kept). Strings are NUL-terminated; all of a
 * pc_FileDesc usually lives in one pc_Arena. Options keep their serialized
 * bytes verbatim ('options', the encoded *Options message, custom options
 * included) next to the standard options that change behaviour, decoded. */
#ifndef PC_DESCRIPTOR_H
#define PC_DESCRIPTOR_H

#include <stddef.h>
#include <stdint.h>

/* FieldDescriptorProto.Type, numbers as in descriptor.proto.
 * ORDER TYPE: pc_FieldType_Name in descriptor.c follows this order. */
typedef enum {
  kPc_Type_Double = 1,
  kPc_Type_Float = 2,
  kPc_Type_Int64 = 3,
  kPc_Type_Uint64 = 4,
  kPc_Type_Int32 = 5,
  kPc_Type_Fixed64 = 6,
  kPc_Type_Fixed32 = 7,
  kPc_Type_Bool = 8,
  kPc_Type_String = 9,
  kPc_Type_Group = 10,
  kPc_Type_Message = 11,
  kPc_Type_Bytes = 12,
  kPc_Type_Uint32 = 13,
  kPc_Type_Enum = 14,
  kPc_Type_Sfixed32 = 15,
  kPc_Type_Sfixed64 = 16,
  kPc_Type_Sint32 = 17,
  kPc_Type_Sint64 = 18
} pc_FieldType;

/* FieldDescriptorProto.Label */
typedef enum { kPc_Label_Optional = 1, kPc_Label_Required = 2, kPc_Label_Repeated = 3 } pc_Label;

typedef enum { kPc_Syntax_Proto2 = 2, kPc_Syntax_Proto3 = 3 } pc_Syntax;

/* A serialized *Options message ('size' bytes at 'data'); empty when the
 * element has no options. 'present' distinguishes an empty options message
 * that was written (`[]` cannot be, but `option x = ...` of a default can)
 * from none. */
typedef struct {
  const uint8_t *data;
  size_t size;
  int present;
} pc_OptionsDesc;

typedef struct {
  int32_t start, end; /* end exclusive, as in descriptor.proto */
} pc_RangeDesc;

typedef struct {
  const char *name;          /* 1 */
  int32_t number;            /* 3 */
  pc_Label label;            /* 4 */
  pc_FieldType type;         /* 5; 0 when only type_name is known (parser output
                                before resolution: message or enum) */
  const char *type_name;     /* 6; NULL for scalars. As written (relative) or
                                fully qualified with a leading dot */
  const char *extendee;      /* 2; NULL unless an extension */
  const char *default_value; /* 7; NULL when none. protoc's text form: bytes
                                C-escaped, enums by value name, floats as
                                written ("inf", "-inf", "nan") */
  size_t default_value_len;  /* bytes at default_value when a string default
                                holds NUL bytes; 0 means strlen() */
  int32_t oneof_index;       /* 9; -1 when not in a oneof */
  const char *json_name;     /* 10; NULL when not set */
  int proto3_optional;       /* 17 */
  pc_OptionsDesc options;    /* 8: FieldOptions */
  /* FieldOptions decoded: packed (2) and deprecated (3); -1 unset, 0, 1 */
  int packed;
  int deprecated;
  /* Where it was declared, for errors (0 when unknown) */
  int line, column;
  /* Where its type, number and default value were written (the .proto
   * parser's, for errors placed as protoc places them; 0 when unknown) */
  int type_line, type_column;
  int number_line, number_column;
  int default_line, default_column;
  int extendee_line, extendee_column;
  int json_line, json_column; /* of an explicit json_name option */
} pc_FieldDesc;

typedef struct {
  const char *name;       /* 1 */
  pc_OptionsDesc options; /* 2: OneofOptions */
} pc_OneofDesc;

typedef struct {
  const char *name;       /* 1 */
  int32_t number;         /* 2 */
  pc_OptionsDesc options; /* 3: EnumValueOptions */
  int line, column;
  int number_line, number_column; /* of the number (.proto source only) */
} pc_EnumValueDesc;

typedef struct {
  const char *name; /* 1 */
  pc_EnumValueDesc *values;
  size_t value_count;     /* 2 */
  pc_OptionsDesc options; /* 3: EnumOptions; allow_alias (2) decoded below */
  int allow_alias;
  pc_RangeDesc *reserved_ranges; /* 4; end INCLUSIVE here, as EnumReservedRange */
  size_t reserved_range_count;
  const char **reserved_names; /* 5 */
  size_t reserved_name_count;
  int line, column;
} pc_EnumDesc;

typedef struct {
  pc_RangeDesc range;     /* start 1, end 2 (exclusive) */
  pc_OptionsDesc options; /* 3: ExtensionRangeOptions */
  int line, column;       /* of the start number (.proto source only) */
} pc_ExtensionRangeDesc;

typedef struct pc_MessageDesc {
  const char *name; /* 1 */
  pc_FieldDesc *fields;
  size_t field_count; /* 2 */
  pc_FieldDesc *extensions;
  size_t extension_count; /* 6 */
  struct pc_MessageDesc *nested;
  size_t nested_count; /* 3 */
  pc_EnumDesc *enums;
  size_t enum_count; /* 4 */
  pc_ExtensionRangeDesc *extension_ranges;
  size_t extension_range_count; /* 5 */
  pc_OneofDesc *oneofs;
  size_t oneof_count;     /* 8 */
  pc_OptionsDesc options; /* 7: MessageOptions; map_entry (7) decoded below */
  int map_entry;
  int message_set_wire_format;   /* MessageOptions 1 */
  pc_RangeDesc *reserved_ranges; /* 9; end exclusive */
  size_t reserved_range_count;
  const char **reserved_names; /* 10 */
  size_t reserved_name_count;
  int line, column;
} pc_MessageDesc;

/* Where a custom option (an extension of the *Options message) was set in
 * .proto source: the extension's field number and the line and column
 * (from 1) of the option's name, `(google.api.http)`, as written the first
 * time ("option (pkg.ext).a = 1; option (pkg.ext).b = 2;": the first). */
typedef struct {
  int32_t number;
  int line, column;
} pc_OptionPos;

typedef struct {
  const char *name;        /* 1 */
  const char *input_type;  /* 2 */
  const char *output_type; /* 3 */
  pc_OptionsDesc options;  /* 4: MethodOptions */
  int client_streaming;    /* 5 */
  int server_streaming;    /* 6 */
  int line, column;
  /* Where the input [0] and output [1] types were written (0 when unknown) */
  int type_line[2], type_column[2];
  /* Where its custom options were set (.proto source only; none when unknown) */
  pc_OptionPos *option_positions;
  size_t option_position_count;
} pc_MethodDesc;

typedef struct {
  const char *name; /* 1 */
  pc_MethodDesc *methods;
  size_t method_count;    /* 2 */
  pc_OptionsDesc options; /* 3: ServiceOptions */
  int line, column;
} pc_ServiceDesc;

/* protoc's limits on a package name (kMaximumPackageLength, kPackageLimit):
 * longer is "Package name is too long", more dots "Exceeds Maximum Package
 * Depth". */
#define PC_PACKAGE_MAX_LENGTH 511
#define PC_PACKAGE_MAX_DOTS   100

typedef struct {
  const char *name;    /* 1: "google/protobuf/any.proto" */
  const char *package; /* 2; NULL when none */
  const char **dependencies;
  size_t dependency_count; /* 3 */
  int32_t *public_dependencies;
  size_t public_dependency_count; /* 10: indexes into dependencies */
  int32_t *weak_dependencies;
  size_t weak_dependency_count; /* 11 */
  pc_MessageDesc *messages;
  size_t message_count; /* 4 */
  pc_EnumDesc *enums;
  size_t enum_count; /* 5 */
  pc_ServiceDesc *services;
  size_t service_count; /* 6 */
  pc_FieldDesc *extensions;
  size_t extension_count;           /* 7 */
  pc_OptionsDesc options;           /* 8: FileOptions */
  pc_Syntax syntax;                 /* 12: "proto2" (or absent) / "proto3" */
  int package_line, package_column; /* of the package statement (0 when unknown) */
} pc_FileDesc;

/* "int32", "string", "message", ... for a pc_FieldType (the .proto spelling;
 * "group" and "message" for those), or NULL for a value outside 1..18. */
const char *pc_FieldType_Name(int type);

/* The pc_FieldType whose .proto keyword is the 'len' bytes at 'name'
 * ("int32" ... "sint64", "bool", "string", "bytes"), or 0 when 'name' is not
 * a scalar type keyword. */
pc_FieldType pc_FieldType_FromName(const char *name, size_t len);

/* protoc's default json_name for a field name: underscores dropped, the
 * letter after each underscore upper-cased ("foo_bar_baz" -> "fooBarBaz").
 * Writes at most 'cap' bytes including the NUL into 'out'; returns the
 * length it needs (excluding the NUL), which is at most strlen(name). */
size_t pc_JsonName(const char *name, char *out, size_t cap);

#endif
