/* The well-known types and google/rpc's status files, as .proto text
 * written for protocall (names, numbers and options are protobuf's and
 * googleapis' facts; the text is our own). See wkt.h. */
#include "schema/wkt.h"

#include <string.h>

/* clang-format off: .proto text, one source line per line */
static const char k_any[] =
    "syntax = \"proto3\";\n"
    "package google.protobuf;\n"
    "option csharp_namespace = \"Google.Protobuf.WellKnownTypes\";\n"
    "option go_package = \"google.golang.org/protobuf/types/known/anypb\";\n"
    "option java_package = \"com.google.protobuf\";\n"
    "option java_outer_classname = \"AnyProto\";\n"
    "option java_multiple_files = true;\n"
    "option objc_class_prefix = \"GPB\";\n"
    "message Any {\n"
    "  string type_url = 1;\n"
    "  bytes value = 2;\n"
    "}\n";

static const char k_api[] =
    "syntax = \"proto3\";\n"
    "package google.protobuf;\n"
    "import \"google/protobuf/source_context.proto\";\n"
    "import \"google/protobuf/type.proto\";\n"
    "option csharp_namespace = \"Google.Protobuf.WellKnownTypes\";\n"
    "option java_package = \"com.google.protobuf\";\n"
    "option java_outer_classname = \"ApiProto\";\n"
    "option java_multiple_files = true;\n"
    "option objc_class_prefix = \"GPB\";\n"
    "option go_package = \"google.golang.org/protobuf/types/known/apipb\";\n"
    "message Api {\n"
    "  string name = 1;\n"
    "  repeated Method methods = 2;\n"
    "  repeated Option options = 3;\n"
    "  string version = 4;\n"
    "  SourceContext source_context = 5;\n"
    "  repeated Mixin mixins = 6;\n"
    "  Syntax syntax = 7;\n"
    "}\n"
    "message Method {\n"
    "  string name = 1;\n"
    "  string request_type_url = 2;\n"
    "  bool request_streaming = 3;\n"
    "  string response_type_url = 4;\n"
    "  bool response_streaming = 5;\n"
    "  repeated Option options = 6;\n"
    "  Syntax syntax = 7;\n"
    "}\n"
    "message Mixin {\n"
    "  string name = 1;\n"
    "  string root = 2;\n"
    "}\n";

