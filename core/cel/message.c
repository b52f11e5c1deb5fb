/* Messages as CEL values: fields read through the schema (repeated fields
 * and maps as views, enums as int), the well-known types converted as
 * cel-spec's "Dynamic Values" says (Timestamp, Duration, the wrappers, Any,
 * Struct, Value, ListValue), presence for has(). */
#include "cel/cel_internal.h"
#include "wire/decode.h"

#include <string.h>

typedef enum {
  kWkt_None,
  kWkt_Timestamp,
  kWkt_Duration,
  kWkt_Any,
  kWkt_Struct,
  kWkt_Value,
  kWkt_ListValue,
  kWkt_Wrapper /* BoolValue ... BytesValue: field 1 'value' */
} Wkt;

static Wkt wkt_of(const pc_MessageDef *m) {
  const char *n = m->full_name;
  if (strncmp(n, "google.protobuf.", 16) != 0) return kWkt_None;
  n += 16;
  static const struct {
    const char *name;
    Wkt wkt;
  } kNames[] = {
      {"Timestamp", kWkt_Timestamp}, {"Duration", kWkt_Duration},   {"Any", kWkt_Any},
      {"Struct", kWkt_Struct},       {"Value", kWkt_Value},         {"ListValue", kWkt_ListValue},
      {"BoolValue", kWkt_Wrapper},   {"BytesValue", kWkt_Wrapper},  {"DoubleValue", kWkt_Wrapper},
      {"FloatValue", kWkt_Wrapper},  {"Int32Value", kWkt_Wrapper},  {"Int64Value", kWkt_Wrapper},
      {"StringValue", kWkt_Wrapper}, {"UInt32Value", kWkt_Wrapper}, {"UInt64Value", kWkt_Wrapper}};
  for (size_t i = 0; i < sizeof kNames / sizeof kNames[0]; i++)
    if (strcmp(n, kNames[i].name) == 0) return kNames[i].wkt;
  return kWkt_None;
}

int cel_is_wkt(const pc_MessageDef *m) {
  return wkt_of(m) != kWkt_None;
}

/* Field 'number' of a well-known type, or NULL (a schema of its own that
 * lacks it). */
static const pc_FieldDef *field_no(const pc_MessageDef *m, int32_t number) {
  return pc_MessageDef_FindFieldByNumber(m, number);
}

static pc_Value get(const pc_Message *msg, const pc_FieldDef *f) {
  if (msg == NULL) {
    pc_Value v;
    memset(&v, 0, sizeof v);
    return v;
  }
  return pc_Message_Get(msg, f);
}

static int list_view(cel_E *e, const pc_Array *arr, const pc_FieldDef *f, uint32_t pos,
                     pc_CelValue *out) {
  pc_CelList *l = cel_alloc(e, sizeof *l, pos);
  if (l == NULL) return kCel_Fatal;
  memset(l, 0, sizeof *l);
  l->kind = kCelList_Field;
  l->arr = arr;
  l->field = f;
  l->size = arr != NULL ? arr->size : 0;
  if (arr == NULL) {
    l->kind = kCelList_Values;
    l->items = NULL;
  }
  memset(out, 0, sizeof *out);
  out->kind = kPc_Cel_List;
  out->v.list = l;
  return kCel_Ok;
}

static int map_view(cel_E *e, const pc_Map *map, const pc_FieldDef *f, uint32_t pos,
                    pc_CelValue *out) {
  pc_CelMap *m = cel_alloc(e, sizeof *m, pos);
  if (m == NULL) return kCel_Fatal;
  memset(m, 0, sizeof *m);
  m->kind = kCelMap_Field;
  m->map = map;
  m->field = f;
  m->size = map != NULL ? map->size : 0;
  memset(out, 0, sizeof *out);
  out->kind = kPc_Cel_Map;
  out->v.map = m;
  return kCel_Ok;
}

