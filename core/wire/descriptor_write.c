#include "wire/descriptor_write.h"

#include <string.h>

/* The writer fills back to front (core/wire/wire.h): each message writes its
 * fields from the highest number down, and a sub-message's tag and length
 * go in front once its contents are written. Every Put returns 0 on
 * allocation failure, which the macros pass up. */
#define TRY(x)                                                                                     \
  do {                                                                                             \
    if (!(x)) return 0;                                                                            \
  } while (0)

typedef pc_WireWriter W;

static int put_bytes(W *w, uint32_t field, const void *p, size_t n) {
  return pc_WireWriter_PutBytes(w, p, n) && pc_WireWriter_PutVarint(w, n) &&
         pc_WireWriter_PutTag(w, field, kPc_Wire_Len);
}

static int put_str(W *w, uint32_t field, const char *s) {
  return s == NULL || put_bytes(w, field, s, strlen(s));
}

/* int32 fields: negatives sign-extended to 10 bytes, as protobuf writes. */
static int put_int32(W *w, uint32_t field, int32_t v) {
  return pc_WireWriter_PutVarint(w, (uint64_t)(int64_t)v) &&
         pc_WireWriter_PutTag(w, field, kPc_Wire_Varint);
}

static int put_bool(W *w, uint32_t field) {
  return pc_WireWriter_PutVarint(w, 1) && pc_WireWriter_PutTag(w, field, kPc_Wire_Varint);
}

static int put_options(W *w, uint32_t field, const pc_OptionsDesc *o) {
  return !o->present || put_bytes(w, field, o->data, o->size);
}

/* Options of a description made without their bytes (Lua declarations):
 * the decoded standard options written as protoc would, in number order.
 * 'flags' lists {number, value} for the options to write (value -1: not
 * set). */
static int put_decoded_options(W *w, uint32_t field, const int (*flags)[2], size_t n) {
  size_t start = pc_WireWriter_Size(w);
  for (size_t i = n; i-- > 0;)
    if (flags[i][1] >= 0)
      TRY(pc_WireWriter_PutVarint(w, (uint64_t)flags[i][1]) &&
          pc_WireWriter_PutTag(w, (uint32_t)flags[i][0], kPc_Wire_Varint));
  if (pc_WireWriter_Size(w) == start) return 1;
  return pc_WireWriter_PutVarint(w, pc_WireWriter_Size(w) - start) &&
         pc_WireWriter_PutTag(w, field, kPc_Wire_Len);
}

/* Closes a sub-message whose contents started at writer size 'start'. */
static int close_len(W *w, uint32_t field, size_t start) {
  return pc_WireWriter_PutVarint(w, pc_WireWriter_Size(w) - start) &&
         pc_WireWriter_PutTag(w, field, kPc_Wire_Len);
}

static int put_names(W *w, uint32_t field, const char *const *names, size_t n) {
  for (size_t i = n; i-- > 0;) TRY(put_str(w, field, names[i]));
  return 1;
}

/* ReservedRange / EnumReservedRange: start 1, end 2. */
static int put_ranges(W *w, uint32_t field, const pc_RangeDesc *r, size_t n) {
  for (size_t i = n; i-- > 0;) {
    size_t start = pc_WireWriter_Size(w);
    TRY(put_int32(w, 2, r[i].end) && put_int32(w, 1, r[i].start) && close_len(w, field, start));
  }
  return 1;
}

/* json_name 10: protoc's default for 'name' (pc_JsonName), built in a
 * stack buffer, or for long names in one from the writer's allocator. */
static int put_json_name(W *w, const char *name) {
  char buf[256];
  size_t n = pc_JsonName(name, buf, sizeof buf);
  if (n < sizeof buf) return put_bytes(w, 10, buf, n);
  char *big = w->alloc(w->ud, NULL, 0, n + 1);
  if (big == NULL) return 0;
  pc_JsonName(name, big, n + 1);
  int ok = put_bytes(w, 10, big, n);
  w->alloc(w->ud, big, n + 1, 0);
  return ok;
}

/* FieldDescriptorProto */
static int put_field(W *w, uint32_t field, const pc_FieldDesc *f) {
  size_t start = pc_WireWriter_Size(w);
  if (f->proto3_optional) TRY(put_bool(w, 17));
  if (f->json_name != NULL) {
    TRY(put_str(w, 10, f->json_name));
  } else if (f->name != NULL) {
    TRY(put_json_name(w, f->name));
  }
  if (f->oneof_index >= 0) TRY(put_int32(w, 9, f->oneof_index));
  if (f->options.present) {
    TRY(put_options(w, 8, &f->options));
  } else { /* FieldOptions packed 2, deprecated 3 */
    const int flags[2][2] = {{2, f->packed}, {3, f->deprecated == 1 ? 1 : -1}};
    TRY(put_decoded_options(w, 8, flags, 2));
  }
  if (f->default_value != NULL) {
    size_t n = f->default_value_len ? f->default_value_len : strlen(f->default_value);
    TRY(put_bytes(w, 7, f->default_value, n));
  }
  TRY(put_str(w, 6, f->type_name));
  if (f->type != 0) TRY(put_int32(w, 5, (int32_t)f->type));
  TRY(put_int32(w, 4, (int32_t)f->label));
  TRY(put_int32(w, 3, f->number));
  TRY(put_str(w, 2, f->extendee));
  TRY(put_str(w, 1, f->name));
  return close_len(w, field, start);
}

