#include "wire/decode.h"

#include "wire/wire.h"

#include <string.h>

/* ORDER DECODESTATUS */
static const char *const decode_status_text[] = {"ok", "malformed input", "out of memory",
                                                 "missing required fields"};

const char *pc_DecodeStatus_String(pc_DecodeStatus s) {
  if ((unsigned)s >= sizeof decode_status_text / sizeof decode_status_text[0])
    return "unknown decode status";
  return decode_status_text[s];
}

typedef struct {
  const uint8_t *start; /* input start, for offsets */
  pc_Arena *arena;
  pc_Error *err;
  const pc_Pool *pool;
  int depth_left;    /* levels that may still open */
  int max_depth;     /* levels allowed below the root, for the error past them */
  uint32_t required; /* non-zero once a type with required fields was read
                        (the root's, then each sub-message's) */
  int alias;
  const pc_DecodeOptions *opts; /* partial: the required-field check is off */
  pc_Message *root;             /* what pc_Decode fills, for that check */
  const pc_MessageDef *root_def;
  pc_DecodeStatus status;
} Dec;

/* Records the first error; always returns NULL so callers can 'return fail(...)'. */
static const uint8_t *fail(Dec *d, const pc_MessageDef *m, const pc_FieldDef *f, uint32_t number,
                           pc_WireStatus st, const uint8_t *at) {
  if (d->status == kPc_DecodeStatus_Ok) {
    d->status = kPc_DecodeStatus_Malformed;
    size_t off = (size_t)(at - d->start);
    if (f != NULL)
      pc_Error_Set(d->err, "%s: %s at offset %zu", f->full_name, pc_WireStatus_String(st), off);
    else if (number != 0)
      pc_Error_Set(d->err, "%s field %u: %s at offset %zu", m->full_name, (unsigned)number,
                   pc_WireStatus_String(st), off);
    else
      pc_Error_Set(d->err, "%s: %s at offset %zu", m->full_name, pc_WireStatus_String(st), off);
  }
  return NULL;
}

/* A message (or a map entry) would open past the depth limit: the error
 * names the limit, as the JSON reader's ("messages nested deeper than
 * 100"), so the caller knows what max_depth to raise. */
static const uint8_t *too_deep(Dec *d, const pc_FieldDef *f, const uint8_t *at) {
  if (d->status == kPc_DecodeStatus_Ok) {
    d->status = kPc_DecodeStatus_Malformed;
    pc_Error_Set(d->err, "%s: messages nested deeper than %d (max_depth) at offset %zu",
                 f->full_name, d->max_depth, (size_t)(at - d->start));
  }
  return NULL;
}

static const uint8_t *oom(Dec *d) {
  if (d->status == kPc_DecodeStatus_Ok) {
    d->status = kPc_DecodeStatus_OutOfMemory;
    pc_Error_Set(d->err, "out of memory");
  }
  return NULL;
}

/* Stores a numeric value in memory of slot kind 'slot'. */
static void store_number(void *dst, pc_SlotKind slot, const pc_Value *v) {
  switch (slot) {
  case kPc_Slot_Bool: *(uint8_t *)dst = v->b; break;
  case kPc_Slot_32: memcpy(dst, &v->u32, 4); break;
  default: memcpy(dst, &v->u64, 8); break;
  }
}

static int add_unknown(Dec *d, pc_Message *msg, const uint8_t *from, const uint8_t *to) {
  return pc_Message_AddUnknown(msg, (const char *)from, (size_t)(to - from), d->arena);
}

/* An unknown varint field 'number' with value 'v', for closed enums met in
 * packed input or map entries. */
static int add_unknown_varint(Dec *d, pc_Message *msg, uint32_t number, uint64_t v) {
  uint8_t buf[2 * PC_WIRE_MAX_VARINT], *q = buf;
  uint64_t parts[2] = {(uint64_t)number << 3, v};
  for (int i = 0; i < 2; i++) {
    uint64_t x = parts[i];
    while (x >= 0x80) {
      *q++ = (uint8_t)(x | 0x80);
      x >>= 7;
    }
    *q++ = (uint8_t)x;
  }
  return add_unknown(d, msg, buf, q);
}

static int make_string(Dec *d, pc_StringView *out, const uint8_t *p, size_t len) {
  if (d->alias || len == 0) {
    out->data = len ? (const char *)p : NULL;
    out->size = len;
    return 1;
  }
  return pc_StringView_Copy(out, (const char *)p, len, d->arena);
}

