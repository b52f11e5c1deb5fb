/* proto_dump: loads .proto files (with their imports) through the parser
 * and resolver and prints the FileDescriptorProtos as JSON, in the shape
 * spec/tools/proto_compare.py prints protoc's: descriptor.proto field names,
 * only fields that are set, enums as numbers, options as the hex of their
 * serialized bytes. A test tool, not installed.
 *   proto_dump [-I DIR]... FILE.proto...
 * FILE names are import names, found under the -I directories in order,
 * else among the built-in well-known types. */
#include "base/arena.h"
#include "compiler/load.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const char **dirs;
  int ndirs;
  char *buf;
} Source;

static int read_source(void *ud, const char *name, const char **src, size_t *len, pc_Error *err) {
  Source *s = ud;
  (void)err;
  free(s->buf);
  s->buf = NULL;
  for (int i = 0; i < s->ndirs; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", s->dirs[i], name);
    FILE *f = fopen(path, "rb");
    if (f == NULL) continue;
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap);
    size_t got;
    while (b != NULL && (got = fread(b + n, 1, cap - n, f)) > 0) {
      n += got;
      if (n == cap) {
        char *nb = realloc(b, cap *= 2);
        if (nb == NULL) free(b);
        b = nb;
      }
    }
    fclose(f);
    if (b == NULL) return -1;
    s->buf = b;
    *src = b;
    *len = n;
    return 1;
  }
  return 0;
}

static void strn(const char *s, size_t n) {
  putchar('"');
  for (const unsigned char *p = (const unsigned char *)s; p < (const unsigned char *)s + n; p++) {
    if (*p == '"' || *p == '\\')
      printf("\\%c", *p);
    else if (*p < 0x20)
      printf("\\u%04x", *p);
    else
      putchar(*p);
  }
  putchar('"');
}

static void str(const char *s) {
  strn(s, strlen(s));
}

static int first;
static void key(const char *k) {
  printf(first ? "\"%s\":" : ",\"%s\":", k);
  first = 0;
}
static void kstr(const char *k, const char *v) {
  if (v == NULL) return;
  key(k);
  str(v);
}
static void kint(const char *k, long long v) {
  key(k);
  printf("%lld", v);
}
static void kopts(const char *k, const pc_OptionsDesc *o) {
  if (!o->present) return;
  key(k);
  putchar('"');
  for (size_t i = 0; i < o->size; i++) printf("%02x", o->data[i]);
  putchar('"');
}
static void open_obj(void) {
  putchar('{');
  first = 1;
}
static void close_obj(void) {
  putchar('}');
  first = 0;
}

static void field(const pc_FieldDesc *f) {
  open_obj();
  kstr("name", f->name);
  kstr("extendee", f->extendee);
  kint("number", f->number);
  kint("label", f->label);
  if (f->type) kint("type", f->type);
  kstr("type_name", f->type_name);
  if (f->default_value) {
    key("default_value");
    strn(f->default_value, f->default_value_len ? f->default_value_len : strlen(f->default_value));
  }
  kopts("options", &f->options);
  if (f->oneof_index >= 0) kint("oneof_index", f->oneof_index);
  kstr("json_name", f->json_name);
  if (f->proto3_optional) {
    key("proto3_optional");
    printf("true");
  }
  close_obj();
}

static void fields(const char *k, const pc_FieldDesc *fs, size_t n) {
  if (n == 0) return;
  key(k);
  putchar('[');
  for (size_t i = 0; i < n; i++) {
    if (i) putchar(',');
    field(&fs[i]);
  }
  putchar(']');
}

static void ranges(const char *k, const pc_RangeDesc *r, size_t n) {
  if (n == 0) return;
  key(k);
  putchar('[');
  for (size_t i = 0; i < n; i++) {
    printf("%s{\"start\":%d,\"end\":%d}", i ? "," : "", r[i].start, r[i].end);
  }
  putchar(']');
  first = 0;
}

static void names(const char *k, const char *const *s, size_t n) {
  if (n == 0) return;
  key(k);
  putchar('[');
  for (size_t i = 0; i < n; i++) {
    if (i) putchar(',');
    str(s[i]);
  }
  putchar(']');
}

static void enum_(const pc_EnumDesc *e) {
  open_obj();
  kstr("name", e->name);
  if (e->value_count) {
    key("value");
    putchar('[');
    for (size_t i = 0; i < e->value_count; i++) {
      if (i) putchar(',');
      open_obj();
      kstr("name", e->values[i].name);
      kint("number", e->values[i].number);
      kopts("options", &e->values[i].options);
      close_obj();
    }
    putchar(']');
  }
  kopts("options", &e->options);
  ranges("reserved_range", e->reserved_ranges, e->reserved_range_count);
  names("reserved_name", e->reserved_names, e->reserved_name_count);
  close_obj();
}

