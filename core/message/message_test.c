/* Schema pool, layouts and message instances (core/schema/def.h, core/message/message.h),
 * including every allocation failing in turn without a leak. */
#include "testing/check.h"
#include "testing/failalloc.h"

#include "schema/def.h"
#include "message/message.h"

#include <stdio.h>
#include <string.h>

static pc_FieldDesc field(const char *name, int32_t number, pc_FieldType type,
                          const char *type_name) {
  pc_FieldDesc f;
  memset(&f, 0, sizeof(f));
  f.name = name;
  f.number = number;
  f.type = type;
  f.type_name = type_name;
  f.label = kPc_Label_Optional;
  f.oneof_index = -1;
  f.packed = -1;
  f.deprecated = -1;
  return f;
}

/* package t; proto3:
 *   enum E { Z = 0; A = 1; }
 *   message Three { uint32 foo = 1; uint32 bar = 2; uint32 baz = 3; }
 *   message Mixed { bool b = 1; int32 i = 2; int64 l = 3; string s = 4;
 *     Three m = 5; repeated int32 r = 6; map<string, Three> mp = 7;
 *     oneof o { int32 a = 8; string c = 9; } optional int32 opt = 10;
 *     E e = 11; Mixed self = 12; } */
typedef struct {
  pc_FieldDesc three[3], mixed[12], entry[2];
  pc_MessageDesc msgs[2], nested[1];
  pc_OneofDesc oneofs[2];
  pc_EnumValueDesc values[2];
  pc_EnumDesc enums[1];
  pc_FileDesc file;
} Schema;

static void schema(Schema *s) {
  memset(s, 0, sizeof(*s));
  s->three[0] = field("foo", 1, kPc_Type_Uint32, NULL);
  s->three[1] = field("bar", 2, kPc_Type_Uint32, NULL);
  s->three[2] = field("baz", 3, kPc_Type_Uint32, NULL);
  s->mixed[0] = field("b", 1, kPc_Type_Bool, NULL);
  s->mixed[1] = field("i", 2, kPc_Type_Int32, NULL);
  s->mixed[2] = field("l", 3, kPc_Type_Int64, NULL);
  s->mixed[3] = field("s", 4, kPc_Type_String, NULL);
  s->mixed[4] = field("m", 5, kPc_Type_Message, ".t.Three");
  s->mixed[5] = field("r", 6, kPc_Type_Int32, NULL);
  s->mixed[5].label = kPc_Label_Repeated;
  s->mixed[6] = field("mp", 7, kPc_Type_Message, ".t.Mixed.MpEntry");
  s->mixed[6].label = kPc_Label_Repeated;
  s->mixed[7] = field("a", 8, kPc_Type_Int32, NULL);
  s->mixed[7].oneof_index = 0;
  s->mixed[8] = field("c", 9, kPc_Type_String, NULL);
  s->mixed[8].oneof_index = 0;
  s->mixed[9] = field("opt", 10, kPc_Type_Int32, NULL);
  s->mixed[9].oneof_index = 1;
  s->mixed[9].proto3_optional = 1;
  s->mixed[10] = field("e", 11, kPc_Type_Enum, ".t.E");
  s->mixed[11] = field("self", 12, kPc_Type_Message, ".t.Mixed");
  s->entry[0] = field("key", 1, kPc_Type_String, NULL);
  s->entry[1] = field("value", 2, kPc_Type_Message, ".t.Three");
  s->nested[0].name = "MpEntry";
  s->nested[0].fields = s->entry;
  s->nested[0].field_count = 2;
  s->nested[0].map_entry = 1;
  s->oneofs[0].name = "o";
  s->oneofs[1].name = "_opt";
  s->msgs[0].name = "Three";
  s->msgs[0].fields = s->three;
  s->msgs[0].field_count = 3;
  s->msgs[1].name = "Mixed";
  s->msgs[1].fields = s->mixed;
  s->msgs[1].field_count = 12;
  s->msgs[1].nested = s->nested;
  s->msgs[1].nested_count = 1;
  s->msgs[1].oneofs = s->oneofs;
  s->msgs[1].oneof_count = 2;
  s->values[0].name = "Z";
  s->values[1].name = "A";
  s->values[1].number = 1;
  s->enums[0].name = "E";
  s->enums[0].values = s->values;
  s->enums[0].value_count = 2;
  s->file.name = "t.proto";
  s->file.package = "t";
  s->file.syntax = kPc_Syntax_Proto3;
  s->file.messages = s->msgs;
  s->file.message_count = 2;
  s->file.enums = s->enums;
  s->file.enum_count = 1;
}

