#include "wire/descriptor_set.h"

#include "base/hash.h"
#include "wire/decode.h"
#include "message/message.h"

#include <stdio.h>
#include <string.h>

/* descriptor.proto's messages as the reader needs them: names and numbers
 * are descriptor.proto's (protobuf v21.12), flattened into one private
 * package; *Options fields are bytes; Label and Type are read as int32. */
#define PKG "protocall.desc."

typedef struct {
  const char *message; /* message (in PKG) the field belongs to */
  const char *name;
  int32_t number;
  pc_Label label;
  pc_FieldType type;
  const char *type_name; /* message in PKG, for message fields */
} Row;

#define OPT kPc_Label_Optional
#define REP kPc_Label_Repeated
#define STR kPc_Type_String
#define BYT kPc_Type_Bytes
#define I32 kPc_Type_Int32
#define BOO kPc_Type_Bool
#define MSG kPc_Type_Message

/* Rows of one message are consecutive. */
static const Row kRows[] = {
    {"FileDescriptorSet", "file", 1, REP, MSG, "FileDescriptorProto"},
    {"FileDescriptorProto", "name", 1, OPT, STR, NULL},
    {"FileDescriptorProto", "package", 2, OPT, STR, NULL},
    {"FileDescriptorProto", "dependency", 3, REP, STR, NULL},
    {"FileDescriptorProto", "message_type", 4, REP, MSG, "DescriptorProto"},
    {"FileDescriptorProto", "enum_type", 5, REP, MSG, "EnumDescriptorProto"},
    {"FileDescriptorProto", "service", 6, REP, MSG, "ServiceDescriptorProto"},
    {"FileDescriptorProto", "extension", 7, REP, MSG, "FieldDescriptorProto"},
    {"FileDescriptorProto", "options", 8, OPT, BYT, NULL},
    {"FileDescriptorProto", "public_dependency", 10, REP, I32, NULL},
    {"FileDescriptorProto", "weak_dependency", 11, REP, I32, NULL},
    {"FileDescriptorProto", "syntax", 12, OPT, STR, NULL},
    {"DescriptorProto", "name", 1, OPT, STR, NULL},
    {"DescriptorProto", "field", 2, REP, MSG, "FieldDescriptorProto"},
    {"DescriptorProto", "nested_type", 3, REP, MSG, "DescriptorProto"},
    {"DescriptorProto", "enum_type", 4, REP, MSG, "EnumDescriptorProto"},
    {"DescriptorProto", "extension_range", 5, REP, MSG, "ExtensionRange"},
    {"DescriptorProto", "extension", 6, REP, MSG, "FieldDescriptorProto"},
    {"DescriptorProto", "options", 7, OPT, BYT, NULL},
    {"DescriptorProto", "oneof_decl", 8, REP, MSG, "OneofDescriptorProto"},
    {"DescriptorProto", "reserved_range", 9, REP, MSG, "ReservedRange"},
    {"DescriptorProto", "reserved_name", 10, REP, STR, NULL},
    {"ExtensionRange", "start", 1, OPT, I32, NULL},
    {"ExtensionRange", "end", 2, OPT, I32, NULL},
    {"ExtensionRange", "options", 3, OPT, BYT, NULL},
    {"ReservedRange", "start", 1, OPT, I32, NULL},
    {"ReservedRange", "end", 2, OPT, I32, NULL},
    {"FieldDescriptorProto", "name", 1, OPT, STR, NULL},
    {"FieldDescriptorProto", "extendee", 2, OPT, STR, NULL},
    {"FieldDescriptorProto", "number", 3, OPT, I32, NULL},
    {"FieldDescriptorProto", "label", 4, OPT, I32, NULL},
    {"FieldDescriptorProto", "type", 5, OPT, I32, NULL},
    {"FieldDescriptorProto", "type_name", 6, OPT, STR, NULL},
    {"FieldDescriptorProto", "default_value", 7, OPT, STR, NULL},
    {"FieldDescriptorProto", "options", 8, OPT, BYT, NULL},
    {"FieldDescriptorProto", "oneof_index", 9, OPT, I32, NULL},
    {"FieldDescriptorProto", "json_name", 10, OPT, STR, NULL},
    {"FieldDescriptorProto", "proto3_optional", 17, OPT, BOO, NULL},
    {"OneofDescriptorProto", "name", 1, OPT, STR, NULL},
    {"OneofDescriptorProto", "options", 2, OPT, BYT, NULL},
    {"EnumDescriptorProto", "name", 1, OPT, STR, NULL},
    {"EnumDescriptorProto", "value", 2, REP, MSG, "EnumValueDescriptorProto"},
    {"EnumDescriptorProto", "options", 3, OPT, BYT, NULL},
    {"EnumDescriptorProto", "reserved_range", 4, REP, MSG, "ReservedRange"},
    {"EnumDescriptorProto", "reserved_name", 5, REP, STR, NULL},
    {"EnumValueDescriptorProto", "name", 1, OPT, STR, NULL},
    {"EnumValueDescriptorProto", "number", 2, OPT, I32, NULL},
    {"EnumValueDescriptorProto", "options", 3, OPT, BYT, NULL},
    {"ServiceDescriptorProto", "name", 1, OPT, STR, NULL},
    {"ServiceDescriptorProto", "method", 2, REP, MSG, "MethodDescriptorProto"},
    {"ServiceDescriptorProto", "options", 3, OPT, BYT, NULL},
    {"MethodDescriptorProto", "name", 1, OPT, STR, NULL},
    {"MethodDescriptorProto", "input_type", 2, OPT, STR, NULL},
    {"MethodDescriptorProto", "output_type", 3, OPT, STR, NULL},
    {"MethodDescriptorProto", "options", 4, OPT, BYT, NULL},
    {"MethodDescriptorProto", "client_streaming", 5, OPT, BOO, NULL},
    {"MethodDescriptorProto", "server_streaming", 6, OPT, BOO, NULL},
    /* The options that change behaviour, decoded from the options' bytes. */
    {"FieldOptions", "packed", 2, OPT, BOO, NULL},
    {"FieldOptions", "deprecated", 3, OPT, BOO, NULL},
    {"MessageOptions", "message_set_wire_format", 1, OPT, BOO, NULL},
    {"MessageOptions", "map_entry", 7, OPT, BOO, NULL},
    {"EnumOptions", "allow_alias", 2, OPT, BOO, NULL},
};
#define NROWS (sizeof kRows / sizeof kRows[0])