static void enums(const pc_EnumDesc *es, size_t n) {
  if (n == 0) return;
  key("enum_type");
  putchar('[');
  for (size_t i = 0; i < n; i++) {
    if (i) putchar(',');
    enum_(&es[i]);
  }
  putchar(']');
}

static void message(const pc_MessageDesc *m) {
  open_obj();
  kstr("name", m->name);
  fields("field", m->fields, m->field_count);
  fields("extension", m->extensions, m->extension_count);
  if (m->nested_count) {
    key("nested_type");
    putchar('[');
    for (size_t i = 0; i < m->nested_count; i++) {
      if (i) putchar(',');
      message(&m->nested[i]);
    }
    putchar(']');
  }
  enums(m->enums, m->enum_count);
  if (m->extension_range_count) {
    key("extension_range");
    putchar('[');
    for (size_t i = 0; i < m->extension_range_count; i++) {
      if (i) putchar(',');
      open_obj();
      kint("start", m->extension_ranges[i].range.start);
      kint("end", m->extension_ranges[i].range.end);
      kopts("options", &m->extension_ranges[i].options);
      close_obj();
    }
    putchar(']');
  }
  if (m->oneof_count) {
    key("oneof_decl");
    putchar('[');
    for (size_t i = 0; i < m->oneof_count; i++) {
      if (i) putchar(',');
      open_obj();
      kstr("name", m->oneofs[i].name);
      kopts("options", &m->oneofs[i].options);
      close_obj();
    }
    putchar(']');
  }
  kopts("options", &m->options);
  ranges("reserved_range", m->reserved_ranges, m->reserved_range_count);
  names("reserved_name", m->reserved_names, m->reserved_name_count);
  close_obj();
}

static void file(const pc_FileDesc *f) {
  open_obj();
  kstr("name", f->name);
  kstr("package", f->package);
  names("dependency", f->dependencies, f->dependency_count);
  if (f->message_count) {
    key("message_type");
    putchar('[');
    for (size_t i = 0; i < f->message_count; i++) {
      if (i) putchar(',');
      message(&f->messages[i]);
    }
    putchar(']');
  }
  enums(f->enums, f->enum_count);
  if (f->service_count) {
    key("service");
    putchar('[');
    for (size_t i = 0; i < f->service_count; i++) {
      const pc_ServiceDesc *s = &f->services[i];
      if (i) putchar(',');
      open_obj();
      kstr("name", s->name);
      if (s->method_count) {
        key("method");
        putchar('[');
        for (size_t k = 0; k < s->method_count; k++) {
          const pc_MethodDesc *md = &s->methods[k];
          if (k) putchar(',');
          open_obj();
          kstr("name", md->name);
          kstr("input_type", md->input_type);
          kstr("output_type", md->output_type);
          kopts("options", &md->options);
          if (md->client_streaming) {
            key("client_streaming");
            printf("true");
          }
          if (md->server_streaming) {
            key("server_streaming");
            printf("true");
          }
          close_obj();
        }
        putchar(']');
      }
      kopts("options", &s->options);
      close_obj();
    }
    putchar(']');
  }
  fields("extension", f->extensions, f->extension_count);
  kopts("options", &f->options);
  if (f->public_dependency_count) {
    key("public_dependency");
    putchar('[');
    for (size_t i = 0; i < f->public_dependency_count; i++)
      printf("%s%d", i ? "," : "", f->public_dependencies[i]);
    putchar(']');
  }
  if (f->weak_dependency_count) {
    key("weak_dependency");
    putchar('[');
    for (size_t i = 0; i < f->weak_dependency_count; i++)
      printf("%s%d", i ? "," : "", f->weak_dependencies[i]);
    putchar(']');
  }
  if (f->syntax == kPc_Syntax_Proto3) kstr("syntax", "proto3");
  close_obj();
}

int main(int argc, char **argv) {
  const char *dirs[64];
  Source s = {dirs, 0, NULL};
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_ProtoSet set = {0};
  pc_Error err;
  pc_Error_Init(&err);
  int status = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "-I") == 0 && i + 1 < argc) {
      if (s.ndirs < 64) dirs[s.ndirs++] = argv[i + 1];
      i++;
      continue;
    }
    if (pc_LoadProto(a, &set, argv[i], read_source, &s, &err) == NULL) {
      fprintf(stderr, "%s\n", err.msg);
      status = 1;
      break;
    }
  }
  free(s.buf);
  if (status == 0) {
    printf("{\"file\":[");
    for (size_t i = 0; i < set.count; i++) {
      if (i) putchar(',');
      file(set.files[i]);
    }
    printf("]}\n");
  }
  pc_Arena_Free(a);
  return status;
}