static size_t slot_size(const pc_FieldDef *f) {
  return pc_Slot_Size(f->slot);
}

/* No two slots overlap (oneof members share theirs), each is aligned, and
 * everything fits in the message. */
static void check_layout(const pc_MessageDef *m) {
  CHECK(m->size % 8 == 0);
  size_t hasbit_end = 8 + (m->hasbit_count + 7) / 8;
  for (uint32_t i = 0; i < m->field_count; i++) {
    const pc_FieldDef *f = &m->fields[i];
    size_t sz = slot_size(f), align = sz > 8 ? 8 : sz;
    CHECK(f->offset >= hasbit_end);
    CHECK(f->offset % align == 0);
    CHECK(f->offset + sz <= m->size);
    for (uint32_t j = 0; j < i; j++) {
      const pc_FieldDef *g = &m->fields[j];
      if (f->oneof != NULL && f->oneof == g->oneof) {
        CHECK(f->offset == g->offset);
        continue;
      }
      CHECK(f->offset + sz <= g->offset || g->offset + slot_size(g) <= f->offset);
      if (g->case_offset)
        CHECK(f->offset + sz <= g->case_offset || f->offset >= g->case_offset + 4);
    }
  }
}

static void test_layouts(void) {
  Schema s;
  schema(&s);
  pc_Error err;
  pc_Error_Init(&err);
  pc_Pool *pool = pc_Pool_New(NULL, NULL);
  const pc_FileDef *file = pc_Pool_AddFile(pool, &s.file, &err);
  CHECK(file != NULL);
  if (file == NULL) {
    fprintf(stderr, "%s\n", err.msg);
    pc_Pool_Free(pool);
    return;
  }
  const pc_MessageDef *three = pc_Pool_FindMessage(pool, "t.Three");
  const pc_MessageDef *mixed = pc_Pool_FindMessage(pool, "t.Mixed");
  CHECK(three != NULL && mixed != NULL);
  if (three == NULL || mixed == NULL) {
    pc_Pool_Free(pool);
    return;
  }
  /* Three uint32: the internal pointer then 12 bytes of slots. */
  CHECK(three->size == 24);
  CHECK(three->fields[0].offset == 8);
  CHECK(three->fields[1].offset == 12);
  CHECK(three->fields[2].offset == 16);
  CHECK(three->hasbit_count == 0);
  check_layout(three);
  check_layout(mixed);
  check_layout(pc_Pool_FindMessage(pool, "t.Mixed.MpEntry"));
  const pc_FieldDef *opt = pc_MessageDef_FindFieldByName(mixed, "opt", 3);
  CHECK(opt->hasbit == 0 && opt->has_presence && opt->oneof == NULL);
  CHECK(mixed->hasbit_count == 1);
  const pc_FieldDef *a = pc_MessageDef_FindFieldByNumber(mixed, 8);
  const pc_FieldDef *c = pc_MessageDef_FindFieldByNumber(mixed, 9);
  CHECK(a->case_offset != 0 && a->case_offset == c->case_offset && a->offset == c->offset);
  CHECK(pc_MessageDef_FindFieldByName(mixed, "mp", 2)->is_map);
  CHECK(pc_MessageDef_FindFieldByName(mixed, "mp", 2)->slot == kPc_Slot_Map);
  CHECK(pc_MessageDef_FindFieldByName(mixed, "r", 1)->packed);
  CHECK(pc_MessageDef_FindFieldByName(mixed, "m", 1)->message == three);
  CHECK(pc_MessageDef_FindFieldByJsonName(mixed, "self", 4) != NULL);
  CHECK(pc_MessageDef_FindOneof(mixed, "o", 1)->field_count == 2);
  CHECK(pc_MessageDef_FindOneof(mixed, "_opt", 4)->synthetic);
  CHECK(pc_MessageDef_FindFieldByNumber(mixed, 99) == NULL);
  const pc_EnumDef *e = pc_Pool_FindEnum(pool, "t.E");
  CHECK(e != NULL && !e->closed && pc_EnumDef_FindByName(e, "A", 1)->number == 1);
  CHECK(strcmp(pc_Pool_FileDesc(pool, "t.proto")->messages[1].name, "Mixed") == 0);
  CHECK(pc_Pool_FileDesc(pool, "t.proto") != &s.file); /* a copy */
  /* The same file twice, and a frozen pool, are refused. */
  CHECK(pc_Pool_AddFile(pool, &s.file, &err) == NULL);
  CHECK(strcmp(err.msg, "t.proto: a file with this name is already loaded") == 0);
  pc_Pool_Freeze(pool);
  s.file.name = "u.proto";
  pc_Error_Init(&err);
  CHECK(pc_Pool_AddFile(pool, &s.file, &err) == NULL);
  CHECK(strcmp(err.msg, "u.proto: pool is frozen") == 0);
  pc_Pool_Free(pool);
}