/* The reader's schema as a pc_FileDesc in 'a'. */
static pc_FileDesc *reader_schema(pc_Arena *a) {
  size_t nmsg = 0;
  for (size_t i = 0; i < NROWS; i++)
    if (i == 0 || strcmp(kRows[i].message, kRows[i - 1].message) != 0) nmsg++;
  pc_FileDesc *fd = pc_Arena_Calloc(a, sizeof *fd);
  pc_MessageDesc *msgs = pc_Arena_Calloc(a, nmsg * sizeof *msgs);
  pc_FieldDesc *fields = pc_Arena_Calloc(a, NROWS * sizeof *fields);
  if (fd == NULL || msgs == NULL || fields == NULL) return NULL;
  fd->name = "protocall/descriptor_reader.proto";
  fd->package = "protocall.desc";
  fd->syntax = kPc_Syntax_Proto2;
  fd->messages = msgs;
  fd->message_count = nmsg;
  size_t m = 0;
  for (size_t i = 0; i < NROWS; i++) {
    if (i > 0 && strcmp(kRows[i].message, kRows[i - 1].message) != 0) m++;
    pc_MessageDesc *md = &msgs[m];
    if (md->fields == NULL) {
      md->name = kRows[i].message;
      md->fields = &fields[i];
    }
    md->field_count++;
    pc_FieldDesc *f = &fields[i];
    f->name = kRows[i].name;
    f->number = kRows[i].number;
    f->label = kRows[i].label;
    f->type = kRows[i].type;
    f->oneof_index = -1;
    f->packed = -1;
    f->deprecated = -1;
    if (kRows[i].type_name != NULL) {
      size_t pre = sizeof "." PKG - 1, len = strlen(kRows[i].type_name);
      char *tn = pc_Arena_Malloc(a, pre + len + 1);
      if (tn == NULL) return NULL;
      memcpy(tn, "." PKG, pre);
      memcpy(tn + pre, kRows[i].type_name, len + 1);
      f->type_name = tn;
    }
  }
  return fd;
}

