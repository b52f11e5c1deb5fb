/* protovalidate's rules on messages (ctest validate.rules), over a schema
 * compiled here with the core's .proto compiler importing the built-in
 * buf/validate/validate.proto: standard rules of each kind through
 * validate.proto's own CEL, custom field and message rules, required and
 * ignore, oneofs, repeated items, map keys and values, nested messages and
 * their paths, the well-known types' rules, compile errors, fail fast, and
 * the plan cache. */
#include "base/arena.h"
#include "compiler/import.h"
#include "json/json.h"
#include "testing/check.h"
#include "testing/stack.h"
#include "validate/validate.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char kProto[] =
    "syntax = \"proto3\";\n"
    "package t;\n"
    "import \"buf/validate/validate.proto\";\n"
    "import \"google/protobuf/duration.proto\";\n"
    "import \"google/protobuf/timestamp.proto\";\n"
    "import \"google/protobuf/wrappers.proto\";\n"
    "import \"google/protobuf/any.proto\";\n"
    "enum Color { NONE = 0; RED = 1; BLUE = 2; }\n"
    "message Inner {\n"
    "  string id = 1 [(buf.validate.field).string.uuid = true];\n"
    "  int32 n = 2 [(buf.validate.field).int32 = {gt: 0, lte: 10}];\n"
    "}\n"
    "message User {\n"
    "  string name = 1 [(buf.validate.field).string = {min_len: 1, max_len: 8}];\n"
    "  string email = 2 [(buf.validate.field).string.email = true,\n"
    "                    (buf.validate.field).ignore = IGNORE_IF_ZERO_VALUE];\n"
    "  uint32 age = 3 [(buf.validate.field).uint32 = {gte: 18, lt: 150}];\n"
    "  repeated string tags = 4 [(buf.validate.field).repeated = {max_items: 3, unique: true,\n"
    "                           items: {string: {pattern: \"^[a-z]+$\"}}}];\n"
    "  map<string, int32> scores = 5 [(buf.validate.field).map = {\n"
    "      keys: {string: {min_len: 2}}, values: {int32: {gte: 0}}}];\n"
    "  Inner inner = 6 [(buf.validate.field).required = true];\n"
    "  repeated Inner inners = 7;\n"
    "  Color color = 8 [(buf.validate.field).enum = {defined_only: true, not_in: [2]}];\n"
    "  google.protobuf.Duration ttl = 9 [(buf.validate.field).duration = {gt: {seconds: 1}}];\n"
    "  google.protobuf.Timestamp at = 10 [(buf.validate.field).timestamp.lt_now = true];\n"
    "  google.protobuf.Int32Value wrapped = 11 [(buf.validate.field).int32.gt = 5];\n"
    "  optional string nick = 12 [(buf.validate.field).string.min_len = 3];\n"
    "  string code = 13 [(buf.validate.field).cel = {id: \"code.upper\", message: \"must be upper "
    "case\",\n"
    "                    expression: \"this == this.upperAscii()\"}];\n"
    "  oneof contact { option (buf.validate.oneof).required = true; string phone = 14; string fax "
    "= 15; }\n"
    "  google.protobuf.Any any = 16 [(buf.validate.field).any = {in: "
    "[\"type.googleapis.com/t.Inner\"]}];\n"
    "  double ratio = 17 [(buf.validate.field).double = {gte: 0, lte: 1}];\n"
    "  bytes blob = 18 [(buf.validate.field).bytes.max_len = 4];\n"
    "  string ignored = 19 [(buf.validate.field).string.min_len = 5, (buf.validate.field).ignore = "
    "IGNORE_ALWAYS];\n"
    "  option (buf.validate.message).cel = {id: \"user.name_code\", expression:\n"
    "      \"this.name == this.code ? 'name and code must differ' : ''\"};\n"
    "  option (buf.validate.message).cel = {id: \"user.adult\", message: \"too young for tags\",\n"
    "      expression: \"this.age >= 21 || size(this.tags) == 0\"};\n"
    "}\n"
    "message Pair {\n"
    "  string a = 1; string b = 2;\n"
    "  option (buf.validate.message).oneof = {fields: [\"a\", \"b\"], required: true};\n"
    "}\n"
    "message Tree { string name = 1 [(buf.validate.field).string.min_len = 1]; repeated Tree kids "
    "= 2; }\n"
    "message Plain { int32 x = 1; }\n"
    "message NulExpr { string x = 1 [(buf.validate.field).cel = {id: \"nul\", expression: "
    "\"this == 'a\\000b'\"}]; }\n"
    "message BadPattern { string s = 1 [(buf.validate.field).string.pattern = \"(a\"]; }\n"
    "message Chain { Chain next = 1; string s = 2 [(buf.validate.field).string.min_len = 1]; }\n"
    "message Formats {\n"
    "  string email = 1 [(buf.validate.field).string.email = true];\n"
    "  string hostname = 2 [(buf.validate.field).string.hostname = true];\n"
    "  string ip = 3 [(buf.validate.field).string.ip = true];\n"
    "  string ipv4 = 4 [(buf.validate.field).string.ipv4 = true];\n"
    "  string ipv6 = 5 [(buf.validate.field).string.ipv6 = true];\n"
    "  string uri = 6 [(buf.validate.field).string.uri = true];\n"
    "  string uri_ref = 7 [(buf.validate.field).string.uri_ref = true];\n"
    "  string address = 8 [(buf.validate.field).string.address = true];\n"
    "  string uuid = 9 [(buf.validate.field).string.uuid = true];\n"
    "  string tuuid = 10 [(buf.validate.field).string.tuuid = true];\n"
    "  string ulid = 11 [(buf.validate.field).string.ulid = true];\n"
    "  string ip_with_prefixlen = 12 [(buf.validate.field).string.ip_with_prefixlen = true];\n"
    "  string ipv4_with_prefixlen = 13 [(buf.validate.field).string.ipv4_with_prefixlen = "
    "true];\n"
    "  string ipv6_with_prefixlen = 14 [(buf.validate.field).string.ipv6_with_prefixlen = "
    "true];\n"
    "  string ip_prefix = 15 [(buf.validate.field).string.ip_prefix = true];\n"
    "  string ipv4_prefix = 16 [(buf.validate.field).string.ipv4_prefix = true];\n"
    "  string ipv6_prefix = 17 [(buf.validate.field).string.ipv6_prefix = true];\n"
    "  string host_and_port = 18 [(buf.validate.field).string.host_and_port = true];\n"
    "  string protobuf_fqn = 19 [(buf.validate.field).string.protobuf_fqn = true];\n"
    "  string protobuf_dot_fqn = 20 [(buf.validate.field).string.protobuf_dot_fqn = true];\n"
    "  string pattern = 21 [(buf.validate.field).string.pattern = \"^[a-z]+[0-9]?$\"];\n"
    "  repeated int64 ints = 22 [(buf.validate.field).repeated.unique = true];\n"
    "  repeated string strs = 23 [(buf.validate.field).repeated.unique = true];\n"
    "  repeated double doubles = 24 [(buf.validate.field).repeated.unique = true];\n"
    "  repeated bool bools = 25 [(buf.validate.field).repeated.unique = true];\n"
    "  string off = 26 [(buf.validate.field).string.email = false];\n"
    "}\n"
    "message BadType { int32 x = 1 [(buf.validate.field).string.min_len = 1]; }\n"
    "message BadCel { int32 x = 1 [(buf.validate.field).cel = {id: \"bad\", expression: \"this "
    "+\"}]; }\n"
    "message BadResult { int32 x = 1 [(buf.validate.field).cel = {id: \"num\", expression: "
    "\"this\"}]; }\n";