static void test_bad_input(void) {
  Schema s;
  schema(&s);
  pc_Error err;
  pc_Pool *pool = pc_Pool_New(NULL, NULL);
  s.mixed[4].type_name = ".t.Nope";
  pc_Error_Init(&err);
  CHECK(pc_Pool_AddFile(pool, &s.file, &err) == NULL);
  CHECK(strcmp(err.msg, "t.Mixed.m: unknown type '.t.Nope'") == 0);
  CHECK(pc_Pool_FindMessage(pool, "t.Three") == NULL); /* unchanged */
  CHECK(pc_Pool_FileCount(pool) == 0);
  schema(&s);
  s.mixed[1].number = 1;
  pc_Error_Init(&err);
  CHECK(pc_Pool_AddFile(pool, &s.file, &err) == NULL);
  CHECK(strcmp(err.msg, "t.Mixed.i: field number already used by b") == 0);
  schema(&s);
  s.mixed[10].type = kPc_Type_Message; /* an enum named as a message */
  pc_Error_Init(&err);
  CHECK(pc_Pool_AddFile(pool, &s.file, &err) == NULL);
  CHECK(strcmp(err.msg, "t.Mixed.e: '.t.E' is not of the declared kind") == 0);
  schema(&s);
  s.mixed[2].number = 19000;
  pc_Error_Init(&err);
  CHECK(pc_Pool_AddFile(pool, &s.file, &err) == NULL);
  schema(&s);
  CHECK(pc_Pool_AddFile(pool, &s.file, NULL) != NULL);
  pc_Pool_Free(pool);
}

/* Builds a message exercising every container, in 'a'; 0 on failure. */
static int fill(const pc_Pool *pool, pc_Arena *a, pc_Message **out) {
  const pc_MessageDef *mixed = pc_Pool_FindMessage(pool, "t.Mixed");
  const pc_MessageDef *three = pc_Pool_FindMessage(pool, "t.Three");
  pc_Message *m = pc_Message_New(mixed, a);
  if (m == NULL) return 0;
  pc_Value v;
  memset(&v, 0, sizeof(v));
  if (!pc_StringView_Copy(&v.s, "hello", 5, a)) return 0;
  pc_Message_Set(m, pc_MessageDef_FindFieldByNumber(mixed, 4), v);
  v.m = pc_Message_New(three, a);
  if (v.m == NULL) return 0;
  pc_Value x = {.u32 = 7};
  pc_Message_Set(v.m, &three->fields[0], x);
  pc_Message_Set(m, pc_MessageDef_FindFieldByNumber(mixed, 5), v);
  const pc_FieldDef *r = pc_MessageDef_FindFieldByNumber(mixed, 6);
  pc_Array *arr = pc_Message_MutableArray(m, r, a);
  if (arr == NULL) return 0;
  for (int i = 0; i < 20; i++) {
    pc_Value e = {.i32 = i};
    if (!pc_Array_Append(arr, &e, 4, a)) return 0;
  }
  const pc_FieldDef *mp = pc_MessageDef_FindFieldByNumber(mixed, 7);
  pc_Map *map = pc_Message_MutableMap(m, mp, a);
  if (map == NULL) return 0;
  for (int i = 0; i < 10; i++) {
    char key[8];
    int n = snprintf(key, sizeof key, "k%d", i);
    pc_Value k, val;
    memset(&val, 0, sizeof(val));
    if (!pc_StringView_Copy(&k.s, key, (size_t)n, a)) return 0;
    val.m = pc_Message_New(three, a);
    if (val.m == NULL || pc_Map_Set(map, kPc_Slot_String, k, val, a) == NULL) return 0;
  }
  if (!pc_Message_AddUnknown(m, "\x68\x01", 2, a)) return 0;
  *out = m;
  return 1;
}

/* A pc_Message_Walk visitor: counts its visits, stops the walk with 7 at
 * the 'stop_at'-th (never when 0). */