static int put_fields(W *w, uint32_t field, const pc_FieldDesc *fs, size_t n) {
  for (size_t i = n; i-- > 0;) TRY(put_field(w, field, &fs[i]));
  return 1;
}

/* EnumDescriptorProto */
static int put_enum(W *w, uint32_t field, const pc_EnumDesc *e) {
  size_t start = pc_WireWriter_Size(w);
  TRY(put_names(w, 5, e->reserved_names, e->reserved_name_count));
  TRY(put_ranges(w, 4, e->reserved_ranges, e->reserved_range_count));
  if (e->options.present) {
    TRY(put_options(w, 3, &e->options));
  } else { /* EnumOptions allow_alias 2 */
    const int flags[1][2] = {{2, e->allow_alias ? 1 : -1}};
    TRY(put_decoded_options(w, 3, flags, 1));
  }
  for (size_t i = e->value_count; i-- > 0;) {
    const pc_EnumValueDesc *v = &e->values[i];
    size_t vstart = pc_WireWriter_Size(w);
    TRY(put_options(w, 3, &v->options) && put_int32(w, 2, v->number) && put_str(w, 1, v->name) &&
        close_len(w, 2, vstart));
  }
  TRY(put_str(w, 1, e->name));
  return close_len(w, field, start);
}

static int put_enums(W *w, uint32_t field, const pc_EnumDesc *es, size_t n) {
  for (size_t i = n; i-- > 0;) TRY(put_enum(w, field, &es[i]));
  return 1;
}

/* DescriptorProto */
static int put_message(W *w, uint32_t field, const pc_MessageDesc *m) {
  size_t start = pc_WireWriter_Size(w);
  TRY(put_names(w, 10, m->reserved_names, m->reserved_name_count));
  TRY(put_ranges(w, 9, m->reserved_ranges, m->reserved_range_count));
  for (size_t i = m->oneof_count; i-- > 0;) {
    size_t ostart = pc_WireWriter_Size(w);
    TRY(put_options(w, 2, &m->oneofs[i].options) && put_str(w, 1, m->oneofs[i].name) &&
        close_len(w, 8, ostart));
  }
  if (m->options.present) {
    TRY(put_options(w, 7, &m->options));
  } else { /* MessageOptions message_set_wire_format 1, map_entry 7 */
    const int flags[2][2] = {{1, m->message_set_wire_format ? 1 : -1}, {7, m->map_entry ? 1 : -1}};
    TRY(put_decoded_options(w, 7, flags, 2));
  }
  TRY(put_fields(w, 6, m->extensions, m->extension_count));
  for (size_t i = m->extension_range_count; i-- > 0;) {
    const pc_ExtensionRangeDesc *r = &m->extension_ranges[i];
    size_t rstart = pc_WireWriter_Size(w);
    TRY(put_options(w, 3, &r->options) && put_int32(w, 2, r->range.end) &&
        put_int32(w, 1, r->range.start) && close_len(w, 5, rstart));
  }
  TRY(put_enums(w, 4, m->enums, m->enum_count));
  for (size_t i = m->nested_count; i-- > 0;) TRY(put_message(w, 3, &m->nested[i]));
  TRY(put_fields(w, 2, m->fields, m->field_count));
  TRY(put_str(w, 1, m->name));
  return close_len(w, field, start);
}

/* ServiceDescriptorProto */
static int put_service(W *w, const pc_ServiceDesc *s) {
  size_t start = pc_WireWriter_Size(w);
  TRY(put_options(w, 3, &s->options));
  for (size_t i = s->method_count; i-- > 0;) {
    const pc_MethodDesc *md = &s->methods[i];
    size_t mstart = pc_WireWriter_Size(w);
    if (md->server_streaming) TRY(put_bool(w, 6));
    if (md->client_streaming) TRY(put_bool(w, 5));
    TRY(put_options(w, 4, &md->options) && put_str(w, 3, md->output_type) &&
        put_str(w, 2, md->input_type) && put_str(w, 1, md->name) && close_len(w, 2, mstart));
  }
  TRY(put_str(w, 1, s->name));
  return close_len(w, 6, start);
}

static int put_file(W *w, const pc_FileDesc *f) {
  if (f->syntax == kPc_Syntax_Proto3) TRY(put_str(w, 12, "proto3"));
  for (size_t i = f->weak_dependency_count; i-- > 0;)
    TRY(put_int32(w, 11, f->weak_dependencies[i]));
  for (size_t i = f->public_dependency_count; i-- > 0;)
    TRY(put_int32(w, 10, f->public_dependencies[i]));
  TRY(put_options(w, 8, &f->options));
  TRY(put_fields(w, 7, f->extensions, f->extension_count));
  for (size_t i = f->service_count; i-- > 0;) TRY(put_service(w, &f->services[i]));
  TRY(put_enums(w, 5, f->enums, f->enum_count));
  for (size_t i = f->message_count; i-- > 0;) TRY(put_message(w, 4, &f->messages[i]));
  TRY(put_names(w, 3, f->dependencies, f->dependency_count));
  TRY(put_str(w, 2, f->package));
  return put_str(w, 1, f->name);
}

int pc_FileDesc_Write(const pc_FileDesc *file, pc_WireWriter *w, pc_Error *err) {
  if (put_file(w, file)) return 1;
  pc_Error_Set(err, "out of memory");
  return 0;
}