static const uint8_t *decode_message(Dec *d, const uint8_t *p, const uint8_t *end, pc_Message *msg,
                                     const pc_MessageDef *m, uint32_t group);

/* Reads a sub-message (length-delimited, or a group when 'group' is its
 * number) into '*slot', creating it when NULL. 'at' is the value's start
 * for errors. */
static const uint8_t *read_submessage(Dec *d, const uint8_t *p, const uint8_t *end,
                                      const pc_FieldDef *f, const pc_MessageDef *owner,
                                      pc_Message **slot, uint32_t group) {
  const uint8_t *at = p;
  const uint8_t *sub_end = end;
  pc_WireStatus st = kPc_WireStatus_Ok;
  if (group == 0) {
    size_t len;
    p = pc_Wire_ReadLength(p, end, &len, &st);
    if (p == NULL) return fail(d, owner, f, 0, st, at);
    sub_end = p + len;
  }
  if (d->depth_left <= 0) return too_deep(d, f, at);
  if (*slot == NULL) {
    *slot = pc_Message_New(f->message, d->arena);
    if (*slot == NULL) return oom(d);
  }
  d->depth_left--;
  d->required |= f->message->required_count;
  const uint8_t *q = decode_message(d, p, sub_end, *slot, f->message, group);
  d->depth_left++;
  if (q == NULL) return NULL;
  if (group == 0 && q != sub_end) return fail(d, owner, f, 0, kPc_WireStatus_Truncated, q);
  return q;
}

/* A map entry (the entry's bytes are [p, end)): key and value default when
 * missing; the last entry for a key wins. A closed enum value the enum lacks
 * sends the whole entry to unknown fields (as C++). */
static const uint8_t *read_map_entry(Dec *d, const uint8_t *tagpos, const uint8_t *p,
                                     const uint8_t *end, pc_Message *msg, const pc_FieldDef *f) {
  const pc_FieldDef *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
  const pc_MessageDef *entry = f->message;
  pc_Value key, val;
  memset(&key, 0, sizeof key);
  memset(&val, 0, sizeof val);
  int have_val = 0;
  pc_WireStatus st = kPc_WireStatus_Ok;
  if (d->depth_left <= 0) return too_deep(d, f, p);
  d->depth_left--;
  while (p < end) {
    const uint8_t *tp = p;
    uint32_t num;
    pc_WireType wt;
    p = pc_Wire_ReadTag(p, end, &num, &wt, &st);
    if (p == NULL) return fail(d, entry, NULL, num, st, tp);
    const pc_FieldDef *ef = num == 1 ? kf : num == 2 ? vf : NULL;
    if (wt == kPc_Wire_EndGroup)
      return fail(d, entry, NULL, num, kPc_WireStatus_UnmatchedEndGroup, tp);
    if (ef == NULL || wt != pc_Decode_WireType(ef->type)) {
      const uint8_t *at;
      p = pc_Wire_SkipField(p, end, num, wt, d->depth_left, &st, &at);
      if (p == NULL) return fail(d, entry, NULL, num, st, at);
      continue;
    }
    pc_Value *v = num == 1 ? &key : &val;
    const uint8_t *vp = p;
    if (ef->type == kPc_Type_String || ef->type == kPc_Type_Bytes) {
      size_t len;
      p = pc_Wire_ReadLength(p, end, &len, &st);
      if (p == NULL) return fail(d, entry, ef, 0, st, vp);
      if (pc_Decode_ChecksUtf8(ef) && !pc_Wire_ValidUtf8(p, len))
        return fail(d, entry, ef, 0, kPc_WireStatus_BadUtf8, vp);
      if (!make_string(d, &v->s, p, len)) return oom(d);
      p += len;
    } else if (ef->type == kPc_Type_Message) {
      /* A repeated value field merges into the value read so far. */
      p = read_submessage(d, p, end, ef, entry, &v->m, 0);
      if (p == NULL) return NULL;
    } else {
      p = pc_Decode_ReadNumber(p, end, ef->type, v, &st);
      if (p == NULL) return fail(d, entry, ef, 0, st, vp);
    }
    if (num == 2) have_val = 1;
  }
  d->depth_left++;
  if (have_val && pc_Decode_EnumUnknown(vf, val.i32)) {
    if (!add_unknown(d, msg, tagpos, end)) return oom(d);
    return end;
  }
  if (vf->type == kPc_Type_Message && val.m == NULL) {
    val.m = pc_Message_New(vf->message, d->arena);
    if (val.m == NULL) return oom(d);
    d->required |= vf->message->required_count; /* an empty value still needs them */
  }
  if (vf->type == kPc_Type_Enum && !have_val && vf->enumdef != NULL && vf->enumdef->closed &&
      vf->enumdef->value_count > 0)
    val.i32 = vf->enumdef->values[0].number;
  pc_Map *map = pc_Message_MutableMap(msg, f, d->arena);
  if (map == NULL) return oom(d);
  if (pc_Map_Set(map, pc_FieldDef_ElemSlot(kf), key, val, d->arena) == NULL) return oom(d);
  return end;
}