static pc_Pool *pool;
static pc_Arena *arena;
static pc_Validator *val;

/* Imports 'src' ('len' bytes) into the pool as the file 'name'. */
static void import(const char *name, const char *src, size_t len) {
  pc_Arena *a = pc_Arena_New(NULL, NULL);
  pc_ImportCtx c;
  memset(&c, 0, sizeof c);
  c.arena = a;
  pc_Error err;
  pc_Error_Init(&err);
  c.main_name = name;
  c.main_source = src;
  c.main_len = len;
  CHECK(pc_Import(pool, &c, name, &err));
  if (err.set) fprintf(stderr, "%s\n", err.msg);
  pc_Arena_Free(a);
}

static void load(void) {
  pool = pc_Pool_New(NULL, NULL);
  import("t.proto", kProto, strlen(kProto));
}

static pc_Message *from_json(const pc_MessageDef *m, const char *json) {
  pc_Message *msg = pc_Message_New(m, arena);
  pc_Error err;
  pc_Error_Init(&err);
  if (pc_Json_Read(json, strlen(json), msg, m, arena, NULL, &err) != kPc_JsonStatus_Ok)
    fprintf(stderr, "%s: %s\n", json, err.msg);
  return msg;
}

/* Validates the message of type 'type' read from 'json' then 'overlay'
 * (JSON read into the same message: NULL for none) and returns its
 * violations as "field|rule" joined by ';' (or "error: ..."). */
