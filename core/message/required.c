/* proto2 required fields: the walk behind pc_Message_CheckRequired
 * (message/message.h). */
#include "message/message.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The walk's state: the path of the message being visited ('path' holds
 * 'len' bytes, always NUL-terminated, in 'nseg' segments starting at
 * 'seg[i]') and the list written so far. */
typedef struct {
  char path[4 * PC_ERROR_MAX]; /* note_missing lists its middle cut to fit */
  size_t len;
  uint16_t seg[2 * PC_ERROR_MAX]; /* a segment takes 2 bytes at least */
  size_t nseg;
  char list[PC_ERROR_MAX]; /* "a.B.x, a.B.y" */
  size_t list_len;
  size_t missing; /* required fields found unset */
  size_t listed;  /* of them in 'list' */
  size_t dropped; /* segments past the end of 'path', left out */
  int stop_at_first;
} Walk;

/* What path_push returns for a segment it left out. */
#define DROPPED SIZE_MAX

/* Appends a printf-style segment to the path, whole, or none of it when it
 * does not fit (counted in 'dropped'); returns what path_pop takes back. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static size_t
path_push(Walk *w, const char *fmt, ...) {
  size_t mark = w->len, left = sizeof w->path - w->len;
  va_list ap;
  va_start(ap, fmt);
  int n = w->dropped > 0 ? -1 : vsnprintf(w->path + w->len, left, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= left) {
    w->path[mark] = '\0';
    w->dropped++;
    return DROPPED;
  }
  w->len += (size_t)n;
  w->seg[w->nseg++] = (uint16_t)mark;
  return mark;
}

static void path_pop(Walk *w, size_t mark) {
  if (mark == DROPPED) {
    w->dropped--;
    return;
  }
  w->len = mark;
  w->path[mark] = '\0';
  w->nseg--;
}

/* A field's path segment: ".name", or ".(pkg.ext)" for an extension (as the
 * text format names it). */
#define FIELD_FORMAT(f)                                                                            \
  (f)->is_extension ? ".(%s)" : ".%s", (f)->is_extension ? (f)->full_name : (f)->name

static size_t push_field(Walk *w, const pc_FieldDef *f) {
  return path_push(w, FIELD_FORMAT(f));
}

/* Where the path may be cut: the start of the last segment at or before
 * 'limit' (0 when none) into '*before', and of the first at or after 'from'
 * (the last segment when none is) into '*after'. */
static void boundaries(const Walk *w, size_t limit, size_t from, size_t *before, size_t *after) {
  *before = 0;
  *after = w->nseg > 0 ? w->seg[w->nseg - 1] : w->len;
  for (size_t i = 0; i < w->nseg; i++) {
    if (w->seg[i] <= limit) *before = w->seg[i];
    if (w->seg[i] >= from) {
      *after = w->seg[i];
      break;
    }
  }
}

/* Lists field 'f' of the message at the path, as room allows: whole, or
 * for the first one listed, with the middle of the path left out ("...")
 * at segment boundaries (and "..." before the field for segments past the
 * path's end), so the error names at least one field. */
static void note_missing(Walk *w, const pc_FieldDef *f) {
  w->missing++;
  if (w->stop_at_first) return;
  char own[PC_ERROR_MAX];
  snprintf(own, sizeof own, FIELD_FORMAT(f));
  const char *sep = w->listed > 0 ? ", " : "";
  /* Room for this entry and for the closing " (N in all)" note. */
  size_t room = sizeof w->list - w->list_len - 64, own_len = strlen(own);
  char *at = w->list + w->list_len;
  size_t left = sizeof w->list - w->list_len;
  if (w->dropped == 0 && strlen(sep) + w->len + own_len < room) {
    w->list_len += (size_t)snprintf(at, left, "%s%s%s", sep, w->path, own);
  } else if (w->listed == 0) {
    size_t avail = room > own_len + 4 ? room - own_len - 4 : 0, head, tail, unused;
    boundaries(w, 0, w->len > avail / 2 ? w->len - avail / 2 : 0, &unused, &tail);
    boundaries(w, avail > w->len - tail ? avail - (w->len - tail) : 0, w->len, &head, &unused);
    w->list_len +=
        (size_t)snprintf(at, left, "%.*s...%.*s%s%s", (int)head, w->path, (int)(w->len - tail),
                         w->path + tail, w->dropped > 0 ? "..." : "", own);
  } else {
    return;
  }
  w->listed++;
}

/* A string key's quoted text is cut (pc_Error_Quote: never within an
 * escape or a UTF-8 sequence) once it takes 64 bytes. */