/* Packed values of repeated numeric field 'f' in [p, end) appended to 'arr'. */
static const uint8_t *read_packed(Dec *d, const uint8_t *tagpos, const uint8_t *p,
                                  const uint8_t *end, pc_Message *msg, const pc_MessageDef *owner,
                                  const pc_FieldDef *f, pc_Array *arr) {
  size_t elem = pc_FieldDef_ElemSize(f);
  pc_SlotKind slot = pc_FieldDef_ElemSlot(f);
  pc_WireType wt = pc_Decode_WireType(f->type);
  size_t n;
  pc_WireStatus st = kPc_WireStatus_Ok;
  (void)tagpos;
  if (wt == kPc_Wire_Fixed32 || wt == kPc_Wire_Fixed64) {
    size_t w = wt == kPc_Wire_Fixed32 ? 4 : 8;
    if ((size_t)(end - p) % w != 0) return fail(d, owner, f, 0, kPc_WireStatus_Truncated, p);
    n = (size_t)(end - p) / w;
  } else {
    n = 0;
    for (const uint8_t *q = p; q < end; q++) n += *q < 0x80;
    if (p < end && end[-1] >= 0x80) return fail(d, owner, f, 0, kPc_WireStatus_Truncated, end);
  }
  size_t base = arr->size;
  if (n == 0) return end;
  if (!pc_Array_Resize(arr, base + n, elem, d->arena)) return oom(d);
  char *out = (char *)arr->data + base * elem;
  size_t kept = 0;
  while (p < end) {
    pc_Value v;
    const uint8_t *vp = p;
    p = pc_Decode_ReadNumber(p, end, f->type, &v, &st);
    if (p == NULL) {
      arr->size = base + kept;
      return fail(d, owner, f, 0, st, vp);
    }
    if (pc_Decode_EnumUnknown(f, v.i32)) {
      if (!add_unknown_varint(d, msg, (uint32_t)f->number, (uint64_t)(int64_t)v.i32)) {
        arr->size = base + kept;
        return oom(d);
      }
      continue;
    }
    store_number(out + kept * elem, slot, &v);
    kept++;
  }
  arr->size = base + kept;
  return end;
}

/* One value of known field 'f' whose wire type fits; tag at 'tagpos',
 * value at 'p'. */