static const char *run(const char *type, const char *json, const char *overlay) {
  static char out[4096];
  const pc_MessageDef *m = pc_Pool_FindMessage(pool, type);
  CHECK(m != NULL);
  if (m == NULL) return "no such type";
  pc_Message *msg = from_json(m, json);
  pc_Error err;
  pc_Error_Init(&err);
  if (overlay &&
      pc_Json_Read(overlay, strlen(overlay), msg, m, arena, NULL, &err) != kPc_JsonStatus_Ok)
    fprintf(stderr, "%s: %s\n", overlay, err.msg);
  const int64_t now[2] = {1700000000, 0};
  pc_ValidateStatus st = pc_Validator_Validate(val, msg, m, 0, now, &err);
  out[0] = '\0';
  if (st != kPc_Validate_Valid && st != kPc_Validate_Invalid) {
    snprintf(out, sizeof out, "error: %s", err.msg);
    return out;
  }
  size_t len = 0;
  for (size_t i = 0; i < pc_Validator_ViolationCount(val); i++) {
    const pc_Violation *x = pc_Validator_Violation(val, i);
    len +=
        (size_t)snprintf(out + len, sizeof out - len, "%s%s|%s", i ? ";" : "", x->field, x->rule);
  }
  return out;
}

static void check_result(const char *type, const char *json, const char *overlay,
                         const char *want) {
  const char *got = run(type, json, overlay);
  int ok = strncmp(want, "error", 5) == 0 ? strncmp(got, want, strlen(want)) == 0
                                          : strcmp(got, want) == 0;
  if (!ok)
    fprintf(stderr, "%s %s %s\n  want %s\n  got  %s\n", type, json, overlay ? overlay : "", want,
            got);
  CHECK(ok);
}

static void expect(const char *type, const char *json, const char *want) {
  check_result(type, json, NULL, want);
}

/* A valid user. */
static const char kUser[] =
    "{\"name\": \"ann\", \"age\": 30, \"code\": \"X\", \"phone\": \"1\", "
    "\"inner\": {\"id\": \"8c4f5a52-0f6e-4b8e-9f36-6d2c4b1a2e10\", \"n\": 3}}";

/* The valid user with the JSON members 'extra' read over it. */
static void expect_user(const char *extra, const char *want) {
  char buf[1024];
  snprintf(buf, sizeof buf, "{%s}", extra);
  check_result("t.User", kUser, buf, want);
}