typedef struct {
  int seen, stop_at;
} Visits;

static int count_visit(const pc_Message *msg, const pc_MessageDef *m, void *ud) {
  (void)msg;
  (void)m;
  Visits *v = ud;
  return ++v->seen == v->stop_at ? 7 : 0;
}

static void test_messages(void) {
  Schema s;
  schema(&s);
  pc_Pool *pool = pc_Pool_New(NULL, NULL);
  CHECK(pc_Pool_AddFile(pool, &s.file, NULL) != NULL);
  const pc_MessageDef *mixed = pc_Pool_FindMessage(pool, "t.Mixed");
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_Message *m = NULL;
  CHECK(fill(pool, a, &m));
  const pc_FieldDef *fa = pc_MessageDef_FindFieldByNumber(mixed, 8);
  const pc_FieldDef *fc = pc_MessageDef_FindFieldByNumber(mixed, 9);
  const pc_FieldDef *opt = pc_MessageDef_FindFieldByNumber(mixed, 10);
  const pc_FieldDef *mp = pc_MessageDef_FindFieldByNumber(mixed, 7);
  pc_Value v = {.i32 = 5};
  pc_Message_Set(m, fa, v);
  CHECK(pc_Message_WhichOneof(m, fa->oneof) == fa);
  pc_Value str;
  pc_StringView_Copy(&str.s, "c", 1, a);
  pc_Message_Set(m, fc, str);
  CHECK(pc_Message_WhichOneof(m, fa->oneof) == fc);
  CHECK(!pc_Message_Has(m, fa) && pc_Message_Get(m, fa).i32 == 0);
  CHECK(!pc_Message_Has(m, opt));
  pc_Value zero = {.i32 = 0};
  pc_Message_Set(m, opt, zero);
  CHECK(pc_Message_Has(m, opt));
  pc_Value key;
  key.s.data = "k3";
  key.s.size = 2;
  pc_Map *map = pc_Message_Get(m, mp).map;
  CHECK(map->size == 10 && pc_Map_Find(map, kPc_Slot_String, key) != NULL);
  CHECK(pc_Map_Delete(map, kPc_Slot_String, key) == 1);
  CHECK(map->size == 9 && pc_Map_Find(map, kPc_Slot_String, key) == NULL);
  key.s.data = "k9";
  CHECK(pc_Map_Find(map, kPc_Slot_String, key) != NULL);
  pc_Message *c = pc_Message_Clone(m, mixed, a);
  CHECK(c != NULL && pc_Message_Equal(m, c, mixed));
  CHECK(pc_Message_Contains(m, mixed, m) == 1);
  CHECK(pc_Message_Contains(m, mixed, c) == 0);
  pc_Value self = {.m = c};
  pc_Message_Set(m, pc_MessageDef_FindFieldByNumber(mixed, 12), self);
  CHECK(pc_Message_Contains(m, mixed, c) == 1);
  /* m holds what c holds (c is its clone) and c: twice as many messages */
  Visits vc = {0, 0}, vm = {0, 0}, stop = {0, 2}, top = {0, 0};
  CHECK(pc_Message_Walk(c, mixed, PC_MESSAGE_MAX_DEPTH, count_visit, &vc) == 0);
  CHECK(pc_Message_Walk(m, mixed, PC_MESSAGE_MAX_DEPTH, count_visit, &vm) == 0);
  CHECK(vm.seen == 2 * vc.seen);
  CHECK(pc_Message_Walk(m, mixed, PC_MESSAGE_MAX_DEPTH, count_visit, &stop) == 7 && stop.seen == 2);
  CHECK(pc_Message_Walk(m, mixed, 0, count_visit, &top) == -1 && top.seen == 1);
  CHECK(!pc_Message_Equal(m, c, mixed));
  size_t n;
  CHECK(pc_Message_GetUnknown(c, &n) != NULL && n == 2);
  CHECK(pc_Message_Def(c) == mixed); /* through the internal part */
  pc_Message_Clear(c, mixed);
  CHECK(!pc_Message_Has(c, fc) && pc_Message_GetUnknown(c, &n) == NULL && n == 0);
  CHECK(pc_Message_Def(c) == mixed); /* the type word again */
  const pc_MessageDef *three = pc_Pool_FindMessage(pool, "t.Three");
  pc_Message *fresh = pc_Message_New(three, a);
  CHECK(fresh != NULL && pc_Message_Def(fresh) == three);
  uint64_t block[32]; /* aligned as an arena block */
  CHECK(three->size <= sizeof(block));
  pc_Message_Init(three, block);
  CHECK(pc_Message_Def(block) == three && pc_Message_GetUnknown(block, &n) == NULL);
  CHECK(pc_Message_AddUnknown(block, "\x08\x01", 2, a) && pc_Message_Def(block) == three);
  pc_Arena_Free(a);
  pc_Pool_Free(pool);
}