const char *pc_Map_ShowKey(char *buf, const pc_FieldDef *kf, pc_Value k) {
  char key[68];
  switch (kf->type) {
  case kPc_Type_String:
  case kPc_Type_Bytes:
    snprintf(buf, PC_MAP_KEY_SHOWN, "[\"%s\"]",
             pc_Error_Quote(key, sizeof key, k.s.data, k.s.size, kPc_Quote_Lua));
    break;
  case kPc_Type_Bool: snprintf(buf, PC_MAP_KEY_SHOWN, "[%s]", k.b ? "true" : "false"); break;
  case kPc_Type_Uint32:
  case kPc_Type_Fixed32: snprintf(buf, PC_MAP_KEY_SHOWN, "[%" PRIu32 "]", k.u32); break;
  case kPc_Type_Uint64:
  case kPc_Type_Fixed64: snprintf(buf, PC_MAP_KEY_SHOWN, "[%" PRIu64 "]", k.u64); break;
  case kPc_Type_Int64:
  case kPc_Type_Sint64:
  case kPc_Type_Sfixed64: snprintf(buf, PC_MAP_KEY_SHOWN, "[%" PRId64 "]", k.i64); break;
  default: snprintf(buf, PC_MAP_KEY_SHOWN, "[%" PRId32 "]", k.i32); break;
  }
  return buf;
}

/* A map key as the path shows it (pc_Map_ShowKey). */
static size_t push_key(Walk *w, const pc_FieldDef *kf, pc_Value k) {
  char shown[PC_MAP_KEY_SHOWN];
  return path_push(w, "%s", pc_Map_ShowKey(shown, kf, k));
}

static void walk(Walk *w, const pc_Message *msg, const pc_MessageDef *m, int depth);

/* Each message of a repeated field (its path gets [i], counted from 0 as
 * C++ FindInitializationErrors and protocall's JSON paths count). */
static void walk_array(Walk *w, const pc_Array *arr, const pc_FieldDef *f, int depth) {
  for (size_t j = 0; arr != NULL && j < arr->size; j++) {
    const pc_Message *sub = pc_Array_Get(arr, j, kPc_Slot_Message).m;
    if (sub == NULL) continue;
    size_t mark = path_push(w, "[%zu]", j);
    walk(w, sub, f->message, depth + 1);
    path_pop(w, mark);
    if (w->stop_at_first && w->missing) return;
  }
}

static void walk(Walk *w, const pc_Message *msg, const pc_MessageDef *m, int depth) {
  /* Nesting past the limit cannot be encoded or decoded anyway (the
   * encoder says so); the walk does not go there. */
  if (depth > PC_MESSAGE_MAX_DEPTH) return;
  for (uint32_t i = 0; i < m->field_count; i++) {
    const pc_FieldDef *f = &m->fields[i];
    if (f->label == kPc_Label_Required && !pc_Message_Has(msg, f)) {
      note_missing(w, f);
      if (w->stop_at_first) return;
      continue;
    }
    if (f->message == NULL || !pc_Message_Has(msg, f)) continue;
    pc_Value v = pc_Message_Get(msg, f);
    size_t mark = push_field(w, f);
    if (f->slot == kPc_Slot_Message) {
      walk(w, v.m, f->message, depth + 1);
    } else if (f->slot == kPc_Slot_Array) {
      walk_array(w, v.a, f, depth);
    } else if (f->slot == kPc_Slot_Map && v.map != NULL) {
      const pc_FieldDef *kf = pc_FieldDef_MapKey(f), *vf = pc_FieldDef_MapValue(f);
      for (size_t j = 0; vf->message != NULL && j < v.map->size; j++) {
        const pc_MapEntry *e = &v.map->entries[j];
        if (e->value.m == NULL) continue;
        size_t kmark = push_key(w, kf, e->key);
        walk(w, e->value.m, vf->message, depth + 1);
        path_pop(w, kmark);
        if (w->stop_at_first && w->missing) break;
      }
    }
    path_pop(w, mark);
    if (w->stop_at_first && w->missing) return;
  }
  size_t n;
  const pc_Extension *x = pc_Message_Extensions(msg, &n);
  for (size_t i = 0; i < n; i++) {
    const pc_FieldDef *f = x[i].field;
    if (f->message == NULL) continue;
    size_t mark = push_field(w, f);
    if (f->label == kPc_Label_Repeated)
      walk_array(w, x[i].value.a, f, depth);
    else if (x[i].value.m != NULL)
      walk(w, x[i].value.m, f->message, depth + 1);
    path_pop(w, mark);
    if (w->stop_at_first && w->missing) return;
  }
}

size_t pc_Message_CheckRequired(const pc_Message *msg, const pc_MessageDef *m, pc_Error *err) {
  Walk w;
  w.len = 0;
  w.path[0] = '\0';
  w.list_len = 0;
  w.list[0] = '\0';
  w.missing = w.listed = w.dropped = w.nseg = 0;
  w.stop_at_first = err == NULL;
  path_push(&w, "%s", m->full_name);
  walk(&w, msg, m, 0);
  if (w.missing == 0 || err == NULL) return w.missing;
  if (w.listed < w.missing)
    pc_Error_Set(err, "missing required field%s: %s, ... (%zu in all)", w.missing == 1 ? "" : "s",
                 w.list, w.missing);
  else
    pc_Error_Set(err, "missing required field%s: %s", w.missing == 1 ? "" : "s", w.list);
  return w.missing;
}