/* google.protobuf.Any: the message it holds, decoded into the context. */
static int unpack_any(cel_E *e, const pc_Message *msg, const pc_MessageDef *m, uint32_t pos,
                      pc_CelValue *out, int depth) {
  const pc_FieldDef *tf = field_no(m, 1), *vf = field_no(m, 2);
  if (tf == NULL || vf == NULL) return cel_fail(e, pos, "invalid google.protobuf.Any type");
  pc_StringView url = get(msg, tf).s, bytes = get(msg, vf).s;
  size_t slash = url.size;
  while (slash > 0 && url.data[slash - 1] != '/') slash--;
  if (url.size == 0 || slash == 0)
    return cel_fail(e, pos, "google.protobuf.Any with the type URL '%.*s'",
                    (int)(url.size > 100 ? 100 : url.size), url.size ? url.data : "");
  char name[512];
  size_t len = url.size - slash;
  if (len >= sizeof name) return cel_fail(e, pos, "google.protobuf.Any: type name too long");
  memcpy(name, url.data + slash, len);
  name[len] = '\0';
  const pc_MessageDef *t = pc_Pool_FindMessage(m->file->pool, name);
  if (t == NULL)
    return cel_fail(e, pos, "google.protobuf.Any holds %s, a type the schema lacks", name);
  if (depth > 32) return cel_fail(e, pos, "google.protobuf.Any nested too deeply");
  if (cel_steps(e, bytes.size / 16, pos) != kCel_Ok) return kCel_Fatal;
  if (e->running && bytes.size > (e->limits.bytes - e->used.bytes) / 4)
    return cel_fatal(e, kPc_CelStatus_Limit, pos, "bytes");
  size_t before = pc_Arena_SpaceAllocated(e->arena);
  pc_Message *inner = pc_Message_New(t, e->arena);
  if (inner == NULL) return cel_fatal(e, kPc_CelStatus_NoMemory, pos, "memory");
  pc_DecodeOptions o = {0, 1, 1, 0};
  pc_Error err;
  pc_Error_Init(&err);
  pc_DecodeStatus st = pc_Decode(bytes.data, bytes.size, inner, t, e->arena, &o, &err);
  e->used.bytes += pc_Arena_SpaceAllocated(e->arena) - before;
  if (st == kPc_DecodeStatus_OutOfMemory)
    return cel_fatal(e, kPc_CelStatus_NoMemory, pos, "memory");
  if (st != kPc_DecodeStatus_Ok) return cel_fail(e, pos, "google.protobuf.Any: %s", err.msg);
  if (wkt_of(t) == kWkt_Any) return unpack_any(e, inner, t, pos, out, depth + 1);
  return cel_message_value(e, inner, t, pos, out);
}

int cel_message_value(cel_E *e, const pc_Message *msg, const pc_MessageDef *m, uint32_t pos,
                      pc_CelValue *out) {
  memset(out, 0, sizeof *out);
  Wkt w = wkt_of(m);
  const pc_FieldDef *f1 = w != kWkt_None ? field_no(m, 1) : NULL;
  switch (w) {
  case kWkt_None:
    out->kind = kPc_Cel_Message;
    out->v.m.msg = msg;
    out->v.m.def = m;
    return kCel_Ok;
  case kWkt_Timestamp:
  case kWkt_Duration: {
    const pc_FieldDef *f2 = field_no(m, 2);
    out->kind = w == kWkt_Timestamp ? kPc_Cel_Timestamp : kPc_Cel_Duration;
    out->v.t.seconds = f1 != NULL ? get(msg, f1).i64 : 0;
    out->v.t.nanos = f2 != NULL ? get(msg, f2).i32 : 0;
    return kCel_Ok;
  }
  case kWkt_Wrapper:
    if (f1 == NULL) return cel_fail(e, pos, "invalid %s type", m->full_name);
    return cel_elem_value(e, f1, get(msg, f1), pos, out);
  case kWkt_Any: return unpack_any(e, msg, m, pos, out, 0);
  case kWkt_Struct:
    if (f1 == NULL || !f1->is_map) return cel_fail(e, pos, "invalid google.protobuf.Struct type");
    return map_view(e, get(msg, f1).map, f1, pos, out);
  case kWkt_ListValue:
    if (f1 == NULL || f1->label != kPc_Label_Repeated)
      return cel_fail(e, pos, "invalid google.protobuf.ListValue type");
    return list_view(e, get(msg, f1).a, f1, pos, out);
  case kWkt_Value: {
    const pc_FieldDef *set = NULL;
    if (msg != NULL && m->oneof_count > 0) set = pc_Message_WhichOneof(msg, &m->oneofs[0]);
    if (set == NULL || set->number == 1) {
      out->kind = kPc_Cel_Null;
      return kCel_Ok;
    }
    return cel_elem_value(e, set, pc_Message_Get(msg, set), pos, out);
  }
  }
  return kCel_Ok;
}