static void standard_rules(void) {
  expect("t.User", kUser, "");
  expect_user("\"age\": 12", "age|uint32.gte_lt");
  expect_user("\"age\": 150", "age|uint32.gte_lt");
  /* name is proto3 without presence: checked when empty */
  const char *noname = "{\"age\": 30, \"code\": \"X\", \"phone\": \"1\", \"inner\": {\"id\": "
                       "\"8c4f5a52-0f6e-4b8e-9f36-6d2c4b1a2e10\", \"n\": 3}}";
  expect("t.User", noname, "name|string.min_len");
  expect_user("\"email\": \"nope\"", "email|string.email");
  expect_user("\"email\": \"a@b.org\"", "");
  expect_user("\"color\": \"BLUE\"", "color|enum.not_in");
  expect_user("\"color\": 7", "color|enum.defined_only");
  expect_user("\"ttl\": \"0.5s\"", "ttl|duration.gt");
  expect_user("\"ttl\": \"2s\"", "");
  expect_user("\"at\": \"2030-01-01T00:00:00Z\"", "at|timestamp.lt_now");
  expect_user("\"at\": \"2020-01-01T00:00:00Z\"", "");
  expect_user("\"wrapped\": 3", "wrapped|int32.gt");
  expect_user("\"wrapped\": 6", "");
  expect_user("\"nick\": \"ab\"", "nick|string.min_len");
  expect_user("\"ratio\": 1.5", "ratio|double.gte_lte");
  expect_user("\"ratio\": \"NaN\"", "ratio|double.gte_lte");
  expect_user("\"blob\": \"AAAAAAAA\"", "blob|bytes.max_len");
  expect_user("\"ignored\": \"x\"", "");
  expect_user("\"any\": {\"@type\": \"type.googleapis.com/t.Plain\"}", "any|any.in");
  expect_user("\"any\": {\"@type\": \"type.googleapis.com/t.Inner\", \"n\": 1}", "");
}

static void containers(void) {
  expect_user("\"tags\": [\"a\", \"B\", \"a\", \"c\"]",
              "tags|repeated.max_items;tags|repeated.unique;tags[1]|string.pattern");
  expect_user("\"age\": 19, \"tags\": [\"a\"]", "|user.adult");
  expect_user("\"scores\": {\"x\": 1, \"yy\": -1}",
              "scores[\"x\"]|string.min_len;scores[\"yy\"]|int32.gte");
  expect_user("\"scores\": {\"a\\\"b\": 1}", "");
  expect_user("\"scores\": {\"\\n\": 1}", "scores[\"\\n\"]|string.min_len");
  expect_user("\"inners\": [{\"id\": \"8c4f5a52-0f6e-4b8e-9f36-6d2c4b1a2e10\", \"n\": 1}, "
              "{\"id\": \"x\", \"n\": 11}]",
              "inners[1].id|string.uuid;inners[1].n|int32.gt_lte");
  const pc_Validator *cv = val;
  expect_user("\"scores\": {\"x\": 1}", "scores[\"x\"]|string.min_len");
  CHECK(pc_Validator_Violation(cv, 0)->for_key == 1);
  expect("t.Tree", "{\"name\": \"r\", \"kids\": [{\"name\": \"a\", \"kids\": [{}]}]}",
         "kids[0].kids[0].name|string.min_len");
}

static void presence_and_custom(void) {
  const char *noinner = "{\"name\": \"ann\", \"age\": 30, \"code\": \"X\", \"phone\": \"1\"}";
  expect("t.User", noinner, "inner|required");
  expect_user("\"inner\": {\"id\": \"x\", \"n\": 1}", "inner.id|string.uuid");
  expect_user("\"code\": \"x\"", "code|code.upper");
  CHECK(strcmp(pc_Validator_Violation(val, 0)->message, "must be upper case") == 0);
  expect_user("\"name\": \"X\"", "|user.name_code");
  CHECK(strcmp(pc_Validator_Violation(val, 0)->message, "name and code must differ") == 0);
  CHECK(strcmp(pc_Validator_Violation(val, 0)->field, "") == 0);
  const char *nophone = "{\"name\": \"ann\", \"age\": 30, \"code\": \"X\", \"inner\": {\"id\": "
                        "\"8c4f5a52-0f6e-4b8e-9f36-6d2c4b1a2e10\", \"n\": 3}}";
  expect("t.User", nophone, "contact|required");
  expect("t.Pair", "{}", "|message.oneof");
  CHECK(strcmp(pc_Validator_Violation(val, 0)->message, "one of a, b must be set") == 0);
  expect("t.Pair", "{\"a\": \"x\", \"b\": \"y\"}", "|message.oneof");
  CHECK(strcmp(pc_Validator_Violation(val, 0)->message, "only one of a, b can be set") == 0);
  expect("t.Pair", "{\"a\": \"x\"}", "");
  expect("t.Plain", "{\"x\": 1}", "");
}