/* Reading decoded messages by field name. */
typedef struct {
  const pc_Pool *pool;
  pc_Arena *out; /* where the pc_FileDesc goes */
  pc_Arena *tmp; /* decoded messages */
  pc_Error *err;
  int oom;
  const char *nul; /* the field of the first string holding a NUL byte, or NULL */
} Reader;

static const pc_FieldDef *fld(const pc_MessageDef *m, const char *name) {
  return pc_MessageDef_FindFieldByName(m, name, strlen(name));
}

static const char *get_str(Reader *r, const pc_Message *msg, const pc_MessageDef *m,
                           const char *name) {
  const pc_FieldDef *f = fld(m, name);
  if (!pc_Message_Has(msg, f)) return NULL;
  pc_StringView s = pc_Message_Get(msg, f).s;
  if (s.data != NULL && memchr(s.data, 0, s.size) != NULL && r->nul == NULL) r->nul = name;
  char *c = pc_Arena_StrDup(r->out, s.data != NULL ? s.data : "", s.size);
  if (c == NULL) r->oom = 1;
  return c;
}

static int32_t get_i32(const pc_Message *msg, const pc_MessageDef *m, const char *name,
                       int32_t dflt) {
  const pc_FieldDef *f = fld(m, name);
  return pc_Message_Has(msg, f) ? pc_Message_Get(msg, f).i32 : dflt;
}

static int get_bool(const pc_Message *msg, const pc_MessageDef *m, const char *name, int dflt) {
  const pc_FieldDef *f = fld(m, name);
  return pc_Message_Has(msg, f) ? pc_Message_Get(msg, f).b != 0 : dflt;
}

static const pc_Array *get_arr(const pc_Message *msg, const pc_MessageDef *m, const char *name,
                               size_t *n) {
  const pc_Array *arr = pc_Message_Get(msg, fld(m, name)).a;
  *n = arr != NULL ? arr->size : 0;
  return arr;
}

static pc_Message *elem_msg(const pc_Array *arr, size_t i) {
  return pc_Array_Get(arr, i, kPc_Slot_Message).m;
}

static void *alloc_n(Reader *r, size_t n, size_t size) {
  if (n == 0) return NULL;
  void *p = pc_Arena_Calloc(r->out, n * size);
  if (p == NULL) r->oom = 1;
  return p;
}

static const pc_MessageDef *def(Reader *r, const char *name) {
  return pc_Pool_FindMessage(r->pool, name);
}

/* The options' bytes, and the options message they decode to (in tmp). */
static pc_OptionsDesc get_options(Reader *r, const pc_Message *msg, const pc_MessageDef *m,
                                  const char *opts_type, pc_Message **decoded,
                                  const pc_MessageDef **odef) {
  pc_OptionsDesc o = {NULL, 0, 0};
  const pc_FieldDef *f = fld(m, "options");
  *decoded = NULL;
  if (!pc_Message_Has(msg, f)) return o;
  pc_StringView s = pc_Message_Get(msg, f).s;
  o.present = 1;
  o.size = s.size;
  if (s.size > 0) {
    uint8_t *copy = pc_Arena_Malloc(r->out, s.size);
    if (copy == NULL) {
      r->oom = 1;
      return o;
    }
    memcpy(copy, s.data, s.size);
    o.data = copy;
  }
  if (opts_type != NULL) {
    *odef = def(r, opts_type);
    pc_Message *om = pc_Message_New(*odef, r->tmp);
    if (om == NULL) {
      r->oom = 1;
      return o;
    }
    /* Custom options that do not parse as the few fields read here are
     * kept in the bytes; a malformed options message only loses those. */
    if (pc_Decode(s.data, s.size, om, *odef, r->tmp, NULL, NULL) == kPc_DecodeStatus_OutOfMemory)
      r->oom = 1;
    *decoded = om;
  }
  return o;
}