static const char k_descriptor[] =
    "// google/protobuf/descriptor.proto as written by protocall: descriptor.proto's\n"
    "// messages with their names, numbers, defaults and options.\n"
    "syntax = \"proto2\";\n"
    "\n"
    "package google.protobuf;\n"
    "\n"
    "option go_package = \"google.golang.org/protobuf/types/descriptorpb\";\n"
    "option java_package = \"com.google.protobuf\";\n"
    "option java_outer_classname = \"DescriptorProtos\";\n"
    "option csharp_namespace = \"Google.Protobuf.Reflection\";\n"
    "option objc_class_prefix = \"GPB\";\n"
    "option cc_enable_arenas = true;\n"
    "option optimize_for = SPEED;\n"
    "\n"
    "message FileDescriptorSet {\n"
    "  repeated FileDescriptorProto file = 1;\n"
    "}\n"
    "\n"
    "message FileDescriptorProto {\n"
    "  optional string name = 1;\n"
    "  optional string package = 2;\n"
    "  repeated string dependency = 3;\n"
    "  repeated int32 public_dependency = 10;\n"
    "  repeated int32 weak_dependency = 11;\n"
    "  repeated DescriptorProto message_type = 4;\n"
    "  repeated EnumDescriptorProto enum_type = 5;\n"
    "  repeated ServiceDescriptorProto service = 6;\n"
    "  repeated FieldDescriptorProto extension = 7;\n"
    "  optional FileOptions options = 8;\n"
    "  optional SourceCodeInfo source_code_info = 9;\n"
    "  optional string syntax = 12;\n"
    "}\n"
    "\n"
    "message DescriptorProto {\n"
    "  optional string name = 1;\n"
    "  repeated FieldDescriptorProto field = 2;\n"
    "  repeated FieldDescriptorProto extension = 6;\n"
    "  repeated DescriptorProto nested_type = 3;\n"
    "  repeated EnumDescriptorProto enum_type = 4;\n"
    "  message ExtensionRange {\n"
    "    optional int32 start = 1;\n"
    "    optional int32 end = 2;\n"
    "    optional ExtensionRangeOptions options = 3;\n"
    "  }\n"
    "  repeated ExtensionRange extension_range = 5;\n"
    "  repeated OneofDescriptorProto oneof_decl = 8;\n"
    "  optional MessageOptions options = 7;\n"
    "  message ReservedRange {\n"
    "    optional int32 start = 1;\n"
    "    optional int32 end = 2;\n"
    "  }\n"
    "  repeated ReservedRange reserved_range = 9;\n"
    "  repeated string reserved_name = 10;\n"
    "}\n"
    "\n"
    "message ExtensionRangeOptions {\n"
    "  repeated UninterpretedOption uninterpreted_option = 999;\n"
    "  extensions 1000 to max;\n"
    "}\n"
    "\n"
    "message FieldDescriptorProto {\n"
    "  enum Type {\n"
    "    TYPE_DOUBLE = 1;\n"
    "    TYPE_FLOAT = 2;\n"
    "    TYPE_INT64 = 3;\n"
    "    TYPE_UINT64 = 4;\n"
    "    TYPE_INT32 = 5;\n"
    "    TYPE_FIXED64 = 6;\n"
    "    TYPE_FIXED32 = 7;\n"
    "    TYPE_BOOL = 8;\n"
    "    TYPE_STRING = 9;\n"
    "    TYPE_GROUP = 10;\n"
    "    TYPE_MESSAGE = 11;\n"
    "    TYPE_BYTES = 12;\n"
    "    TYPE_UINT32 = 13;\n"
    "    TYPE_ENUM = 14;\n"
    "    TYPE_SFIXED32 = 15;\n"
    "    TYPE_SFIXED64 = 16;\n"
    "    TYPE_SINT32 = 17;\n"
    "    TYPE_SINT64 = 18;\n"
    "  }\n"
    "  enum Label {\n"
    "    LABEL_OPTIONAL = 1;\n"
    "    LABEL_REQUIRED = 2;\n"
    "    LABEL_REPEATED = 3;\n"
    "  }\n"
    "  optional string name = 1;\n"
    "  optional int32 number = 3;\n"
    "  optional Label label = 4;\n"
    "  optional Type type = 5;\n"
    "  optional string type_name = 6;\n"
    "  optional string extendee = 2;\n"
    "  optional string default_value = 7;\n"
    "  optional int32 oneof_index = 9;\n"
    "  optional string json_name = 10;\n"
    "  optional FieldOptions options = 8;\n"
    "  optional bool proto3_optional = 17;\n"
    "}\n"
    "\n"
    "message OneofDescriptorProto {\n"
    "  optional string name = 1;\n"
    "  optional OneofOptions options = 2;\n"
    "}\n"
    "\n"
    "message EnumDescriptorProto {\n"
    "  optional string name = 1;\n"
    "  repeated EnumValueDescriptorProto value = 2;\n"
    "  optional EnumOptions options = 3;\n"
    "  message EnumReservedRange {\n"
    "    optional int32 start = 1;\n"
    "    optional int32 end = 2;\n"
    "  }\n"
    "  repeated EnumReservedRange reserved_range = 4;\n"
    "  repeated string reserved_name = 5;\n"
    "}\n"
    "\n"
    "message EnumValueDescriptorProto {\n"
    "  optional string name = 1;\n"
    "  optional int32 number = 2;\n"
    "  optional EnumValueOptions options = 3;\n"
    "}\n"
    "\n"
    "message ServiceDescriptorProto {\n"
    "  optional string name = 1;\n"
    "  repeated MethodDescriptorProto method = 2;\n"
    "  optional ServiceOptions options = 3;\n"
    "}\n"
    "\n"
    "message MethodDescriptorProto {\n"
    "  optional string name = 1;\n"
    "  optional string input_type = 2;\n"
    "  optional string output_type = 3;\n"
    "  optional MethodOptions options = 4;\n"
    "  optional bool client_streaming = 5 [default = false];\n"
    "  optional bool server_streaming = 6 [default = false];\n"
    "}\n"
    "\n"
    "message FileOptions {\n"
    "  optional string java_package = 1;\n"
    "  optional string java_outer_classname = 8;\n"
    "  optional bool java_multiple_files = 10 [default = false];\n"
    "  optional bool java_generate_equals_and_hash = 20 [deprecated = true];\n"
    "  optional bool java_string_check_utf8 = 27 [default = false];\n"
    "  enum OptimizeMode {\n"
    "    SPEED = 1;\n"
    "    CODE_SIZE = 2;\n"
    "    LITE_RUNTIME = 3;\n"
    "  }\n"
    "  optional OptimizeMode optimize_for = 9 [default = SPEED];\n"
    "  optional string go_package = 11;\n"
    "  optional bool cc_generic_services = 16 [default = false];\n"
    "  optional bool java_generic_services = 17 [default = false];\n"
    "  optional bool py_generic_services = 18 [default = false];\n"
    "  optional bool php_generic_services = 42 [default = false];\n"
    "  optional bool deprecated = 23 [default = false];\n"
    "  optional bool cc_enable_arenas = 31 [default = true];\n"
    "  optional string objc_class_prefix = 36;\n"
    "  optional string csharp_namespace = 37;\n"
    "  optional string swift_prefix = 39;\n"
    "  optional string php_class_prefix = 40;\n"
    "  optional string php_namespace = 41;\n"
    "  optional string php_metadata_namespace = 44;\n"
    "  optional string ruby_package = 45;\n"
    "  repeated UninterpretedOption uninterpreted_option = 999;\n"
    "  extensions 1000 to max;\n"
    "  reserved 38;\n"
    "}\n"
    "\n"
    "message MessageOptions {\n"
    "  optional bool message_set_wire_format = 1 [default = false];\n"
    "  optional bool no_standard_descriptor_accessor = 2 [default = false];\n"
    "  optional bool deprecated = 3 [default = false];\n"
    "  reserved 4, 5, 6;\n"
    "  optional bool map_entry = 7;\n"
    "  reserved 8;\n"
    "  reserved 9;\n"
    "  repeated UninterpretedOption uninterpreted_option = 999;\n"
    "  extensions 1000 to max;\n"
    "}\n"
    "\n"
    "message FieldOptions {\n"
    "  optional CType ctype = 1 [default = STRING];\n"
    "  enum CType {\n"
    "    STRING = 0;\n"
    "    CORD = 1;\n"
    "    STRING_PIECE = 2;\n"
    "  }\n"
    "  optional bool packed = 2;\n"
    "  optional JSType jstype = 6 [default = JS_NORMAL];\n"
    "  enum JSType {\n"
    "    JS_NORMAL = 0;\n"
    "    JS_STRING = 1;\n"
    "    JS_NUMBER = 2;\n"
    "  }\n"
    "  optional bool lazy = 5 [default = false];\n"
    "  optional bool unverified_lazy = 15 [default = false];\n"
    "  optional bool deprecated = 3 [default = false];\n"
    "  optional bool weak = 10 [default = false];\n"
    "  repeated UninterpretedOption uninterpreted_option = 999;\n"
    "  extensions 1000 to max;\n"
    "  reserved 4;\n"
    "}\n"
    "\n"
    "message OneofOptions {\n"
    "  repeated UninterpretedOption uninterpreted_option = 999;\n"
    "  extensions 1000 to max;\n"
    "}\n"
    "\n"
    "message EnumOptions {\n"
    "  optional bool allow_alias = 2;\n"
    "  optional bool deprecated = 3 [default = false];\n"
    "  reserved 5;\n"
    "  repeated UninterpretedOption uninterpreted_option = 999;\n"
    "  extensions 1000 to max;\n"
    "}\n"
    "\n"
    "message EnumValueOptions {\n"
    "  optional bool deprecated = 1 [default = false];\n"
    "  repeated UninterpretedOption uninterpreted_option = 999;\n"
    "  extensions 1000 to max;\n"
    "}\n"
    "\n"
    "message ServiceOptions {\n"
    "  optional bool deprecated = 33 [default = false];\n"
    "  repeated UninterpretedOption uninterpreted_option = 999;\n"
    "  extensions 1000 to max;\n"
    "}\n"
    "\n"
    "message MethodOptions {\n"
    "  optional bool deprecated = 33 [default = false];\n"
    "  enum IdempotencyLevel {\n"
    "    IDEMPOTENCY_UNKNOWN = 0;\n"
    "    NO_SIDE_EFFECTS = 1;\n"
    "    IDEMPOTENT = 2;\n"
    "  }\n"
    "  optional IdempotencyLevel idempotency_level = 34 [default = IDEMPOTENCY_UNKNOWN];\n"
    "  repeated UninterpretedOption uninterpreted_option = 999;\n"
    "  extensions 1000 to max;\n"
    "}\n"
    "\n"
    "message UninterpretedOption {\n"
    "  message NamePart {\n"
    "    required string name_part = 1;\n"
    "    required bool is_extension = 2;\n"
    "  }\n"
    "  repeated NamePart name = 2;\n"
    "  optional string identifier_value = 3;\n"
    "  optional uint64 positive_int_value = 4;\n"
    "  optional int64 negative_int_value = 5;\n"
    "  optional double double_value = 6;\n"
    "  optional bytes string_value = 7;\n"
    "  optional string aggregate_value = 8;\n"
    "}\n"
    "\n"
    "message SourceCodeInfo {\n"
    "  repeated Location location = 1;\n"
    "  message Location {\n"
    "    repeated int32 path = 1 [packed = true];\n"
    "    repeated int32 span = 2 [packed = true];\n"
    "    optional string leading_comments = 3;\n"
    "    optional string trailing_comments = 4;\n"
    "    repeated string leading_detached_comments = 6;\n"
    "  }\n"
    "}\n"
    "\n"
    "message GeneratedCodeInfo {\n"
    "  repeated Annotation annotation = 1;\n"
    "  message Annotation {\n"
    "    repeated int32 path = 1 [packed = true];\n"
    "    optional string source_file = 2;\n"
    "    optional int32 begin = 3;\n"
    "    optional int32 end = 4;\n"
    "  }\n"
    "}\n";