static const uint8_t *read_field(Dec *d, const uint8_t *tagpos, const uint8_t *p,
                                 const uint8_t *end, pc_Message *msg, const pc_MessageDef *m,
                                 const pc_FieldDef *f, pc_WireType wt) {
  pc_WireStatus st = kPc_WireStatus_Ok;
  const uint8_t *vp = p;
  int ext = f->is_extension;
  if (f->label == kPc_Label_Repeated) {
    if (f->is_map) {
      size_t len;
      p = pc_Wire_ReadLength(p, end, &len, &st);
      if (p == NULL) return fail(d, m, f, 0, st, vp);
      return read_map_entry(d, tagpos, p, p + len, msg, f);
    }
    pc_Array *arr;
    if (ext) {
      pc_Value *cell = pc_Message_MutableExtension(msg, f, d->arena);
      if (cell == NULL) return oom(d);
      arr = cell->a;
    } else {
      arr = pc_Message_MutableArray(msg, f, d->arena);
    }
    if (arr == NULL) return oom(d);
    if (wt == kPc_Wire_Len && pc_Decode_IsNumeric(f->type)) {
      size_t len;
      p = pc_Wire_ReadLength(p, end, &len, &st);
      if (p == NULL) return fail(d, m, f, 0, st, vp);
      return read_packed(d, tagpos, p, p + len, msg, m, f, arr);
    }
    size_t elem = pc_FieldDef_ElemSize(f);
    pc_Value v;
    memset(&v, 0, sizeof v);
    if (f->type == kPc_Type_Message || f->type == kPc_Type_Group) {
      p = read_submessage(d, p, end, f, m, &v.m,
                          f->type == kPc_Type_Group ? (uint32_t)f->number : 0);
      if (p == NULL) return NULL;
    } else if (f->type == kPc_Type_String || f->type == kPc_Type_Bytes) {
      size_t len;
      p = pc_Wire_ReadLength(p, end, &len, &st);
      if (p == NULL) return fail(d, m, f, 0, st, vp);
      if (pc_Decode_ChecksUtf8(f) && !pc_Wire_ValidUtf8(p, len))
        return fail(d, m, f, 0, kPc_WireStatus_BadUtf8, vp);
      if (!make_string(d, &v.s, p, len)) return oom(d);
      p += len;
    } else {
      p = pc_Decode_ReadNumber(p, end, f->type, &v, &st);
      if (p == NULL) return fail(d, m, f, 0, st, vp);
      if (pc_Decode_EnumUnknown(f, v.i32)) return add_unknown(d, msg, tagpos, p) ? p : oom(d);
      pc_Value tmp;
      memset(&tmp, 0, sizeof tmp);
      store_number(&tmp, pc_FieldDef_ElemSlot(f), &v);
      v = tmp;
    }
    if (!pc_Array_Append(arr, &v, elem, d->arena)) return oom(d);
    return p;
  }

  /* Singular. */
  if (f->type == kPc_Type_Message || f->type == kPc_Type_Group) {
    uint32_t group = f->type == kPc_Type_Group ? (uint32_t)f->number : 0;
    if (ext) {
      pc_Value *cell = pc_Message_MutableExtension(msg, f, d->arena);
      if (cell == NULL) return oom(d);
      return read_submessage(d, p, end, f, m, &cell->m, group);
    }
    if (f->oneof == NULL) { /* the hot path: the pointer slot is the presence (no hasbit) */
      void *slot = pc_Message_Slot(msg, f);
      pc_Message *sub;
      memcpy(&sub, slot, sizeof sub);
      p = read_submessage(d, p, end, f, m, &sub, group);
      memcpy(slot, &sub, sizeof sub);
      return p;
    }
    pc_Message *sub = pc_Message_Has(msg, f) ? pc_Message_Get(msg, f).m : NULL;
    pc_Message *before = sub;
    p = read_submessage(d, p, end, f, m, &sub, group);
    if (sub != before) {
      pc_Value v;
      v.m = sub;
      pc_Message_Set(msg, f, v);
    }
    return p;
  }
  pc_Value v;
  memset(&v, 0, sizeof v);
  if (f->type == kPc_Type_String || f->type == kPc_Type_Bytes) {
    size_t len;
    p = pc_Wire_ReadLength(p, end, &len, &st);
    if (p == NULL) return fail(d, m, f, 0, st, vp);
    if (pc_Decode_ChecksUtf8(f) && !pc_Wire_ValidUtf8(p, len))
      return fail(d, m, f, 0, kPc_WireStatus_BadUtf8, vp);
    if (!make_string(d, &v.s, p, len)) return oom(d);
    p += len;
  } else {
    pc_Value raw;
    p = pc_Decode_ReadNumber(p, end, f->type, &raw, &st);
    if (p == NULL) return fail(d, m, f, 0, st, vp);
    if (pc_Decode_EnumUnknown(f, raw.i32)) return add_unknown(d, msg, tagpos, p) ? p : oom(d);
    store_number(&v, pc_FieldDef_ElemSlot(f), &raw);
  }
  if (ext) {
    pc_Value *cell = pc_Message_MutableExtension(msg, f, d->arena);
    if (cell == NULL) return oom(d);
    *cell = v;
    return p;
  }
  if (f->oneof == NULL) {
    /* The hot path: a plain slot and its presence bit, if any. */
    void *slot = pc_Message_Slot(msg, f);
    if (f->slot == kPc_Slot_String)
      memcpy(slot, &v.s, sizeof v.s);
    else
      store_number(slot, f->slot, &v);
    if (f->hasbit >= 0) ((uint8_t *)msg)[8 + f->hasbit / 8] |= (uint8_t)(1u << (f->hasbit % 8));
    return p;
  }
  pc_Message_Set(msg, f, v);
  return p;
}

/* The field with number 'num': the regular field (pc_Decode_FindField),
 * else an extension when 'num' is in an extension range. */