/* A valid Formats message, every standard rule on it checked in C. */
static const char kFormats[] =
    "{\"email\": \"a.b+c@example.com\", \"hostname\": \"api.example.com\", \"ip\": \"::1\", "
    "\"ipv4\": \"10.0.0.1\", \"ipv6\": \"2001:db8::1\", \"uri\": \"https://a.example/x?y#z\", "
    "\"uri_ref\": \"\", \"address\": \"10.1.2.3\", "
    "\"uuid\": \"8C4F5A52-0f6e-4b8e-9f36-6d2c4b1a2e10\", \"tuuid\": "
    "\"8c4f5a520f6e4b8e9f366d2c4b1a2e10\", \"ulid\": \"01ARZ3NDEKTSV4RRFFQ69G5FAV\", "
    "\"ip_with_prefixlen\": \"10.1.2.3/8\", \"ipv4_with_prefixlen\": \"10.1.2.3/8\", "
    "\"ipv6_with_prefixlen\": \"2001:db8::1/32\", \"ip_prefix\": \"10.0.0.0/8\", "
    "\"ipv4_prefix\": \"10.0.0.0/8\", \"ipv6_prefix\": \"2001:db8::/32\", "
    "\"host_and_port\": \"[::1]:80\", \"protobuf_fqn\": \"a.b_2.C\", "
    "\"protobuf_dot_fqn\": \".a.B\", \"pattern\": \"abc1\", \"ints\": [1, 2, -1], "
    "\"strs\": [\"a\", \"b\"], \"doubles\": [1.5, \"NaN\", \"NaN\"], \"bools\": [true, false], "
    "\"off\": \"not an email\"}";

/* The formats, patterns and `unique` checked in C: a valid value runs no
 * CEL; an invalid one runs the rule's CEL for its id and message. */