static void read_field(Reader *r, const pc_Message *msg, pc_FieldDesc *f) {
  const pc_MessageDef *m = def(r, PKG "FieldDescriptorProto");
  f->name = get_str(r, msg, m, "name");
  f->extendee = get_str(r, msg, m, "extendee");
  f->number = get_i32(msg, m, "number", 0);
  f->label = (pc_Label)get_i32(msg, m, "label", kPc_Label_Optional);
  f->type = (pc_FieldType)get_i32(msg, m, "type", 0);
  f->type_name = get_str(r, msg, m, "type_name");
  const pc_FieldDef *dv = fld(m, "default_value");
  if (pc_Message_Has(msg, dv)) { /* a string default may hold NUL bytes: its length kept */
    pc_StringView s = pc_Message_Get(msg, dv).s;
    char *c = pc_Arena_StrDup(r->out, s.data != NULL ? s.data : "", s.size);
    if (c == NULL) r->oom = 1;
    if (s.data != NULL && memchr(s.data, 0, s.size) != NULL) f->default_value_len = s.size;
    f->default_value = c;
  }
  f->oneof_index = get_i32(msg, m, "oneof_index", -1);
  f->json_name = get_str(r, msg, m, "json_name");
  f->proto3_optional = get_bool(msg, m, "proto3_optional", 0);
  pc_Message *om;
  const pc_MessageDef *od = NULL;
  f->options = get_options(r, msg, m, PKG "FieldOptions", &om, &od);
  f->packed = om != NULL ? get_bool(om, od, "packed", -1) : -1;
  f->deprecated = om != NULL ? get_bool(om, od, "deprecated", -1) : -1;
}

static void read_fields(Reader *r, const pc_Message *msg, const pc_MessageDef *m, const char *name,
                        pc_FieldDesc **out, size_t *count) {
  size_t n;
  const pc_Array *arr = get_arr(msg, m, name, &n);
  *out = alloc_n(r, n, sizeof **out);
  *count = *out != NULL ? n : 0;
  for (size_t i = 0; i < *count; i++) read_field(r, elem_msg(arr, i), &(*out)[i]);
}

static void read_names(Reader *r, const pc_Message *msg, const pc_MessageDef *m, const char *name,
                       const char ***out, size_t *count) {
  size_t n;
  const pc_Array *arr = get_arr(msg, m, name, &n);
  *out = alloc_n(r, n, sizeof **out);
  *count = *out != NULL ? n : 0;
  for (size_t i = 0; i < *count; i++) {
    pc_StringView s = pc_Array_Get(arr, i, kPc_Slot_String).s;
    if (s.data != NULL && memchr(s.data, 0, s.size) != NULL && r->nul == NULL) r->nul = name;
    (*out)[i] = pc_Arena_StrDup(r->out, s.data != NULL ? s.data : "", s.size);
    if ((*out)[i] == NULL) r->oom = 1;
  }
}

static void read_ranges(Reader *r, const pc_Message *msg, const pc_MessageDef *m, const char *name,
                        pc_RangeDesc **out, size_t *count) {
  const pc_MessageDef *rm = def(r, PKG "ReservedRange");
  size_t n;
  const pc_Array *arr = get_arr(msg, m, name, &n);
  *out = alloc_n(r, n, sizeof **out);
  *count = *out != NULL ? n : 0;
  for (size_t i = 0; i < *count; i++) {
    (*out)[i].start = get_i32(elem_msg(arr, i), rm, "start", 0);
    (*out)[i].end = get_i32(elem_msg(arr, i), rm, "end", 0);
  }
}