static const char k_duration[] =
    "syntax = \"proto3\";\n"
    "package google.protobuf;\n"
    "option csharp_namespace = \"Google.Protobuf.WellKnownTypes\";\n"
    "option cc_enable_arenas = true;\n"
    "option go_package = \"google.golang.org/protobuf/types/known/durationpb\";\n"
    "option java_package = \"com.google.protobuf\";\n"
    "option java_outer_classname = \"DurationProto\";\n"
    "option java_multiple_files = true;\n"
    "option objc_class_prefix = \"GPB\";\n"
    "message Duration {\n"
    "  int64 seconds = 1;\n"
    "  int32 nanos = 2;\n"
    "}\n";

static const char k_empty[] =
    "syntax = \"proto3\";\n"
    "package google.protobuf;\n"
    "option csharp_namespace = \"Google.Protobuf.WellKnownTypes\";\n"
    "option go_package = \"google.golang.org/protobuf/types/known/emptypb\";\n"
    "option java_package = \"com.google.protobuf\";\n"
    "option java_outer_classname = \"EmptyProto\";\n"
    "option java_multiple_files = true;\n"
    "option objc_class_prefix = \"GPB\";\n"
    "option cc_enable_arenas = true;\n"
    "message Empty {}\n";

static const char k_field_mask[] =
    "syntax = \"proto3\";\n"
    "package google.protobuf;\n"
    "option csharp_namespace = \"Google.Protobuf.WellKnownTypes\";\n"
    "option java_package = \"com.google.protobuf\";\n"
    "option java_outer_classname = \"FieldMaskProto\";\n"
    "option java_multiple_files = true;\n"
    "option objc_class_prefix = \"GPB\";\n"
    "option go_package = \"google.golang.org/protobuf/types/known/fieldmaskpb\";\n"
    "option cc_enable_arenas = true;\n"
    "message FieldMask {\n"
    "  repeated string paths = 1;\n"
    "}\n";