static const pc_FieldDef *find_field(const Dec *d, const pc_MessageDef *m, uint32_t num,
                                     uint32_t *hint) {
  const pc_FieldDef *f = pc_Decode_FindField(m, num, hint);
  if (f != NULL) return f;
  for (uint32_t r = 0; r < m->extension_range_count; r++) {
    if ((int32_t)num >= m->extension_ranges[r].start && (int32_t)num < m->extension_ranges[r].end)
      return d->pool != NULL ? pc_Pool_FindExtensionByNumber(d->pool, m, (int32_t)num) : NULL;
  }
  return NULL;
}

static const uint8_t *decode_message(Dec *d, const uint8_t *p, const uint8_t *end, pc_Message *msg,
                                     const pc_MessageDef *m, uint32_t group) {
  uint32_t hint = 0;
  pc_WireStatus st = kPc_WireStatus_Ok;
  while (p < end) {
    const uint8_t *tagpos = p;
    uint32_t num;
    pc_WireType wt;
    p = pc_Decode_ReadTag(p, end, &num, &wt, &st);
    if (p == NULL) return fail(d, m, NULL, num, st, tagpos);
    if (wt == kPc_Wire_EndGroup) {
      if (group == 0) return fail(d, m, NULL, num, kPc_WireStatus_UnmatchedEndGroup, tagpos);
      if (num != group) return fail(d, m, NULL, num, kPc_WireStatus_GroupMismatch, tagpos);
      return p;
    }
    const pc_FieldDef *f = find_field(d, m, num, &hint);
    if (f != NULL) {
      pc_WireType want = pc_Decode_WireType(f->type);
      if (wt == want && f->slot <= kPc_Slot_64 && f->oneof == NULL && !f->is_extension &&
          (f->type != kPc_Type_Enum || f->enumdef == NULL || !f->enumdef->closed)) {
        /* The hot path: a singular number into its slot. */
        pc_Value v;
        const uint8_t *vp = p;
        p = pc_Decode_ReadNumber(p, end, f->type, &v, &st);
        if (p == NULL) return fail(d, m, f, 0, st, vp);
        store_number((char *)msg + f->offset, f->slot, &v);
        if (f->hasbit >= 0) ((uint8_t *)msg)[8 + f->hasbit / 8] |= (uint8_t)(1u << (f->hasbit % 8));
        continue;
      }
      if (wt == want ||
          (wt == kPc_Wire_Len && f->label == kPc_Label_Repeated && pc_Decode_IsNumeric(f->type))) {
        p = read_field(d, tagpos, p, end, msg, m, f, wt);
        if (p == NULL) return NULL;
        continue;
      }
    }
    const uint8_t *at;
    p = pc_Wire_SkipField(p, end, num, wt, d->depth_left, &st, &at);
    if (p == NULL) return fail(d, m, NULL, num, st, at);
    if (!add_unknown(d, msg, tagpos, p)) return oom(d);
  }
  if (group != 0) return fail(d, m, NULL, group, kPc_WireStatus_Truncated, p);
  return p;
}

/* The end of a decode that read a type with required fields. */
static pc_DecodeStatus check_required(const Dec *d) {
  if (d->status != kPc_DecodeStatus_Ok || (d->opts != NULL && d->opts->partial)) return d->status;
  if (pc_Message_CheckRequired(d->root, d->root_def, d->err) != 0)
    return kPc_DecodeStatus_MissingRequired;
  return kPc_DecodeStatus_Ok;
}

pc_DecodeStatus pc_Decode(const char *buf, size_t size, pc_Message *msg, const pc_MessageDef *m,
                          pc_Arena *a, const pc_DecodeOptions *opts, pc_Error *err) {
  Dec d;
  d.start = (const uint8_t *)buf;
  d.arena = a;
  d.err = err;
  d.pool = m->file != NULL && !(opts != NULL && opts->no_extensions) ? m->file->pool : NULL;
  int depth = opts != NULL && opts->max_depth > 0 ? opts->max_depth : PC_WIRE_DEFAULT_DEPTH;
  d.depth_left = d.max_depth = depth < PC_MESSAGE_MAX_DEPTH ? depth : PC_MESSAGE_MAX_DEPTH;
  d.alias = opts != NULL && opts->alias;
  d.opts = opts;
  d.status = kPc_DecodeStatus_Ok;
  d.required = m->required_count;
  d.root = msg;
  d.root_def = m;
  if (size > 0) decode_message(&d, d.start, d.start + size, msg, m, 0);
  /* Only input holding a type with required fields pays for the walk. */
  if (d.required != 0) return check_required(&d);
  return d.status;
}