static void read_enum(Reader *r, const pc_Message *msg, pc_EnumDesc *e) {
  const pc_MessageDef *m = def(r, PKG "EnumDescriptorProto");
  const pc_MessageDef *vm = def(r, PKG "EnumValueDescriptorProto");
  e->name = get_str(r, msg, m, "name");
  size_t n;
  const pc_Array *arr = get_arr(msg, m, "value", &n);
  e->values = alloc_n(r, n, sizeof *e->values);
  e->value_count = e->values != NULL ? n : 0;
  for (size_t i = 0; i < e->value_count; i++) {
    const pc_Message *v = elem_msg(arr, i);
    pc_Message *om;
    const pc_MessageDef *od;
    e->values[i].name = get_str(r, v, vm, "name");
    e->values[i].number = get_i32(v, vm, "number", 0);
    e->values[i].options = get_options(r, v, vm, NULL, &om, &od);
  }
  pc_Message *om;
  const pc_MessageDef *od = NULL;
  e->options = get_options(r, msg, m, PKG "EnumOptions", &om, &od);
  e->allow_alias = om != NULL ? get_bool(om, od, "allow_alias", 0) : 0;
  read_ranges(r, msg, m, "reserved_range", &e->reserved_ranges, &e->reserved_range_count);
  read_names(r, msg, m, "reserved_name", &e->reserved_names, &e->reserved_name_count);
}

static void read_enums(Reader *r, const pc_Message *msg, const pc_MessageDef *m, pc_EnumDesc **out,
                       size_t *count) {
  size_t n;
  const pc_Array *arr = get_arr(msg, m, "enum_type", &n);
  *out = alloc_n(r, n, sizeof **out);
  *count = *out != NULL ? n : 0;
  for (size_t i = 0; i < *count; i++) read_enum(r, elem_msg(arr, i), &(*out)[i]);
}

static void read_message(Reader *r, const pc_Message *msg, pc_MessageDesc *d) {
  const pc_MessageDef *m = def(r, PKG "DescriptorProto");
  d->name = get_str(r, msg, m, "name");
  read_fields(r, msg, m, "field", &d->fields, &d->field_count);
  read_fields(r, msg, m, "extension", &d->extensions, &d->extension_count);
  size_t n;
  const pc_Array *arr = get_arr(msg, m, "nested_type", &n);
  d->nested = alloc_n(r, n, sizeof *d->nested);
  d->nested_count = d->nested != NULL ? n : 0;
  for (size_t i = 0; i < d->nested_count; i++) read_message(r, elem_msg(arr, i), &d->nested[i]);
  read_enums(r, msg, m, &d->enums, &d->enum_count);
  const pc_MessageDef *xm = def(r, PKG "ExtensionRange");
  arr = get_arr(msg, m, "extension_range", &n);
  d->extension_ranges = alloc_n(r, n, sizeof *d->extension_ranges);
  d->extension_range_count = d->extension_ranges != NULL ? n : 0;
  for (size_t i = 0; i < d->extension_range_count; i++) {
    const pc_Message *x = elem_msg(arr, i);
    pc_Message *om;
    const pc_MessageDef *od;
    d->extension_ranges[i].range.start = get_i32(x, xm, "start", 0);
    d->extension_ranges[i].range.end = get_i32(x, xm, "end", 0);
    d->extension_ranges[i].options = get_options(r, x, xm, NULL, &om, &od);
  }
  const pc_MessageDef *oneofm = def(r, PKG "OneofDescriptorProto");
  arr = get_arr(msg, m, "oneof_decl", &n);
  d->oneofs = alloc_n(r, n, sizeof *d->oneofs);
  d->oneof_count = d->oneofs != NULL ? n : 0;
  for (size_t i = 0; i < d->oneof_count; i++) {
    pc_Message *om;
    const pc_MessageDef *od;
    d->oneofs[i].name = get_str(r, elem_msg(arr, i), oneofm, "name");
    d->oneofs[i].options = get_options(r, elem_msg(arr, i), oneofm, NULL, &om, &od);
  }
  pc_Message *om;
  const pc_MessageDef *od = NULL;
  d->options = get_options(r, msg, m, PKG "MessageOptions", &om, &od);
  d->map_entry = om != NULL ? get_bool(om, od, "map_entry", 0) : 0;
  d->message_set_wire_format = om != NULL ? get_bool(om, od, "message_set_wire_format", 0) : 0;
  read_ranges(r, msg, m, "reserved_range", &d->reserved_ranges, &d->reserved_range_count);
  read_names(r, msg, m, "reserved_name", &d->reserved_names, &d->reserved_name_count);
}