static const char k_source_context[] =
    "syntax = \"proto3\";\n"
    "package google.protobuf;\n"
    "option csharp_namespace = \"Google.Protobuf.WellKnownTypes\";\n"
    "option java_package = \"com.google.protobuf\";\n"
    "option java_outer_classname = \"SourceContextProto\";\n"
    "option java_multiple_files = true;\n"
    "option objc_class_prefix = \"GPB\";\n"
    "option go_package = \"google.golang.org/protobuf/types/known/sourcecontextpb\";\n"
    "message SourceContext {\n"
    "  string file_name = 1;\n"
    "}\n";

static const char k_struct[] =
    "syntax = \"proto3\";\n"
    "package google.protobuf;\n"
    "option cc_enable_arenas = true;\n"
    "option go_package = \"google.golang.org/protobuf/types/known/structpb\";\n"
    "option java_package = \"com.google.protobuf\";\n"
    "option java_outer_classname = \"StructProto\";\n"
    "option java_multiple_files = true;\n"
    "option objc_class_prefix = \"GPB\";\n"
    "option csharp_namespace = \"Google.Protobuf.WellKnownTypes\";\n"
    "message Struct {\n"
    "  map<string, Value> fields = 1;\n"
    "}\n"
    "message Value {\n"
    "  oneof kind {\n"
    "    NullValue null_value = 1;\n"
    "    double number_value = 2;\n"
    "    string string_value = 3;\n"
    "    bool bool_value = 4;\n"
    "    Struct struct_value = 5;\n"
    "    ListValue list_value = 6;\n"
    "  }\n"
    "}\n"
    "enum NullValue {\n"
    "  NULL_VALUE = 0;\n"
    "}\n"
    "message ListValue {\n"
    "  repeated Value values = 1;\n"
    "}\n";

static const char k_timestamp[] =
    "syntax = \"proto3\";\n"
    "package google.protobuf;\n"
    "option csharp_namespace = \"Google.Protobuf.WellKnownTypes\";\n"
    "option cc_enable_arenas = true;\n"
    "option go_package = \"google.golang.org/protobuf/types/known/timestamppb\";\n"
    "option java_package = \"com.google.protobuf\";\n"
    "option java_outer_classname = \"TimestampProto\";\n"
    "option java_multiple_files = true;\n"
    "option objc_class_prefix = \"GPB\";\n"
    "message Timestamp {\n"
    "  int64 seconds = 1;\n"
    "  int32 nanos = 2;\n"
    "}\n";

static const char k_type[] =
    "syntax = \"proto3\";\n"
    "package google.protobuf;\n"
    "import \"google/protobuf/any.proto\";\n"
    "import \"google/protobuf/source_context.proto\";\n"
    "option cc_enable_arenas = true;\n"
    "option java_package = \"com.google.protobuf\";\n"
    "option java_outer_classname = \"TypeProto\";\n"
    "option java_multiple_files = true;\n"
    "option objc_class_prefix = \"GPB\";\n"
    "option csharp_namespace = \"Google.Protobuf.WellKnownTypes\";\n"
    "option go_package = \"google.golang.org/protobuf/types/known/typepb\";\n"
    "message Type {\n"
    "  string name = 1;\n"
    "  repeated Field fields = 2;\n"
    "  repeated string oneofs = 3;\n"
    "  repeated Option options = 4;\n"
    "  SourceContext source_context = 5;\n"
    "  Syntax syntax = 6;\n"
    "}\n"
    "message Field {\n"
    "  enum Kind {\n"
    "    TYPE_UNKNOWN = 0;\n"
    "    TYPE_DOUBLE = 1;\n"
    "    TYPE_FLOAT = 2;\n"
    "    TYPE_INT64 = 3;\n"
    "    TYPE_UINT64 = 4;\n"
    "    TYPE_INT32 = 5;\n"
    "    TYPE_FIXED64 = 6;\n"
    "    TYPE_FIXED32 = 7;\n"
    "    TYPE_BOOL = 8;\n"
    "    TYPE_STRING = 9;\n"
    "    TYPE_GROUP = 10;\n"
    "    TYPE_MESSAGE = 11;\n"
    "    TYPE_BYTES = 12;\n"
    "    TYPE_UINT32 = 13;\n"
    "    TYPE_ENUM = 14;\n"
    "    TYPE_SFIXED32 = 15;\n"
    "    TYPE_SFIXED64 = 16;\n"
    "    TYPE_SINT32 = 17;\n"
    "    TYPE_SINT64 = 18;\n"
    "  }\n"
    "  enum Cardinality {\n"
    "    CARDINALITY_UNKNOWN = 0;\n"
    "    CARDINALITY_OPTIONAL = 1;\n"
    "    CARDINALITY_REQUIRED = 2;\n"
    "    CARDINALITY_REPEATED = 3;\n"
    "  }\n"
    "  Kind kind = 1;\n"
    "  Cardinality cardinality = 2;\n"
    "  int32 number = 3;\n"
    "  string name = 4;\n"
    "  string type_url = 6;\n"
    "  int32 oneof_index = 7;\n"
    "  bool packed = 8;\n"
    "  repeated Option options = 9;\n"
    "  string json_name = 10;\n"
    "  string default_value = 11;\n"
    "}\n"
    "message Enum {\n"
    "  string name = 1;\n"
    "  repeated EnumValue enumvalue = 2;\n"
    "  repeated Option options = 3;\n"
    "  SourceContext source_context = 4;\n"
    "  Syntax syntax = 5;\n"
    "}\n"
    "message EnumValue {\n"
    "  string name = 1;\n"
    "  int32 number = 2;\n"
    "  repeated Option options = 3;\n"
    "}\n"
    "message Option {\n"
    "  string name = 1;\n"
    "  Any value = 2;\n"
    "}\n"
    "enum Syntax {\n"
    "  SYNTAX_PROTO2 = 0;\n"
    "  SYNTAX_PROTO3 = 1;\n"
    "}\n";