static void native_checks(void) {
  check_result("t.Formats", kFormats, NULL, "");
  CHECK(pc_Validator_CelCount(val) == 0);
  /* an enum's const, in and not_in too (User.color: not_in [2]) */
  check_result("t.User", kUser, "{\"color\": \"RED\"}", "");
  CHECK(pc_Validator_CelCount(val) == 3); /* the message's two rules and code.upper */
  check_result("t.User", kUser, "{\"color\": \"BLUE\"}", "color|enum.not_in");
  CHECK(pc_Validator_CelCount(val) == 4);
  CHECK(strcmp(pc_Validator_Violation(val, 0)->message, "must not be in list [2]") == 0);
  static const struct {
    const char *overlay, *want;
  } bad[] = {
      {"{\"email\": \"a@-b.com\"}", "email|string.email"},
      {"{\"email\": \"\"}", "email|string.email_empty"},
      {"{\"hostname\": \"a..b\"}", "hostname|string.hostname"},
      {"{\"hostname\": \"1.2.3\"}", "hostname|string.hostname"},
      {"{\"ip\": \"256.1.1.1\"}", "ip|string.ip"},
      {"{\"ipv4\": \"::1\"}", "ipv4|string.ipv4"},
      {"{\"ipv6\": \"1.2.3.4\"}", "ipv6|string.ipv6"},
      {"{\"uri\": \"/relative\"}", "uri|string.uri"},
      {"{\"uri_ref\": \"http:// x\"}", "uri_ref|string.uri_ref"},
      {"{\"address\": \"-x-\"}", "address|string.address"},
      {"{\"uuid\": \"8c4f5a52-0f6e-4b8e-9f36-6d2c4b1a2e1\"}", "uuid|string.uuid"},
      {"{\"uuid\": \"8c4f5a52x0f6e-4b8e-9f36-6d2c4b1a2e10\"}", "uuid|string.uuid"},
      {"{\"uuid\": \"8c4f5a52-0f6e-4b8e-9f36-6d2c4b1a2e1g\"}", "uuid|string.uuid"},
      {"{\"tuuid\": \"8c4f5a520f6e4b8e9f366d2c4b1a2e1\"}", "tuuid|string.tuuid"},
      {"{\"ulid\": \"81ARZ3NDEKTSV4RRFFQ69G5FAV\"}", "ulid|string.ulid"},
      {"{\"ulid\": \"01ARZ3NDEKTSV4RRFFQ69G5FAU\"}", "ulid|string.ulid"},
      {"{\"ip_with_prefixlen\": \"10.1.2.3\"}", "ip_with_prefixlen|string.ip_with_prefixlen"},
      {"{\"ip_prefix\": \"10.1.2.3/8\"}", "ip_prefix|string.ip_prefix"},
      {"{\"ipv6_prefix\": \"10.0.0.0/8\"}", "ipv6_prefix|string.ipv6_prefix"},
      {"{\"host_and_port\": \"example.com\"}", "host_and_port|string.host_and_port"},
      {"{\"protobuf_fqn\": \"a..b\"}", "protobuf_fqn|string.protobuf_fqn"},
      {"{\"protobuf_fqn\": \"1a\"}", "protobuf_fqn|string.protobuf_fqn"},
      {"{\"protobuf_dot_fqn\": \"a.b\"}", "protobuf_dot_fqn|string.protobuf_dot_fqn"},
      {"{\"pattern\": \"ab12\"}", "pattern|string.pattern"},
      {"{\"ints\": [1, 2, 1]}", "ints|repeated.unique"},
      {"{\"strs\": [\"a\", \"b\", \"a\"]}", "strs|repeated.unique"},
      {"{\"doubles\": [0, -0]}", "doubles|repeated.unique"},
      {"{\"bools\": [true, true]}", "bools|repeated.unique"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    check_result("t.Formats", kFormats, bad[i].overlay, bad[i].want);
    CHECK(pc_Validator_CelCount(val) > 0);
  }
  /* `unique` over long lists decided in C too (a hash table: no CEL run),
     of values whose low bits are all alike */
  size_t cap = 100000 * 24 + 64, len;
  char *json = malloc(cap);
  for (int kind = 0; kind < 4; kind++) {
    len = (size_t)snprintf(json, cap, "{\"%s\": [", kind < 2 ? "doubles" : "ints");
    for (int i = 0; i < 100000; i++) {
      long long x = kind < 2 ? i + 1 : (long long)(i + 1) << 32;
      if (kind % 2 && i == 99999) x = kind < 2 ? 1 : 1LL << 32; /* the first again */
      len += (size_t)snprintf(json + len, cap - len, "%s%lld", i ? "," : "", x);
    }
    snprintf(json + len, cap - len, "]}");
    check_result("t.Formats", kFormats, json,
                 kind % 2 ? (kind < 2 ? "doubles|repeated.unique" : "ints|repeated.unique") : "");
    if (kind % 2 == 0) CHECK(pc_Validator_CelCount(val) == 0);
  }
  free(json);
  /* the unanchored match of a pattern, and more values each format takes */
  check_result("t.Formats", kFormats,
               "{\"uri_ref\": \"../a?b\", \"ulid\": \"7ZZZZZZZZZZZZZZZZZZZZZZZZZ\"}", "");
  CHECK(pc_Validator_CelCount(val) == 0);
}

/* proto2: `required` fields with the legacy_required option, and
 * predefined rules the schema declares as extensions of *Rules messages */
static void proto2(void) {
  static const char kProto2[] =
      "syntax = \"proto2\";\n"
      "package t2;\n"
      "import \"buf/validate/validate.proto\";\n"
      "message Old {\n"
      "  required string name = 1 [(buf.validate.field).string.min_len = 2];\n"
      "  required int32 id = 2 [(buf.validate.field).required = true];\n"
      "  optional int32 n = 3;\n"
      "}\n"
      "extend buf.validate.StringRules {\n"
      "  optional bool no_space = 1161 [(buf.validate.predefined).cel = {\n"
      "    id: \"string.no_space\", expression:\n"
      "    \"!rule || !this.contains(' ') ? '' : 'has a space'\"}];\n"
      "}\n"
      "message Scope { extend buf.validate.Int32Rules {\n"
      "  repeated int32 not_multiple_of = 1161 [(buf.validate.predefined).cel = {\n"
      "    id: \"int32.not_multiple_of\", message: \"a forbidden multiple\",\n"
      "    expression: \"!rule.exists(d, this % d == 0)\"}];\n"
      "} }\n"
      "message Pre {\n"
      "  optional string s = 1 [(buf.validate.field).string.(no_space) = true,\n"
      "                         (buf.validate.field).string.min_len = 2];\n"
      "  optional int32 n = 2 [(buf.validate.field).int32.(Scope.not_multiple_of) = 3,\n"
      "                        (buf.validate.field).int32.(Scope.not_multiple_of) = 5];\n"
      "  repeated string r = 3 [(buf.validate.field).repeated.items.string.(no_space) = true];\n"
      "}\n";
  import("t2.proto", kProto2, strlen(kProto2));
  expect("t2.Old", "{}", "id|required"); /* off: only the `required` rule */
  pc_Validator_SetLegacyRequired(val, 1);
  expect("t2.Old", "{}", "name|legacy_required;id|required");
  CHECK(strcmp(pc_Validator_Violation(val, 0)->message, "value is required") == 0);
  expect("t2.Old", "{\"name\": \"x\", \"id\": 1}", "name|string.min_len");
  expect("t2.Old", "{\"name\": \"xy\", \"id\": 1}", "");
  pc_Validator_SetLegacyRequired(val, 0);
  expect("t2.Old", "{\"id\": 1}", ""); /* it has presence: its rules apply when set */
  /* predefined rules of the schema (extensions of *Rules), after the standard ones */
  expect("t2.Pre", "{\"s\": \"ab\", \"n\": 7, \"r\": [\"a\"]}", "");
  expect("t2.Pre", "{\"s\": \"a b\"}", "s|string.no_space");
  CHECK(strcmp(pc_Validator_Violation(val, 0)->message, "has a space") == 0);
  expect("t2.Pre", "{\"s\": \" \"}", "s|string.min_len;s|string.no_space");
  expect("t2.Pre", "{\"n\": 10}", "n|int32.not_multiple_of");
  CHECK(strcmp(pc_Validator_Violation(val, 0)->message, "a forbidden multiple") == 0);
  expect("t2.Pre", "{\"n\": 9}", "n|int32.not_multiple_of");
  expect("t2.Pre", "{\"r\": [\"a\", \"b c\"]}", "r[1]|string.no_space");
}

static void errors_and_cache(void) {
  expect("t.BadType", "{}", "error: expected rule \"int32\", got \"string\" on t.BadType.x");
  expect("t.BadCel", "{}", "error: failed to compile bad: ");
  expect("t.BadPattern", "{}",
         "error: invalid string.pattern \"(a\" on t.BadPattern.s: missing ): (a");
  expect("t.NulExpr", "{}", "error: failed to compile nul: 1:11: NUL byte in string literal");
  expect("t.BadResult", "{\"x\": 1}", "error: expression num outputs int");
  /* fail fast: the first violation only */
  const pc_MessageDef *m = pc_Pool_FindMessage(pool, "t.User");
  CHECK(m != NULL);
  if (m == NULL) return;
  pc_Error err;
  pc_Error_Init(&err);
  CHECK(pc_Validator_Validate(val, from_json(m, "{\"age\": 1, \"blob\": \"AAAAAAAA\"}"), m, 1, NULL,
                              &err) == kPc_Validate_Invalid);
  CHECK(pc_Validator_ViolationCount(val) == 1);
  /* plans are kept: validating again builds none */
  size_t plans = pc_Validator_PlanCount(val);
  CHECK(plans >= 3);
  expect("t.User", kUser, "");
  CHECK(pc_Validator_PlanCount(val) == plans);
}

/* A chain of messages 'depth' deep, each with s = "x". */
static pc_Message *chain(const pc_MessageDef *m, int depth) {
  const pc_FieldDef *next = pc_MessageDef_FindFieldByName(m, "next", 4);
  const pc_FieldDef *s = pc_MessageDef_FindFieldByName(m, "s", 1);
  pc_Message *root = NULL;
  for (int i = 0; i < depth; i++) {
    pc_Message *msg = pc_Message_New(m, arena);
    pc_Value v;
    v.s.data = "x";
    v.s.size = 1;
    pc_Message_Set(msg, s, v);
    if (root != NULL) {
      v.m = root;
      pc_Message_Set(msg, next, v);
    }
    root = msg;
  }
  return root;
}

/* Nesting deeper than PC_MESSAGE_MAX_DEPTH is an error, not a crash. */
static void deep_nesting(void) {
  const pc_MessageDef *m = pc_Pool_FindMessage(pool, "t.Chain");
  CHECK(m != NULL);
  if (m == NULL) return;
  pc_Error err;
  pc_Error_Init(&err);
  CHECK(pc_Validator_Validate(val, chain(m, PC_MESSAGE_MAX_DEPTH), m, 0, NULL, &err) ==
        kPc_Validate_Valid);
  CHECK(pc_Validator_Validate(val, chain(m, PC_MESSAGE_MAX_DEPTH + 1), m, 0, NULL, &err) ==
        kPc_Validate_Runtime);
  CHECK(strstr(err.msg, "nesting too deep") != NULL);
  pc_Error_Init(&err);
  CHECK(pc_Validator_Validate(val, chain(m, 100000), m, 0, NULL, &err) == kPc_Validate_Runtime);
  CHECK(strstr(err.msg, "nesting too deep") != NULL);
  /* the validator is usable afterwards */
  CHECK(pc_Validator_Validate(val, chain(m, 3), m, 0, NULL, &err) == kPc_Validate_Valid);
}

/* in / not_in over 200,000 constants: a value outside the list is a
 * violation (the rule's CEL would reach its budget wording it). */
static void huge_lists(void) {
  enum { N = 200000 };
  char *src = malloc((size_t)N * 24 + 1024);
  size_t len =
      (size_t)sprintf(src, "syntax = \"proto3\";\npackage t3;\n"
                           "import \"buf/validate/validate.proto\";\n"
                           "message In { string s = 1 [(buf.validate.field).string = {in: [");
  for (int i = 0; i < N; i++) len += (size_t)sprintf(src + len, "%s\"v%d\"", i ? "," : "", i);
  len += (size_t)sprintf(src + len, "]}];\n int64 n = 2 [(buf.validate.field).int64 = {not_in: [");
  for (int i = 0; i < N; i++) len += (size_t)sprintf(src + len, "%s%d", i ? "," : "", i + 1);
  len += (size_t)sprintf(src + len, "]}]; }\n");
  import("t3.proto", src, len);
  free(src);
  expect("t3.In", "{\"s\": \"v199999\", \"n\": \"-1\"}", "");
  expect("t3.In", "{\"s\": \"nope\"}", "s|string.in");
  CHECK(strcmp(pc_Validator_Violation(val, 0)->message,
               "value must be in the list of 200000 items") == 0);
  expect("t3.In", "{\"s\": \"v1\", \"n\": \"5\"}", "n|int64.not_in");
  CHECK(strcmp(pc_Validator_Violation(val, 0)->message,
               "value must not be in the list of 200000 items") == 0);
}

/* deep_nesting on a thread of STACK_BYTES: a message nested
 * PC_MESSAGE_MAX_DEPTH deep, with rules at every level, is validated there
 * (as it is decoded there: core/wire/depth_test.c). */
static void *deep_nesting_thread(void *arg) {
  (void)arg;
  deep_nesting();
  return NULL;
}

static void deep_nesting_small_stack(void) {
  pthread_attr_t attr;
  pthread_t t;
  CHECK(pthread_attr_init(&attr) == 0);
  CHECK(pthread_attr_setstacksize(&attr, STACK_BYTES) == 0);
  CHECK(pthread_create(&t, &attr, deep_nesting_thread, NULL) == 0);
  CHECK(pthread_join(t, NULL) == 0);
  pthread_attr_destroy(&attr);
}

int main(void) {
  arena = pc_Arena_New(NULL, NULL);
  load();
  val = pc_Validator_New(NULL, NULL);
  CHECK(val != NULL);
  standard_rules();
  containers();
  presence_and_custom();
  native_checks();
  proto2();
  errors_and_cache();
  deep_nesting_small_stack();
  huge_lists();
  pc_Validator_Free(val);
  pc_Arena_Free(arena);
  pc_Pool_Free(pool);
  return CHECK_DONE();
}