static void read_service(Reader *r, const pc_Message *msg, pc_ServiceDesc *s) {
  const pc_MessageDef *m = def(r, PKG "ServiceDescriptorProto");
  const pc_MessageDef *mm = def(r, PKG "MethodDescriptorProto");
  pc_Message *om;
  const pc_MessageDef *od;
  s->name = get_str(r, msg, m, "name");
  s->options = get_options(r, msg, m, NULL, &om, &od);
  size_t n;
  const pc_Array *arr = get_arr(msg, m, "method", &n);
  s->methods = alloc_n(r, n, sizeof *s->methods);
  s->method_count = s->methods != NULL ? n : 0;
  for (size_t i = 0; i < s->method_count; i++) {
    const pc_Message *x = elem_msg(arr, i);
    pc_MethodDesc *md = &s->methods[i];
    md->name = get_str(r, x, mm, "name");
    md->input_type = get_str(r, x, mm, "input_type");
    md->output_type = get_str(r, x, mm, "output_type");
    md->options = get_options(r, x, mm, NULL, &om, &od);
    md->client_streaming = get_bool(x, mm, "client_streaming", 0);
    md->server_streaming = get_bool(x, mm, "server_streaming", 0);
  }
}

static void read_file(Reader *r, const pc_Message *msg, pc_FileDesc *fd) {
  const pc_MessageDef *m = def(r, PKG "FileDescriptorProto");
  fd->name = get_str(r, msg, m, "name");
  fd->package = get_str(r, msg, m, "package");
  read_names(r, msg, m, "dependency", &fd->dependencies, &fd->dependency_count);
  size_t n;
  const pc_Array *arr = get_arr(msg, m, "public_dependency", &n);
  fd->public_dependencies = alloc_n(r, n, sizeof(int32_t));
  fd->public_dependency_count = fd->public_dependencies != NULL ? n : 0;
  for (size_t i = 0; i < fd->public_dependency_count; i++)
    fd->public_dependencies[i] = pc_Array_Get(arr, i, kPc_Slot_32).i32;
  arr = get_arr(msg, m, "weak_dependency", &n);
  fd->weak_dependencies = alloc_n(r, n, sizeof(int32_t));
  fd->weak_dependency_count = fd->weak_dependencies != NULL ? n : 0;
  for (size_t i = 0; i < fd->weak_dependency_count; i++)
    fd->weak_dependencies[i] = pc_Array_Get(arr, i, kPc_Slot_32).i32;
  arr = get_arr(msg, m, "message_type", &n);
  fd->messages = alloc_n(r, n, sizeof *fd->messages);
  fd->message_count = fd->messages != NULL ? n : 0;
  for (size_t i = 0; i < fd->message_count; i++)
    read_message(r, elem_msg(arr, i), &fd->messages[i]);
  read_enums(r, msg, m, &fd->enums, &fd->enum_count);
  arr = get_arr(msg, m, "service", &n);
  fd->services = alloc_n(r, n, sizeof *fd->services);
  fd->service_count = fd->services != NULL ? n : 0;
  for (size_t i = 0; i < fd->service_count; i++)
    read_service(r, elem_msg(arr, i), &fd->services[i]);
  read_fields(r, msg, m, "extension", &fd->extensions, &fd->extension_count);
  pc_Message *om;
  const pc_MessageDef *od;
  fd->options = get_options(r, msg, m, NULL, &om, &od);
  const char *syntax = get_str(r, msg, m, "syntax");
  fd->syntax =
      syntax != NULL && strcmp(syntax, "proto3") == 0 ? kPc_Syntax_Proto3 : kPc_Syntax_Proto2;
  if (fd->name == NULL) fd->name = "";
}