static const char k_wrappers[] =
    "syntax = \"proto3\";\n"
    "package google.protobuf;\n"
    "option cc_enable_arenas = true;\n"
    "option go_package = \"google.golang.org/protobuf/types/known/wrapperspb\";\n"
    "option java_package = \"com.google.protobuf\";\n"
    "option java_outer_classname = \"WrappersProto\";\n"
    "option java_multiple_files = true;\n"
    "option objc_class_prefix = \"GPB\";\n"
    "option csharp_namespace = \"Google.Protobuf.WellKnownTypes\";\n"
    "message DoubleValue {\n"
    "  double value = 1;\n"
    "}\n"
    "message FloatValue {\n"
    "  float value = 1;\n"
    "}\n"
    "message Int64Value {\n"
    "  int64 value = 1;\n"
    "}\n"
    "message UInt64Value {\n"
    "  uint64 value = 1;\n"
    "}\n"
    "message Int32Value {\n"
    "  int32 value = 1;\n"
    "}\n"
    "message UInt32Value {\n"
    "  uint32 value = 1;\n"
    "}\n"
    "message BoolValue {\n"
    "  bool value = 1;\n"
    "}\n"
    "message StringValue {\n"
    "  string value = 1;\n"
    "}\n"
    "message BytesValue {\n"
    "  bytes value = 1;\n"
    "}\n";

/* google/rpc: the status details of gRPC's rich errors. */
static const char k_rpc_code[] =
    "syntax = \"proto3\";\n"
    "package google.rpc;\n"
    "option go_package = \"google.golang.org/genproto/googleapis/rpc/code;code\";\n"
    "option java_multiple_files = true;\n"
    "option java_outer_classname = \"CodeProto\";\n"
    "option java_package = \"com.google.rpc\";\n"
    "option objc_class_prefix = \"RPC\";\n"
    "enum Code {\n"
    "  OK = 0;\n"
    "  CANCELLED = 1;\n"
    "  UNKNOWN = 2;\n"
    "  INVALID_ARGUMENT = 3;\n"
    "  DEADLINE_EXCEEDED = 4;\n"
    "  NOT_FOUND = 5;\n"
    "  ALREADY_EXISTS = 6;\n"
    "  PERMISSION_DENIED = 7;\n"
    "  UNAUTHENTICATED = 16;\n"
    "  RESOURCE_EXHAUSTED = 8;\n"
    "  FAILED_PRECONDITION = 9;\n"
    "  ABORTED = 10;\n"
    "  OUT_OF_RANGE = 11;\n"
    "  UNIMPLEMENTED = 12;\n"
    "  INTERNAL = 13;\n"
    "  UNAVAILABLE = 14;\n"
    "  DATA_LOSS = 15;\n"
    "}\n";