/* Every allocation fails in turn: nothing leaks, and a failed AddFile
 * leaves the pool without the file. */
static void test_failing_allocator(void) {
  Schema s;
  schema(&s);
  for (long at = 1;; at++) {
    fail_reset(at);
    pc_Pool *pool = pc_Pool_New(fail_alloc, NULL);
    if (pool != NULL) {
      const pc_FileDef *f = pc_Pool_AddFile(pool, &s.file, NULL);
      if (f == NULL) {
        CHECK(pc_Pool_FindMessage(pool, "t.Three") == NULL);
        CHECK(pc_Pool_FileCount(pool) == 0);
      } else {
        pc_Arena *a = pc_Arena_New(fail_alloc, NULL);
        if (a != NULL) {
          pc_Message *m = NULL;
          if (fill(pool, a, &m)) {
            const pc_MessageDef *mixed = pc_Pool_FindMessage(pool, "t.Mixed");
            pc_Message *c = pc_Message_Clone(m, mixed, a);
            if (c != NULL) CHECK(pc_Message_Equal(m, c, mixed));
          }
          pc_Arena_Free(a);
        }
      }
      pc_Pool_Free(pool);
    }
    CHECK(fail_live == 0);
    if (!fail_hit) break;
  }
}

/* Map keys a request picked to share one slot of a fixed hash of the
 * index (k * 0x9E3779B97F4A7C15, folded: keys whose products have equal
 * halves) made one run of occupied slots as long as the map, so each
 * insert and lookup probed all of it (11 s for 100,000 keys); the index's
 * hash is seeded with where the map is, and its longest run stays short.
 * bench/validate_hostile_bench.lua times it against keys 1..n. */
static void test_map_flood(void) {
  enum { N = 100000 };
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_Map *map = pc_Map_New(a);
  uint64_t inv = 0x9E3779B97F4A7C15ull; /* its inverse modulo 2^64, by Newton */
  for (int i = 0; i < 6; i++) inv *= 2 - 0x9E3779B97F4A7C15ull * inv;
  CHECK(inv * 0x9E3779B97F4A7C15ull == 1);
  for (uint64_t i = 1; i <= N; i++) {
    pc_Value key, value;
    key.u64 = ((i << 32) | i) * inv;
    value.u64 = i;
    CHECK(pc_Map_Set(map, kPc_Slot_64, key, value, a) != NULL);
  }
  CHECK(map->size == N);
  pc_Value key;
  key.u64 = ((7ull << 32) | 7) * inv;
  CHECK(pc_Map_Find(map, kPc_Slot_64, key) != NULL && pc_Map_Find(map, kPc_Slot_64, key)->u64 == 7);
  /* pc_Map_Insert of new keys: found as pc_Map_Set's */
  pc_Map *ins = pc_Map_New(a);
  for (uint64_t i = 1; i <= 100; i++) {
    pc_Value k, value;
    k.u64 = i * inv;
    value.u64 = i;
    CHECK(pc_Map_Insert(ins, kPc_Slot_64, k, value, a) != NULL);
  }
  CHECK(ins->size == 100);
  for (uint64_t i = 1; i <= 100; i++) {
    pc_Value k;
    k.u64 = i * inv;
    CHECK(pc_Map_Find(ins, kPc_Slot_64, k) != NULL && pc_Map_Find(ins, kPc_Slot_64, k)->u64 == i);
  }
  size_t run = 0, longest = 0; /* occupied slots in a row (wrapping ignored) */
  for (size_t i = 0; i < map->index_cap; i++) {
    run = map->index[i] != 0 ? run + 1 : 0;
    if (run > longest) longest = run;
  }
  if (longest >= 1000)
    fprintf(stderr, "%d crafted map keys: a run of %zu occupied slots\n", N, longest);
  CHECK(longest < 1000);
  pc_Arena_Free(a);
}

int main(void) {
  test_layouts();
  test_bad_input();
  test_messages();
  test_failing_allocator();
  test_map_flood();
  return CHECK_DONE();
}