int pc_DescriptorSet_Read(const char *buf, size_t size, pc_Arena *a, pc_FileDesc **files,
                          size_t *count, pc_Error *err) {
  *files = NULL;
  *count = 0;
  pc_Arena *tmp = pc_Arena_New(NULL, NULL);
  pc_Pool *pool = pc_Pool_New(NULL, NULL);
  pc_FileDesc *schema = tmp != NULL ? reader_schema(tmp) : NULL;
  int ok = 0;
  if (pool == NULL || schema == NULL || pc_Pool_AddFile(pool, schema, err) == NULL) {
    pc_Error_Set(err, "out of memory");
    goto done;
  }
  Reader r = {pool, a, tmp, err, 0, NULL};
  const pc_MessageDef *setm = def(&r, PKG "FileDescriptorSet");
  pc_Message *set = pc_Message_New(setm, tmp);
  if (set == NULL) {
    pc_Error_Set(err, "out of memory");
    goto done;
  }
  pc_Error derr;
  pc_Error_Init(&derr);
  pc_DecodeOptions opts = {.alias = 1}; /* strings are copied out below */
  pc_DecodeStatus st = pc_Decode(buf, size, set, setm, tmp, &opts, &derr);
  if (st != kPc_DecodeStatus_Ok) {
    pc_Error_Set(err, "descriptor set: %s", derr.msg);
    goto done;
  }
  size_t n;
  const pc_Array *arr = get_arr(set, setm, "file", &n);
  pc_FileDesc *out = alloc_n(&r, n, sizeof *out);
  for (size_t i = 0; out != NULL && i < n; i++) read_file(&r, elem_msg(arr, i), &out[i]);
  if (r.oom) {
    pc_Error_Set(err, "out of memory");
    goto done;
  }
  if (r.nul != NULL) { /* names are C strings: one would be read cut at it */
    pc_Error_Set(err, "descriptor set: a %s holds a NUL byte", r.nul);
    goto done;
  }
  *files = out;
  *count = out != NULL ? n : 0;
  ok = 1;
done:
  pc_Pool_Free(pool);
  pc_Arena_Free(tmp);
  return ok;
}

/* protoc's error for a package past its limits, or NULL. */
static const char *package_error(const pc_FileDesc *f) {
  size_t n = 0, dots = 0;
  for (const char *p = f->package ? f->package : ""; *p; p++, n++) dots += *p == '.';
  if (n > PC_PACKAGE_MAX_LENGTH) return "Package name is too long";
  if (dots > PC_PACKAGE_MAX_DOTS) return "Exceeds Maximum Package Depth";
  return NULL;
}

/* -- Import cycles ---------------------------------------------------------- */

/* A file of the set, or of the pool, in the import graph. */
typedef struct {
  const pc_FileDesc *f;
  size_t next;         /* the import to follow next */
  size_t parent;       /* the file that reached this one, or NONE */
  unsigned char state; /* 0: not reached, 1: on the path, 2: done */
} Node;

#define NONE ((size_t)-1)

typedef struct {
  const pc_Pool *pool;
  Node *nodes;
  size_t n;
  size_t *slots; /* by name: node index + 1 (0: free) */
  size_t mask;
} Graph;

/* The node of file 'name' ('f' its description, or NULL to look for it in
 * the pool); NONE when neither has it. Room was made for every file. */
static size_t node_of(Graph *g, const char *name, const pc_FileDesc *f) {
  size_t i = (size_t)pc_Hash_String(name) & g->mask;
  for (; g->slots[i] != 0; i = (i + 1) & g->mask)
    if (strcmp(g->nodes[g->slots[i] - 1].f->name, name) == 0) return g->slots[i] - 1;
  if (f == NULL && (f = pc_Pool_FileDesc(g->pool, name)) == NULL) return NONE;
  g->nodes[g->n] = (Node){f, 0, NONE, 0};
  g->slots[i] = ++g->n;
  return g->n - 1;
}

/* protoc's error for the first import cycle met following the set's files
 * in order, depth first (through the pool's files too): "a.proto: File
 * recursively imports itself: a.proto -> b.proto -> a.proto". 1 when there
 * is none, 0 with 'err' set. */