static const char k_rpc_error_details[] =
    "syntax = \"proto3\";\n"
    "package google.rpc;\n"
    "import \"google/protobuf/duration.proto\";\n"
    "option go_package = \"google.golang.org/genproto/googleapis/rpc/errdetails;errdetails\";\n"
    "option java_multiple_files = true;\n"
    "option java_outer_classname = \"ErrorDetailsProto\";\n"
    "option java_package = \"com.google.rpc\";\n"
    "option objc_class_prefix = \"RPC\";\n"
    "message ErrorInfo {\n"
    "  string reason = 1;\n"
    "  string domain = 2;\n"
    "  map<string, string> metadata = 3;\n"
    "}\n"
    "message RetryInfo {\n"
    "  google.protobuf.Duration retry_delay = 1;\n"
    "}\n"
    "message DebugInfo {\n"
    "  repeated string stack_entries = 1;\n"
    "  string detail = 2;\n"
    "}\n"
    "message QuotaFailure {\n"
    "  message Violation {\n"
    "    string subject = 1;\n"
    "    string description = 2;\n"
    "    string api_service = 3;\n"
    "    string quota_metric = 4;\n"
    "    string quota_id = 5;\n"
    "    map<string, string> quota_dimensions = 6;\n"
    "    int64 quota_value = 7;\n"
    "    optional int64 future_quota_value = 8;\n"
    "  }\n"
    "  repeated Violation violations = 1;\n"
    "}\n"
    "message PreconditionFailure {\n"
    "  message Violation {\n"
    "    string type = 1;\n"
    "    string subject = 2;\n"
    "    string description = 3;\n"
    "  }\n"
    "  repeated Violation violations = 1;\n"
    "}\n"
    "message BadRequest {\n"
    "  message FieldViolation {\n"
    "    string field = 1;\n"
    "    string description = 2;\n"
    "    string reason = 3;\n"
    "    LocalizedMessage localized_message = 4;\n"
    "  }\n"
    "  repeated FieldViolation field_violations = 1;\n"
    "}\n"
    "message RequestInfo {\n"
    "  string request_id = 1;\n"
    "  string serving_data = 2;\n"
    "}\n"
    "message ResourceInfo {\n"
    "  string resource_type = 1;\n"
    "  string resource_name = 2;\n"
    "  string owner = 3;\n"
    "  string description = 4;\n"
    "}\n"
    "message Help {\n"
    "  message Link {\n"
    "    string description = 1;\n"
    "    string url = 2;\n"
    "  }\n"
    "  repeated Link links = 1;\n"
    "}\n"
    "message LocalizedMessage {\n"
    "  string locale = 1;\n"
    "  string message = 2;\n"
    "}\n";

static const char k_rpc_status[] =
    "syntax = \"proto3\";\n"
    "package google.rpc;\n"
    "import \"google/protobuf/any.proto\";\n"
    "option go_package = \"google.golang.org/genproto/googleapis/rpc/status;status\";\n"
    "option java_multiple_files = true;\n"
    "option java_outer_classname = \"StatusProto\";\n"
    "option java_package = \"com.google.rpc\";\n"
    "option objc_class_prefix = \"RPC\";\n"
    "message Status {\n"
    "  int32 code = 1;\n"
    "  string message = 2;\n"
    "  repeated google.protobuf.Any details = 3;\n"
    "}\n";

/* gRPC's health and reflection services (grpc-proto's files, same names,
 * numbers and options), served by lua/protocall/rpc/health.lua and rpc/reflection.lua. */
static const char k_health[] =
    "syntax = \"proto3\";\n"
    "package grpc.health.v1;\n"
    "option csharp_namespace = \"Grpc.Health.V1\";\n"
    "option go_package = \"google.golang.org/grpc/health/grpc_health_v1\";\n"
    "option java_multiple_files = true;\n"
    "option java_outer_classname = \"HealthProto\";\n"
    "option java_package = \"io.grpc.health.v1\";\n"
    "message HealthCheckRequest {\n"
    "  string service = 1;\n"
    "}\n"
    "message HealthCheckResponse {\n"
    "  enum ServingStatus {\n"
    "    UNKNOWN = 0;\n"
    "    SERVING = 1;\n"
    "    NOT_SERVING = 2;\n"
    "    SERVICE_UNKNOWN = 3;\n"
    "  }\n"
    "  ServingStatus status = 1;\n"
    "}\n"
    "service Health {\n"
    "  rpc Check(HealthCheckRequest) returns (HealthCheckResponse);\n"
    "  rpc Watch(HealthCheckRequest) returns (stream HealthCheckResponse);\n"
    "}\n";

/* grpc/reflection/v1/reflection.proto and its v1alpha twin (deprecated). */
static const char k_reflection_v1[] =
    "syntax = \"proto3\";\n"
    "package grpc.reflection.v1;\n"
    "option go_package = \"google.golang.org/grpc/reflection/grpc_reflection_v1\";\n"
    "option java_multiple_files = true;\n"
    "option java_package = \"io.grpc.reflection.v1\";\n"
    "option java_outer_classname = \"ServerReflectionProto\";\n"
    "service ServerReflection {\n"
    "  rpc ServerReflectionInfo(stream ServerReflectionRequest)\n"
    "      returns (stream ServerReflectionResponse);\n"
    "}\n"
    "message ServerReflectionRequest {\n"
    "  string host = 1;\n"
    "  oneof message_request {\n"
    "    string file_by_filename = 3;\n"
    "    string file_containing_symbol = 4;\n"
    "    ExtensionRequest file_containing_extension = 5;\n"
    "    string all_extension_numbers_of_type = 6;\n"
    "    string list_services = 7;\n"
    "  }\n"
    "}\n"
    "message ExtensionRequest {\n"
    "  string containing_type = 1;\n"
    "  int32 extension_number = 2;\n"
    "}\n"
    "message ServerReflectionResponse {\n"
    "  string valid_host = 1;\n"
    "  ServerReflectionRequest original_request = 2;\n"
    "  oneof message_response {\n"
    "    FileDescriptorResponse file_descriptor_response = 4;\n"
    "    ExtensionNumberResponse all_extension_numbers_response = 5;\n"
    "    ListServiceResponse list_services_response = 6;\n"
    "    ErrorResponse error_response = 7;\n"
    "  }\n"
    "}\n"
    "message FileDescriptorResponse {\n"
    "  repeated bytes file_descriptor_proto = 1;\n"
    "}\n"
    "message ExtensionNumberResponse {\n"
    "  string base_type_name = 1;\n"
    "  repeated int32 extension_number = 2;\n"
    "}\n"
    "message ListServiceResponse {\n"
    "  repeated ServiceResponse service = 1;\n"
    "}\n"
    "message ServiceResponse {\n"
    "  string name = 1;\n"
    "}\n"
    "message ErrorResponse {\n"
    "  int32 error_code = 1;\n"
    "  string error_message = 2;\n"
    "}\n";