int cel_elem_value(cel_E *e, const pc_FieldDef *f, pc_Value v, uint32_t pos, pc_CelValue *out) {
  memset(out, 0, sizeof *out);
  switch (f->type) {
  case kPc_Type_Bool:
    out->kind = kPc_Cel_Bool;
    out->v.b = v.b != 0;
    return kCel_Ok;
  case kPc_Type_Int32:
  case kPc_Type_Sint32:
  case kPc_Type_Sfixed32:
  case kPc_Type_Enum:
    out->kind = kPc_Cel_Int;
    out->v.i = v.i32;
    return kCel_Ok;
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64:
    out->kind = kPc_Cel_Int;
    out->v.i = v.i64;
    return kCel_Ok;
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32:
    out->kind = kPc_Cel_Uint;
    out->v.u = v.u32;
    return kCel_Ok;
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64:
    out->kind = kPc_Cel_Uint;
    out->v.u = v.u64;
    return kCel_Ok;
  case kPc_Type_Float:
    out->kind = kPc_Cel_Double;
    out->v.d = v.f;
    return kCel_Ok;
  case kPc_Type_Double:
    out->kind = kPc_Cel_Double;
    out->v.d = v.d;
    return kCel_Ok;
  case kPc_Type_String:
  case kPc_Type_Bytes:
    out->kind = f->type == kPc_Type_String ? kPc_Cel_String : kPc_Cel_Bytes;
    out->v.s = v.s;
    if (out->v.s.data == NULL) out->v.s.data = "";
    return kCel_Ok;
  case kPc_Type_Message:
  case kPc_Type_Group: return cel_message_value(e, v.m, f->message, pos, out);
  default: break;
  }
  return cel_fail(e, pos, "field %s has an unknown type", f->full_name);
}

int cel_has_field(const pc_Message *msg, const pc_FieldDef *f) {
  return msg != NULL && pc_Message_Has(msg, f);
}

int cel_field_value(cel_E *e, const pc_Message *msg, const pc_FieldDef *f, uint32_t pos,
                    pc_CelValue *out) {
  if (f->label == kPc_Label_Repeated) {
    pc_Value v = get(msg, f);
    if (f->is_map) return map_view(e, v.map, f, pos, out);
    return list_view(e, v.a, f, pos, out);
  }
  if (f->type == kPc_Type_Message || f->type == kPc_Type_Group) {
    if (!cel_has_field(msg, f)) {
      if (wkt_of(f->message) == kWkt_Wrapper) {
        memset(out, 0, sizeof *out);
        out->kind = kPc_Cel_Null;
        return kCel_Ok;
      }
      return cel_message_value(e, NULL, f->message, pos, out);
    }
  }
  if (msg == NULL) {
    /* a field of an empty message: its default */
    pc_Value v;
    memset(&v, 0, sizeof v);
    if (f->has_default) {
      switch (pc_FieldDef_ElemSlot(f)) {
      case kPc_Slot_Bool: v.b = f->default_value.b; break;
      case kPc_Slot_32: v.u32 = f->default_value.u32; break;
      case kPc_Slot_64: v.u64 = f->default_value.u64; break;
      case kPc_Slot_String:
        v.s.data = f->default_value.s.data;
        v.s.size = f->default_value.s.size;
        break;
      default: break;
      }
    } else if (f->type == kPc_Type_Enum) {
      v.i32 = f->default_value.i32;
    }
    return cel_elem_value(e, f, v, pos, out);
  }
  return cel_elem_value(e, f, pc_Message_Get(msg, f), pos, out);
}

int cel_get_field(cel_E *e, const pc_CelValue *msg, const pc_CelValue *name, uint32_t pos,
                  pc_CelValue *out) {
  if (msg->kind != kPc_Cel_Message || name->kind != kPc_Cel_String)
    return cel_fail(e, pos, "getField can only be applied to messages");
  const pc_FieldDef *f =
      pc_MessageDef_FindFieldByName(msg->v.m.def, name->v.s.data, name->v.s.size);
  if (f == NULL)
    return cel_fail(e, pos, "field %.*s not found on %s",
                    (int)(name->v.s.size > 100 ? 100 : name->v.s.size), name->v.s.data,
                    msg->v.m.def->full_name);
  return cel_field_value(e, msg->v.m.msg, f, pos, out);
}