static int check_cycles(const pc_Pool *pool, const pc_FileDesc *files, size_t count, pc_Arena *a,
                        pc_Error *err) {
  size_t room = count + pc_Pool_FileCount(pool) + 1, cap = 2;
  while (cap < 2 * room) cap *= 2;
  Graph g = {pool, pc_Arena_Malloc(a, room * sizeof(Node)), 0,
             pc_Arena_Calloc(a, cap * sizeof(size_t)), cap - 1};
  if (g.nodes == NULL || g.slots == NULL) {
    pc_Error_Set(err, "out of memory");
    return 0;
  }
  for (size_t i = 0; i < count; i++)
    if (pc_Pool_FindFile(pool, files[i].name) == NULL) node_of(&g, files[i].name, &files[i]);
  size_t roots = g.n;
  for (size_t r = 0; r < roots; r++) {
    if (g.nodes[r].state != 0) continue;
    g.nodes[r].state = 1;
    for (size_t cur = r; cur != NONE;) {
      Node *c = &g.nodes[cur];
      if (c->next == c->f->dependency_count) {
        c->state = 2;
        cur = c->parent;
        continue;
      }
      size_t d = node_of(&g, c->f->dependencies[c->next++], NULL);
      if (d == NONE || g.nodes[d].state == 2) continue;
      if (g.nodes[d].state == 0) {
        g.nodes[d].state = 1;
        g.nodes[d].parent = cur;
        cur = d;
        continue;
      }
      /* d is on the path: the cycle is d -> ... -> cur -> d, read back
       * from cur through the parents */
      size_t len = 1;
      for (size_t k = cur; k != d; k = g.nodes[k].parent) len++;
      const char **chain = pc_Arena_Malloc(a, len * sizeof *chain);
      if (chain == NULL) {
        pc_Error_Set(err, "out of memory");
        return 0;
      }
      size_t k = cur;
      for (size_t j = len; j-- > 0; k = g.nodes[k].parent) chain[j] = g.nodes[k].f->name;
      char text[PC_ERROR_MAX];
      size_t n = 0;
      text[0] = '\0';
      for (size_t j = 0; j < len && n < sizeof text; j++)
        n += (size_t)snprintf(text + n, sizeof text - n, "%s -> ", chain[j]);
      pc_Error_Set(err, "%s: File recursively imports itself: %s%s", chain[0], text, chain[0]);
      return 0;
    }
  }
  return 1;
}

/* The first import of 'f' that the pool lacks (the set's files before 'f'
 * are in the pool by then), or NULL. */
static const char *missing_import(const pc_Pool *pool, const pc_FileDesc *f) {
  for (size_t d = 0; d < f->dependency_count; d++)
    if (pc_Pool_FindFile(pool, f->dependencies[d]) == NULL) return f->dependencies[d];
  return NULL;
}

long pc_Pool_AddDescriptorSet(pc_Pool *pool, const char *buf, size_t size, size_t *first,
                              pc_Error *err) {
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  if (a == NULL) {
    pc_Error_Set(err, "out of memory");
    return -1;
  }
  pc_FileDesc *files;
  size_t count;
  long added = 0;
  *first = pc_Pool_FileCount(pool);
  if (!pc_DescriptorSet_Read(buf, size, a, &files, &count, err) ||
      !check_cycles(pool, files, count, a, err)) {
    added = -1;
  } else {
    for (size_t i = 0; i < count; i++) {
      if (pc_Pool_FindFile(pool, files[i].name) != NULL) continue;
      const char *bad = package_error(&files[i]);
      if (bad != NULL) {
        pc_Error_Set(err, "%s: %s", files[i].name, bad);
        added = -1;
        break;
      }
      pc_Error why;
      pc_Error_Init(&why);
      if (pc_Pool_AddFile(pool, &files[i], &why) == NULL) {
        const char *missing = missing_import(pool, &files[i]);
        if (missing != NULL)
          pc_Error_Set(err,
                       "descriptor set: %s imports %s, which is neither in the set nor in the "
                       "pool (%s)",
                       files[i].name, missing, why.msg);
        else
          pc_Error_Set(err, "%s", why.msg);
        added = -1;
        break;
      }
      added++;
    }
  }
  pc_Arena_Free(a); /* the pool deep-copies what it keeps */
  return added;
}