static const char k_reflection_v1alpha[] =
    "syntax = \"proto3\";\n"
    "package grpc.reflection.v1alpha;\n"
    "option deprecated = true;\n"
    "option go_package = \"google.golang.org/grpc/reflection/grpc_reflection_v1alpha\";\n"
    "option java_multiple_files = true;\n"
    "option java_package = \"io.grpc.reflection.v1alpha\";\n"
    "option java_outer_classname = \"ServerReflectionProto\";\n"
    "service ServerReflection {\n"
    "  rpc ServerReflectionInfo(stream ServerReflectionRequest)\n"
    "      returns (stream ServerReflectionResponse);\n"
    "}\n"
    "message ServerReflectionRequest {\n"
    "  string host = 1;\n"
    "  oneof message_request {\n"
    "    string file_by_filename = 3;\n"
    "    string file_containing_symbol = 4;\n"
    "    ExtensionRequest file_containing_extension = 5;\n"
    "    string all_extension_numbers_of_type = 6;\n"
    "    string list_services = 7;\n"
    "  }\n"
    "}\n"
    "message ExtensionRequest {\n"
    "  string containing_type = 1;\n"
    "  int32 extension_number = 2;\n"
    "}\n"
    "message ServerReflectionResponse {\n"
    "  string valid_host = 1;\n"
    "  ServerReflectionRequest original_request = 2;\n"
    "  oneof message_response {\n"
    "    FileDescriptorResponse file_descriptor_response = 4;\n"
    "    ExtensionNumberResponse all_extension_numbers_response = 5;\n"
    "    ListServiceResponse list_services_response = 6;\n"
    "    ErrorResponse error_response = 7;\n"
    "  }\n"
    "}\n"
    "message FileDescriptorResponse {\n"
    "  repeated bytes file_descriptor_proto = 1;\n"
    "}\n"
    "message ExtensionNumberResponse {\n"
    "  string base_type_name = 1;\n"
    "  repeated int32 extension_number = 2;\n"
    "}\n"
    "message ListServiceResponse {\n"
    "  repeated ServiceResponse service = 1;\n"
    "}\n"
    "message ServiceResponse {\n"
    "  string name = 1;\n"
    "}\n"
    "message ErrorResponse {\n"
    "  int32 error_code = 1;\n"
    "  string error_message = 2;\n"
    "}\n";

static const struct {
  const char *name;
  const char *src;
  size_t len;
} kWkt[] = {
    {"google/protobuf/any.proto", k_any, sizeof k_any - 1},
    {"google/protobuf/api.proto", k_api, sizeof k_api - 1},
    {"google/protobuf/descriptor.proto", k_descriptor, sizeof k_descriptor - 1},
    {"google/protobuf/duration.proto", k_duration, sizeof k_duration - 1},
    {"google/protobuf/empty.proto", k_empty, sizeof k_empty - 1},
    {"google/protobuf/field_mask.proto", k_field_mask, sizeof k_field_mask - 1},
    {"google/protobuf/source_context.proto", k_source_context, sizeof k_source_context - 1},
    {"google/protobuf/struct.proto", k_struct, sizeof k_struct - 1},
    {"google/protobuf/timestamp.proto", k_timestamp, sizeof k_timestamp - 1},
    {"google/protobuf/type.proto", k_type, sizeof k_type - 1},
    {"google/protobuf/wrappers.proto", k_wrappers, sizeof k_wrappers - 1},
    {"google/rpc/code.proto", k_rpc_code, sizeof k_rpc_code - 1},
    {"google/rpc/error_details.proto", k_rpc_error_details, sizeof k_rpc_error_details - 1},
    {"google/rpc/status.proto", k_rpc_status, sizeof k_rpc_status - 1},
};

static const struct {
  const char *name;
  const char *src;
  size_t len;
} kGrpc[] = {
    {"grpc/health/v1/health.proto", k_health, sizeof k_health - 1},
    {"grpc/reflection/v1/reflection.proto", k_reflection_v1, sizeof k_reflection_v1 - 1},
    {"grpc/reflection/v1alpha/reflection.proto", k_reflection_v1alpha,
     sizeof k_reflection_v1alpha - 1},
};

/* clang-format on */
const char *pc_Wkt_Source(const char *name, size_t *len) {
  for (size_t i = 0; i < sizeof kWkt / sizeof kWkt[0]; i++) {
    if (strcmp(kWkt[i].name, name) == 0) {
      if (len) *len = kWkt[i].len;
      return kWkt[i].src;
    }
  }
  for (size_t i = 0; i < sizeof kGrpc / sizeof kGrpc[0]; i++) {
    if (strcmp(kGrpc[i].name, name) == 0) {
      if (len) *len = kGrpc[i].len;
      return kGrpc[i].src;
    }
  }
  return NULL;
}

const char *pc_Wkt_Name(size_t i) {
  return i < sizeof kWkt / sizeof kWkt[0] ? kWkt[i].name : NULL;
}

/* Top-level types of each built-in file (descriptor.proto's listed apart). */
static const struct {
  const char *type, *file;
} kWktTypes[] = {{"Any", "any"},
                 {"Api", "api"},
                 {"Method", "api"},
                 {"Mixin", "api"},
                 {"Duration", "duration"},
                 {"Empty", "empty"},
                 {"FieldMask", "field_mask"},
                 {"SourceContext", "source_context"},
                 {"Struct", "struct"},
                 {"Value", "struct"},
                 {"ListValue", "struct"},
                 {"NullValue", "struct"},
                 {"Timestamp", "timestamp"},
                 {"Type", "type"},
                 {"Field", "type"},
                 {"Enum", "type"},
                 {"EnumValue", "type"},
                 {"Option", "type"},
                 {"Syntax", "type"},
                 {"DoubleValue", "wrappers"},
                 {"FloatValue", "wrappers"},
                 {"Int64Value", "wrappers"},
                 {"UInt64Value", "wrappers"},
                 {"Int32Value", "wrappers"},
                 {"UInt32Value", "wrappers"},
                 {"BoolValue", "wrappers"},
                 {"StringValue", "wrappers"},
                 {"BytesValue", "wrappers"},
                 {"FileDescriptorSet", "descriptor"},
                 {"FileDescriptorProto", "descriptor"},
                 {"DescriptorProto", "descriptor"},
                 {"ExtensionRangeOptions", "descriptor"},
                 {"FieldDescriptorProto", "descriptor"},
                 {"OneofDescriptorProto", "descriptor"},
                 {"EnumDescriptorProto", "descriptor"},
                 {"EnumValueDescriptorProto", "descriptor"},
                 {"ServiceDescriptorProto", "descriptor"},
                 {"MethodDescriptorProto", "descriptor"},
                 {"FileOptions", "descriptor"},
                 {"MessageOptions", "descriptor"},
                 {"FieldOptions", "descriptor"},
                 {"OneofOptions", "descriptor"},
                 {"EnumOptions", "descriptor"},
                 {"EnumValueOptions", "descriptor"},
                 {"ServiceOptions", "descriptor"},
                 {"MethodOptions", "descriptor"},
                 {"UninterpretedOption", "descriptor"},
                 {"SourceCodeInfo", "descriptor"},
                 {"GeneratedCodeInfo", "descriptor"}};

/* google.rpc types and the file of each. */
static const struct {
  const char *type, *file;
} kRpcTypes[] = {{"Code", "google/rpc/code.proto"},
                 {"Status", "google/rpc/status.proto"},
                 {"ErrorInfo", "google/rpc/error_details.proto"},
                 {"RetryInfo", "google/rpc/error_details.proto"},
                 {"DebugInfo", "google/rpc/error_details.proto"},
                 {"QuotaFailure", "google/rpc/error_details.proto"},
                 {"PreconditionFailure", "google/rpc/error_details.proto"},
                 {"BadRequest", "google/rpc/error_details.proto"},
                 {"RequestInfo", "google/rpc/error_details.proto"},
                 {"ResourceInfo", "google/rpc/error_details.proto"},
                 {"Help", "google/rpc/error_details.proto"},
                 {"LocalizedMessage", "google/rpc/error_details.proto"}};

const char *pc_Wkt_FileOf(const char *full_name) {
  static const char prefix[] = "google.protobuf.";
  static const char rpc[] = "google.rpc.";
  if (strncmp(full_name, rpc, sizeof rpc - 1) == 0) {
    const char *top = full_name + sizeof rpc - 1;
    size_t len = strcspn(top, ".");
    for (size_t i = 0; i < sizeof kRpcTypes / sizeof kRpcTypes[0]; i++) {
      if (strlen(kRpcTypes[i].type) == len && memcmp(kRpcTypes[i].type, top, len) == 0)
        return kRpcTypes[i].file;
    }
    return NULL;
  }
  if (strncmp(full_name, prefix, sizeof prefix - 1) != 0) return NULL;
  const char *top = full_name + sizeof prefix - 1;
  size_t len = strcspn(top, ".");
  for (size_t i = 0; i < sizeof kWktTypes / sizeof kWktTypes[0]; i++) {
    if (strlen(kWktTypes[i].type) == len && memcmp(kWktTypes[i].type, top, len) == 0) {
      for (size_t j = 0; pc_Wkt_Name(j) != NULL; j++) {
        const char *f = pc_Wkt_Name(j); /* "google/protobuf/<file>.proto" */
        const char *base = f + sizeof "google/protobuf/" - 1;
        size_t blen = strlen(kWktTypes[i].file);
        if (strncmp(base, kWktTypes[i].file, blen) == 0 && strcmp(base + blen, ".proto") == 0)
          return f;
      }
    }
  }
  return NULL;
}
