// The oracle of protocall's CEL evaluator (core/cel): protovalidate-es's
// CEL, @bufbuild/cel, set up as protovalidate-es sets it up (the strings
// extension and protovalidate's functions, RE2 matching), and cel-spec's
// conformance suite (@bufbuild/cel-spec, the expected values). The C side
// is core/cel/diff_test.c (ctest cel.diff).
//
//   node spec/node/cel_diff.mjs gen CASES --seed N --count N --descriptors SET
//       Writes CASES, one case a line: "id, container, expression, n, then
//       n times name, kind, data" separated by tabs (\\ \t \n \r escaped).
//       A binding's kind is "expr" (data: a CEL literal, evaluated by each
//       side) or "msg:TYPE" (data: the JSON of a message of SET, the
//       FileDescriptorSet the C side wrote). The cases: `count` generated
//       from the seed (arithmetic at the int64 / uint64 edges, heterogeneous
//       equality and ordering, strings with multi-byte characters, format,
//       the macros, timestamps and durations, protovalidate's functions on
//       tricky inputs, messages of every field kind and well-known type,
//       protovalidate's own rule expressions), then the conformance suite's
//       tests this evaluator can run (CASES.meta.json keeps their expected
//       values).
//   node spec/node/cel_diff.mjs check CASES OURS --descriptors SET
//       OURS has lines "id<TAB>result" (the canonical text of the value, or
//       "error ..."). Each generated case is evaluated with @bufbuild/cel
//       and compared (any two errors agree); each conformance case is
//       compared with its expected value. A difference is either one of the
//       listed ones (DIFFERENCES below, each with its reason) or a failure.
//       Prints the tally; exits 1 when a difference is unexplained.
import { readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import {
  celEnv, parse, plan, isCelError, isCelUint, isCelList, isCelMap, isCelType,
} from "@bufbuild/cel";
import { strings } from "@bufbuild/cel/ext";
import { create, createFileRegistry, fromBinary, fromJson, toBinary, toJson, isMessage } from "@bufbuild/protobuf";
import { isReflectMessage } from "@bufbuild/protobuf/reflect";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";

// protovalidate-es's CEL functions and RE2 matcher are not exported: taken
// from its files, as its CelManager takes them.
const pvDir = dirname(fileURLToPath(import.meta.resolve("@bufbuild/protovalidate")));
const { createCustomFuncions } = await import(pathToFileURL(join(pvDir, "func.js")).href);
const { re2RegexMatch } = await import(pathToFileURL(join(pvDir, "regex.js")).href);

const args = process.argv.slice(2);
const option = (name, dflt) => {
  const i = args.indexOf(name);
  return i >= 0 ? args[i + 1] : dflt;
};

// -- Text ----------------------------------------------------------------

const esc = (s) => String(s).replace(/\\/g, "\\\\").replace(/\t/g, "\\t").replace(/\n/g, "\\n").replace(/\r/g, "\\r");
const unesc = (s) => s.replace(/\\(.)/g, (_, c) => (c === "t" ? "\t" : c === "n" ? "\n" : c === "r" ? "\r" : c));

// A CEL string literal of a JS string.
function celStr(s) {
  let out = "'";
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (ch === "'" || ch === "\\") out += "\\" + ch;
    else if (ch === "\n") out += "\\n";
    else if (c < 0x20 || c === 0x7f) out += "\\x" + c.toString(16).padStart(2, "0");
    else out += ch;
  }
  return out + "'";
}

const celBytes = (u8) => "b'" + [...u8].map((b) => "\\x" + b.toString(16).padStart(2, "0")).join("") + "'";

// -- Canonical values (as core/cel/test_internal.h prints them) -----------

function canonDouble(v) {
  if (Number.isNaN(v)) return "NaN";
  if (v === Infinity) return "Infinity";
  if (v === -Infinity) return "-Infinity";
  if (Object.is(v, -0)) return "-0.0";
  const s = String(v);
  return /^-?\d+$/.test(s) ? s + ".0" : s;
}

function quote(s) {
  let out = '"';
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (ch === '"' || ch === "\\") out += "\\" + ch;
    else if (c < 0x20 || c === 0x7f) out += "\\u" + c.toString(16).padStart(4, "0");
    else out += ch;
  }
  return out + '"';
}

const utf8Compare = (a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b));

function canonTime(typeName, seconds, nanos) {
  const sec = BigInt(seconds);
  const ns = Number(nanos);
  if (typeName === "google.protobuf.Timestamp") return `timestamp(${sec}.${String(ns).padStart(9, "0")})`;
  const neg = sec < 0n || ns < 0;
  const as = neg ? -sec : sec;
  const an = neg ? -ns : ns;
  return `duration("${neg ? "-" : ""}${as}.${String(an).padStart(9, "0")}s")`;
}

function canon(v) {
  if (v === null || v === undefined) return "null";
  switch (typeof v) {
    case "boolean": return String(v);
    case "bigint": return v.toString();
    case "number": return canonDouble(v);
    case "string": return quote(v);
    default: break;
  }
  if (isCelUint(v)) return `${v.value}u`;
  if (v instanceof Uint8Array) return `b"${Buffer.from(v).toString("hex")}"`;
  if (isCelType(v)) return `type(${v.name})`;
  if (isCelList(v)) {
    const items = [];
    for (let i = 0; i < v.size; i++) items.push(canon(v.get(i)));
    return `[${items.join(", ")}]`;
  }
  if (isCelMap(v)) {
    const pairs = [...v].map(([k, x]) => [canon(k), canon(x)]);
    pairs.sort((a, b) => utf8Compare(a[0], b[0]));
    return `{${pairs.map(([k, x]) => `${k}: ${x}`).join(", ")}}`;
  }
  let msg = null;
  let typeName = null;
  if (isReflectMessage(v)) {
    msg = v.message;
    typeName = v.desc.typeName;
  } else if (isMessage(v)) {
    msg = v;
    typeName = v.$typeName;
  }
  if (typeName === "google.protobuf.Timestamp" || typeName === "google.protobuf.Duration") {
    return canonTime(typeName, msg.seconds, msg.nanos);
  }
  if (typeName) return `message(${typeName})`;
  return `unknown(${String(v)})`;
}

// -- Evaluation with @bufbuild/cel ------------------------------------------

let registry = null;
const envs = new Map();
function env(container) {
  if (!envs.has(container)) {
    envs.set(container, celEnv({
      namespace: container,
      registry,
      funcs: [...strings, ...createCustomFuncions(re2RegexMatch)],
    }));
  }
  return envs.get(container);
}

function celEval(container, expr, bindings) {
  try {
    const r = plan(env(container), parse(expr))(bindings);
    if (isCelError(r)) return { error: r.message };
    return { value: r };
  } catch (e) {
    return { error: String(e && e.message ? e.message : e) };
  }
}

function theirs(c) {
  const bindings = {};
  for (const b of c.vars) {
    if (b.kind === "expr") {
      const r = celEval("", b.data, {});
      if (r.error !== undefined) return `error binding: ${r.error}`;
      bindings[b.name] = r.value;
    } else {
      const schema = registry.getMessage(b.kind.slice(4));
      bindings[b.name] = fromJson(schema, JSON.parse(b.data), { registry });
    }
  }
  const r = celEval(c.container, c.expr, bindings);
  if (r.error !== undefined) return `error ${r.error}`;
  try {
    return canon(r.value);
  } catch (e) {
    return `error printing: ${e}`;
  }
}

// -- The generator ------------------------------------------------------------

// mulberry32: small, seeded, the same on every machine
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

let R = rng(1);
const pick = (a) => a[Math.floor(R() * a.length)];
const chance = (p) => R() < p;
const int = (n) => Math.floor(R() * n);

const INTS = ["0", "1", "-1", "2", "3", "7", "42", "-42", "100", "255", "1000000", "9223372036854775807",
  "-9223372036854775808", "4294967296", "5000000000", "-5000000000", "0x7f", "3037000500", "-3037000500",
  "9007199254740993", "10", "-7"];
const UINTS = ["0u", "1u", "2u", "3u", "42u", "255u", "18446744073709551615u", "9223372036854775808u",
  "4294967295u", "5000000000u", "0xffU", "10u", "7u"];
const DOUBLES = ["0.0", "1.0", "-1.0", "0.5", "1.5", "2.5", "-2.5", "1e10", "1e21", "1e-7", "123.456", "1e308",
  "-0.0", "3.14159", "0.1", "100.0", "9.007199254740993e15", "1.0e-320", "2.0", "7.0", "42.0", "0.0/0.0",
  "1.0/0.0", "-1.0/0.0", "9223372036854775807.0", "18446744073709551616.0", "1e300", "123456789.0", ".5"];
const STRINGS = ["", "a", "abc", "Hello, World", "héllo", "π", "🐱😀", "a\tb", "xxxxx", "%", "  padded  ",
  "a,b,,c", "ABC", "123", "-42", "1.5", "true", "abcabc", "Straße", "日本語", "a.b.c", "ab", "b", "c",
  "foo", "bar", "foobar", "\u00e9", "e\u0301", "0", "1e3", " 7", "+5", "0x10", "NaN", "Infinity", "t", "FALSE"];
const BYTES = ["b''", "b'abc'", "b'\\xff\\x00'", "b'h\\xc3\\xa9llo'", "b'\\x00'", "b'a'", "b'\\xe2\\x82'"];
const TIMESTAMPS = ["timestamp('2009-02-13T23:31:30Z')", "timestamp('1970-01-01T00:00:00Z')",
  "timestamp('0001-01-01T00:00:00Z')", "timestamp('9999-12-31T23:59:59.999999999Z')",
  "timestamp('2024-02-29T12:00:00.5+02:00')", "timestamp('2000-01-01T00:00:00.123456789Z')",
  "timestamp('1969-12-31T23:59:59Z')", "timestamp('2023-06-15T08:30:00-07:00')"];
const DURATIONS = ["duration('1s')", "duration('1h30m')", "duration('-1.5s')", "duration('0s')",
  "duration('315576000000s')", "duration('1ms')", "duration('100ns')", "duration('3730s')",
  "duration('86400s')", "duration('2.000000001s')", "duration('-315576000000s')", "duration('1us')",
  "duration('25h')", "duration('0.5m')"];
const PATTERNS = ["^a", "b+", "[0-9]{3}", "^[a-z]+$", "(foo|bar)", "\\\\d+", "^\\\\w+@\\\\w+\\\\.com$", ".",
  "", "a.c", "(?i)abc", "[[:alpha:]]+", "\\\\pL+", "x*", "^$", "é", "^.{2}$", "[^a]", "\\\\s"];
const HOSTS = ["example.com", "foo.bar.", "a-b.c", "-bad.com", `${"x".repeat(64)}.com`, "123", "1.2.3.4",
  "a..b", "", "localhost", "xn--bcher-kva.example", "under_score.com", "a.1b", "a.123", "é.com",
  `${"a.".repeat(126)}b`];
const IPS = ["192.168.0.1", "256.1.1.1", "01.2.3.4", "1.2.3", "::1", "2001:db8::1", "::ffff:1.2.3.4",
  "fe80::1%eth0", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:7:8:9", ":1::", "12345::", "::", "1::2::3", "0.0.0.0",
  "1:2:3:4:5:6:1.2.3.4", "::1.2.3.4", "fe80::%", "1.2.3.4.5", " 1.2.3.4", "a::b"];
const PREFIXES = ["192.168.0.0/24", "192.168.0.1/24", "10.0.0.0/8", "10.0.0.0/33", "::/0", "2001:db8::/32",
  "2001:db8::1/32", "1.2.3.4/032", "1.2.3.0/0", "::1/128", "::1/129", "fe80::/10", "fe80::1%e/64",
  "0.0.0.0/32", "1.2.3.4/", "255.255.255.255/31"];
const URIS = ["https://example.com/foo?bar#baz", "http://[::1]:80/", "mailto:a@b.c", "urn:isbn:123", "foo",
  "/rel/path", "//host", "http://a b", "http://%41.com", "http://%c3%a9.com", "http://%ff.com", "a:b",
  "http://user:pw@host:8080/p", ":nope", "http://[v1.x]/", "http://[fe80::1%25en0]/", "", "#frag", "?q",
  "http://example.com:port/", "ftp://1.2.3.4/", "http://[::1", "./a/b", "a/b:c", "http://ex%zzample.com",
  "HTTP://EXAMPLE.COM", "s://h/p?q=1&r=2#f", "http://h/%e2%82%ac"];
const EMAILS = ["a@b.com", "a.b+c@d-e.fg", "@b.com", "a@", "a@b", "a@-b.com", "a@b..com", "a b@c.com",
  `${"x".repeat(64)}@a.com`, "a@b.c-", "!#$%&'*+/=?^_`{|}~-@x.y", "a@@b.c", "a@é.com", "a@b.com."];
const HOSTPORTS = ["example.com:80", "[::1]:443", "[::1]", "1.2.3.4:65535", "1.2.3.4:65536", "host:0",
  "host:08", "host", ":80", "[::1]:", "a.b:1:2", "[1.2.3.4]:80", "host:65535", "[fe80::1%eth0]:80"];
const ZONES = ["UTC", "+05:30", "-02:00", "02:00", "-00:00"];
const FORMATS = ["%s", "%d", "%x", "%X", "%o", "%b", "%.2f", "%f", "%e", "%.3e", "%%", "a %s b %d",
  "%s %s", "%.0f", "%5", "%q", "[%s]", "%.1f%%"];

const lit = {
  int: () => pick(INTS),
  uint: () => pick(UINTS),
  double: () => pick(DOUBLES),
  string: () => {
    const s = pick(STRINGS);
    if (chance(0.1)) return `"${s.replace(/[\\"]/g, (c) => "\\" + c).replace(/\t/g, "\\t")}"`;
    if (chance(0.05) && !/[\\'\n\t]/.test(s)) return `r'${s}'`;
    if (chance(0.05) && !/['\\]/.test(s)) return `'''${s}'''`;
    return celStr(s);
  },
  bytes: () => pick(BYTES),
  bool: () => pick(["true", "false"]),
  ts: () => pick(TIMESTAMPS),
  dur: () => pick(DURATIONS),
  null: () => "null",
};

const SCALARS = ["int", "uint", "double", "string", "bytes", "bool", "ts", "dur", "null"];

function listOf(type, d, n = int(4)) {
  const items = [];
  for (let i = 0; i < n; i++) items.push(gen(type === "any" ? pick(SCALARS) : type, d));
  return `[${items.join(", ")}]`;
}

function mapOf(d) {
  const keyType = pick(["string", "int", "uint", "bool", "string"]);
  const keys = new Set();
  const entries = [];
  for (let i = 0; i < int(4); i++) {
    const k = lit[keyType]();
    if (keys.has(k)) continue;
    keys.add(k);
    entries.push(`${k}: ${gen(pick(SCALARS), d)}`);
  }
  return `{${entries.join(", ")}}`;
}

const paren = (s) => `(${s})`;

const productions = {
  int: [
    (d) => `${gen("int", d)} ${pick(["+", "-", "*", "/", "%"])} ${gen("int", d)}`,
    (d) => `-${paren(gen("int", d))}`,
    (d) => `size(${gen(pick(["string", "bytes", "list", "map"]), d)})`,
    (d) => `${paren(gen(pick(["string", "list"]), d))}.size()`,
    (d) => `int(${gen(pick(["uint", "double", "ts", "int"]), d)})`,
    (d) => `int(${lit.string()})`,
    (d) => `${gen("bool", d)} ? ${gen("int", d)} : ${gen("int", d)}`,
    (d) => `${listOf("int", d, 1 + int(3))}[${pick(["0", "1", "2", "-1", "0u", "1.0", "0.5", "3"])}]`,
    (d) => `${gen("ts", d)}.${pick(["getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate",
      "getDayOfWeek", "getHours", "getMinutes", "getSeconds", "getMilliseconds"])}(${chance(0.3) ? celStr(pick(ZONES)) : ""})`,
    (d) => `${gen("dur", d)}.${pick(["getHours", "getMinutes", "getSeconds", "getMilliseconds"])}()`,
    () => `${lit.string()}.${pick(["indexOf", "lastIndexOf"])}(${lit.string()}${chance(0.3) ? `, ${int(5)}` : ""})`,
    (d) => `{'a': 1, 'b': 2, 3: 4, true: 5}[${pick(["'a'", "'b'", "3", "3u", "3.0", "true", "'z'", "4"])}]` + (d ? "" : ""),
  ],
  uint: [
    (d) => `${gen("uint", d)} ${pick(["+", "-", "*", "/", "%"])} ${gen("uint", d)}`,
    (d) => `uint(${gen(pick(["int", "double", "uint"]), d)})`,
    () => `uint(${lit.string()})`,
    (d) => `${gen("bool", d)} ? ${gen("uint", d)} : ${gen("uint", d)}`,
  ],
  double: [
    (d) => `${gen("double", d)} ${pick(["+", "-", "*", "/"])} ${gen("double", d)}`,
    (d) => `-${paren(gen("double", d))}`,
    (d) => `double(${gen(pick(["int", "uint", "double"]), d)})`,
    () => `double(${lit.string()})`,
    (d) => `${gen("bool", d)} ? ${gen("double", d)} : ${gen("double", d)}`,
  ],
  string: [
    (d) => `${gen("string", d)} + ${gen("string", d)}`,
    (d) => `string(${gen(pick(["int", "uint", "double", "bool", "ts", "dur", "string"]), d)})`,
    () => `string(${pick(BYTES)})`,
    (d) => `${celStr(pick(FORMATS))}.format(${listOf("any", d, int(3))})`,
    (d) => `${paren(gen("string", d))}.${pick(["lowerAscii", "upperAscii", "trim"])}()`,
    (d) => `${paren(gen("string", d))}.substring(${int(4)}${chance(0.5) ? `, ${int(5)}` : ""})`,
    (d) => `${paren(gen("string", d))}.charAt(${int(4)})`,
    (d) => `${paren(gen("string", d))}.replace(${lit.string()}, ${lit.string()}${chance(0.3) ? `, ${int(3)}` : ""})`,
    (d) => `${listOf("string", d)}.join(${chance(0.5) ? lit.string() : ""})`,
    (d) => `${gen("bool", d)} ? ${gen("string", d)} : ${gen("string", d)}`,
    () => `strings.quote(${lit.string()})`,
  ],
  bytes: [
    (d) => `${gen("bytes", d)} + ${gen("bytes", d)}`,
    (d) => `bytes(${gen("string", d)})`,
  ],
  bool: [
    (d) => {
      const t = pick(["int", "uint", "double", "string", "bytes", "bool", "ts", "dur"]);
      const u = ["int", "uint", "double"].includes(t) ? pick(["int", "uint", "double"]) : t;
      return `${gen(t, d)} ${pick(["<", "<=", ">", ">=", "==", "!="])} ${gen(u, d)}`;
    },
    (d) => `${gen(pick([...SCALARS, "list", "map"]), d)} ${pick(["==", "!="])} ${gen(pick([...SCALARS, "list", "map"]), d)}`,
    (d) => `dyn(${gen(pick(["int", "uint", "double"]), d)}) ${pick(["==", "<", ">=", "!="])} ${gen(pick(["int", "uint", "double"]), d)}`,
    (d) => `${gen("bool", d)} ${pick(["&&", "||"])} ${gen("bool", d)}`,
    (d) => `!${paren(gen("bool", d))}`,
    (d) => `${paren(gen("int", d))} / 0 == 1 ${pick(["&&", "||"])} ${gen("bool", d)}`,
    (d) => `${gen("bool", d)} ${pick(["&&", "||"])} ${paren(gen("int", d))} / 0 == 1`,
    (d) => `${gen(pick(["int", "string", "double", "uint"]), d)} in ${chance(0.7) ? listOf(pick(["int", "string", "any"]), d) : mapOf(d)}`,
    (d) => macro(d),
    (d) => `${paren(gen("string", d))}.${pick(["contains", "startsWith", "endsWith"])}(${gen("string", d)})`,
    () => `${pick(BYTES)}.${pick(["contains", "startsWith", "endsWith"])}(${pick(BYTES)})`,
    (d) => `${paren(gen("string", d))}.matches(${celStr(pick(PATTERNS))})`,
    () => `matches(${lit.string()}, ${celStr(pick(PATTERNS))})`,
    () => `has(${mapOf(0)}.${pick(["a", "b", "key"])})`,
    () => validator(),
    (d) => `${listOf(pick(["int", "string", "uint", "double", "bool", "bytes"]), d, 1 + int(4))}.unique()`,
    (d) => `${paren(gen("double", d))}.${pick(["isNan()", "isInf()", "isInf(1)", "isInf(-1)", "isInf(0)"])}`,
    (d) => `type(${gen(pick([...SCALARS, "list", "map"]), d)}) == ${pick(["int", "uint", "double", "string", "bytes", "bool", "list", "map", "null_type", "google.protobuf.Timestamp", "google.protobuf.Duration", "type"])}`,
    (d) => `bool(${pick(["'true'", "'false'", "'t'", "'f'", "'1'", "'0'", "'TRUE'", "'True'", "'tRuE'", "''", gen("bool", d)])})`,
  ],
  list: [
    (d) => listOf(pick(["int", "string", "any", "double"]), d),
    (d) => `${gen("list", d)} + ${gen("list", d)}`,
    (d) => `${listOf("int", d)}.map(x, ${intBody(d)})`,
    (d) => `${listOf("int", d)}.filter(x, ${boolBody(d)})`,
    (d) => `${listOf("int", d)}.map(x, ${boolBody(d)}, ${intBody(d)})`,
    (d) => `${mapOf(d)}.map(k, k)`,
    (d) => `${paren(gen("string", d))}.split(${lit.string()}${chance(0.3) ? `, ${int(4) - 1}` : ""})`,
  ],
  map: [(d) => mapOf(d)],
  ts: [
    (d) => `${gen("ts", d)} ${pick(["+", "-"])} ${gen("dur", d)}`,
    (d) => `${gen("dur", d)} + ${gen("ts", d)}`,
    () => `timestamp(${pick(["'2009-02-13T23:31:30Z'", "'2009-02-13T23:31:30.1Z'", "'2009-02-13 23:31:30Z'",
      "'2009-02-30T00:00:00Z'", "'10000-01-01T00:00:00Z'", "'2009-02-13T23:31:30+25:00'", "'2009-02-13T23:31:30z'",
      "'0000-01-01T00:00:00Z'", "'2009-02-13T23:31:60Z'", "'2009-02-13T23:31:30.1234567891Z'"])})`,
  ],
  dur: [
    (d) => `${gen("dur", d)} ${pick(["+", "-"])} ${gen("dur", d)}`,
    (d) => `${gen("ts", d)} - ${gen("ts", d)}`,
    () => `duration(${pick(["'1.5h'", "'-2m3s'", "'1h2m3.004s'", "'300ms'", "'1.5'", "'s'", "'1d'", "'+3s'",
      "'320000000000s'", "'0'", "'-0s'", "'.5s'", "'1.s'", "'1us2ns'", "'1µs'"])})`,
  ],
  null: [() => "null"],
};

function gen(type, d) {
  if (d <= 0 || chance(0.35) || !productions[type]) {
    if (type === "list") return listOf(pick(["int", "string", "double"]), 0);
    if (type === "map") return mapOf(0);
    return lit[type]();
  }
  return pick(productions[type])(d - 1);
}

function intBody(d) {
  return pick(["x * 2", "x + 1", "x / (x - 2)", "-x", "x % 3", `x * ${gen("int", d)}`, "x", "size([x])"]);
}

function boolBody(d) {
  return pick(["x > 1", "x % 2 == 0", "x / (x - 2) > 0", "x in [1, 3, 5]", "x == 2", `x < ${gen("int", d)}`,
    "x != 0", "true", "x == 'a'"]);
}

function macro(d) {
  const m = pick(["all", "exists", "exists_one"]);
  const range = chance(0.7) ? listOf(pick(["int", "any"]), d, int(5)) : mapOf(d);
  if (chance(0.15)) return `${range}.${m === "exists_one" ? "existsOne" : m}(i, v, ${pick(["v == 1", "i > 0", "i == v", "v / i > 0"])})`;
  return `${range}.${m}(x, ${boolBody(d)})`;
}

function validator() {
  switch (int(8)) {
    case 0: return `${celStr(pick(EMAILS))}.isEmail()`;
    case 1: return `${celStr(pick(HOSTS))}.isHostname()`;
    case 2: return `${celStr(pick(IPS))}.isIp(${pick(["", "4", "6", "0", "5"])})`;
    case 3: return `${celStr(pick(PREFIXES))}.isIpPrefix(${pick(["", "4", "6", "true", "false", "4, true", "6, true", "0, true", "6, false"])})`;
    case 4: return `${celStr(pick(URIS))}.isUri()`;
    case 5: return `${celStr(pick(URIS))}.isUriRef()`;
    case 6: return `${celStr(pick(HOSTPORTS))}.isHostAndPort(${pick(["true", "false"])})`;
    default: return `${celStr(pick([...HOSTS, ...IPS]))}.isIp()`;
  }
}

// -- Messages -------------------------------------------------------------------

const I64 = ["0", "1", "-1", "42", "9223372036854775807", "-9223372036854775808", "5000000000"];
const U64 = ["0", "1", "42", "18446744073709551615", "9223372036854775808"];
const I32 = [0, 1, -1, 42, 2147483647, -2147483648];
const U32 = [0, 1, 42, 4294967295];
const DBL = [0, 1.5, -2.25, 1e300, "NaN", "Infinity", "-Infinity", 3.14];
const STR = ["", "a", "héllo", "🐱", "x y", "abc"];
const B64 = ["", "YWJj", "/w==", "AAE="];
const TS = ["1970-01-01T00:00:00Z", "2009-02-13T23:31:30Z", "2000-01-01T00:00:00.5Z", "0001-01-01T00:00:00Z"];
const DUR = ["0s", "1s", "-1.5s", "3600s", "0.000000001s"];

function inner() {
  const m = {};
  if (chance(0.7)) m.id = pick(I32);
  if (chance(0.7)) m.name = pick(STR);
  if (chance(0.4)) m.tags = STR.filter(() => chance(0.4));
  return m;
}

function jsonValue(depth) {
  switch (int(depth > 0 ? 6 : 4)) {
    case 0: return null;
    case 1: return pick([0, 1.5, -3, 1e21]);
    case 2: return pick(STR);
    case 3: return chance(0.5);
    case 4: return [jsonValue(depth - 1), jsonValue(depth - 1)].slice(0, int(3));
    default: {
      const o = {};
      for (const k of ["a", "b", "key"]) if (chance(0.5)) o[k] = jsonValue(depth - 1);
      return o;
    }
  }
}

function message(depth = 2) {
  const m = {};
  const maybe = (p, k, f) => { if (chance(p)) m[k] = f(); };
  maybe(0.5, "i32", () => pick(I32));
  maybe(0.5, "i64", () => pick(I64));
  maybe(0.4, "u32", () => pick(U32));
  maybe(0.4, "u64", () => pick(U64));
  maybe(0.3, "s32", () => pick(I32));
  maybe(0.3, "s64", () => pick(I64));
  maybe(0.3, "f32", () => pick(U32));
  maybe(0.3, "f64", () => pick(U64));
  maybe(0.3, "sf32", () => pick(I32));
  maybe(0.3, "sf64", () => pick(I64));
  maybe(0.4, "fl", () => pick([0, 1.5, -2.25, 3.4e38, "NaN"]));
  maybe(0.4, "db", () => pick(DBL));
  maybe(0.4, "b", () => chance(0.5));
  maybe(0.5, "s", () => pick(STR));
  maybe(0.3, "by", () => pick(B64));
  maybe(0.4, "color", () => pick(["RED", "GREEN", "BLUE", "COLOR_UNSPECIFIED", 7]));
  maybe(0.5, "inner", inner);
  maybe(0.5, "ri64", () => I64.filter(() => chance(0.4)));
  maybe(0.4, "rs", () => STR.filter(() => chance(0.4)));
  maybe(0.4, "rinner", () => [inner(), inner()].slice(0, int(3)));
  maybe(0.3, "rdb", () => DBL.filter(() => chance(0.3)));
  maybe(0.2, "rby", () => B64.filter(() => chance(0.5)));
  maybe(0.3, "rcolor", () => ["RED", "BLUE", "RED"].slice(0, int(4)));
  maybe(0.4, "msi", () => Object.fromEntries(["a", "b", "", "é"].filter(() => chance(0.5)).map((k) => [k, pick(I64)])));
  maybe(0.3, "mis", () => Object.fromEntries(["1", "-1", "0"].filter(() => chance(0.5)).map((k) => [k, pick(STR)])));
  maybe(0.3, "mbi", () => Object.fromEntries(["true", "false"].filter(() => chance(0.6)).map((k) => [k, inner()])));
  maybe(0.3, "mud", () => Object.fromEntries(["1", "18446744073709551615"].filter(() => chance(0.6)).map((k) => [k, pick([1.5, 0, -1])])));
  maybe(0.5, "ts", () => pick(TS));
  maybe(0.5, "dur", () => pick(DUR));
  maybe(0.4, "wi64", () => pick(I64));
  maybe(0.4, "ws", () => pick(STR));
  maybe(0.3, "wb", () => chance(0.5));
  maybe(0.3, "wd", () => pick([0, 1.5, "NaN"]));
  maybe(0.3, "wu32", () => pick(U32));
  maybe(0.3, "wby", () => pick(B64));
  maybe(0.2, "wf", () => pick([0, 1.5]));
  maybe(0.2, "wi32", () => pick(I32));
  maybe(0.2, "wu64", () => pick(U64));
  maybe(0.4, "st", () => {
    const v = jsonValue(2);
    return v !== null && typeof v === "object" && !Array.isArray(v) ? v : { a: v };
  });
  maybe(0.4, "val", () => jsonValue(2));
  maybe(0.3, "lv", () => [jsonValue(1), jsonValue(1)]);
  maybe(0.3, "any", () => pick([
    { "@type": "type.googleapis.com/cel.test.Inner", ...inner() },
    { "@type": "type.googleapis.com/google.protobuf.Duration", value: "1.5s" },
    { "@type": "type.googleapis.com/google.protobuf.Int64Value", value: "7" },
    { "@type": "type.googleapis.com/google.protobuf.Timestamp", value: "2009-02-13T23:31:30Z" },
  ]));
  maybe(0.3, "opt", () => pick(I32));
  if (chance(0.5)) {
    const k = pick(["oS", "oI", "oM"]);
    m[k] = k === "oS" ? pick(STR) : k === "oI" ? pick(I64) : inner();
  }
  maybe(0.2, "rts", () => TS.filter(() => chance(0.5)));
  if (depth > 0 && chance(0.3)) m.child = message(depth - 1);
  if ("val" in m && m.val === null) m.val = null;
  return m;
}

const FIELDS = ["i32", "i64", "u32", "u64", "s32", "s64", "f32", "f64", "sf32", "sf64", "fl", "db", "b", "s", "by",
  "color", "inner", "ri64", "rs", "rinner", "rdb", "rby", "rcolor", "msi", "mis", "mbi", "mud", "ts", "dur", "wi64",
  "ws", "wb", "wd", "wu32", "wby", "wf", "wi32", "wu64", "st", "val", "lv", "any", "opt", "o_s", "o_i", "o_m", "rts",
  "child"];

function messageExpr() {
  const f = pick(FIELDS);
  const t = "this";
  switch (int(16)) {
    case 0: return `${t}.${f}`;
    case 1: return `has(${t}.${f})`;
    case 2: return `${t}.child.${f}`;
    case 3: return `has(${t}.child.${f})`;
    case 4: return `getField(${t}, '${f}')`;
    case 5: return `type(${t}.${f})`;
    case 6: return pick([`${t}.i32 + ${t}.i64`, `${t}.u32 + ${t}.u64`, `${t}.db * 2.0`, `${t}.fl`,
      `${t}.s.size()`, `${t}.by.size()`, `${t}.color == cel.test.Color.RED`, `${t}.color == 1`,
      `${t}.inner.id`, `${t}.inner.name + 'x'`, `${t}.inner.tags.size()`]);
    case 7: return pick([`${t}.ri64.exists(x, x > 5)`, `${t}.ri64.all(x, x != 0)`, `${t}.rs.map(x, x + '!')`,
      `${t}.rinner.map(x, x.name)`, `${t}.rinner.filter(x, has(x.name))`, `${t}.rdb.map(x, x.isNan())`,
      `${t}.rcolor.exists_one(x, x == 1)`, `${t}.ri64.unique()`, `${t}.rs.unique()`, `size(${t}.ri64)`,
      `${t}.ri64 == [1, 42]`, `42 in ${t}.ri64`, `${t}.rts.map(x, x.getFullYear())`, `${t}.rby.unique()`]);
    case 8: return pick([`${t}.msi['a']`, `'a' in ${t}.msi`, `${t}.msi.a`, `has(${t}.msi.a)`, `${t}.mis[1]`,
      `${t}.mis[-1]`, `${t}.mis[1u]`, `1 in ${t}.mis`, `${t}.mbi[true].id`, `${t}.mud[1u]`, `${t}.mud[1]`,
      `${t}.mud[18446744073709551615u]`, `${t}.msi.all(k, k != '')`, `${t}.mis.map(k, k * 2)`, `size(${t}.msi)`,
      `${t}.msi == {'a': 1}`, `${t}.mud[1.0]`]);
    case 9: return pick([`${t}.ts < timestamp('2000-01-01T00:00:00Z')`, `${t}.ts + ${t}.dur`, `${t}.dur * 2`,
      `${t}.ts.getFullYear()`, `string(${t}.ts)`, `string(${t}.dur)`, `${t}.dur > duration('1s')`,
      `${t}.ts == timestamp(0)`, `int(${t}.ts)`]);
    case 10: return pick([`${t}.wi64 == null`, `${t}.wi64 + 1`, `${t}.ws + 'x'`, `${t}.wb == true`, `${t}.wd`,
      `${t}.wu32 + 1u`, `${t}.wby`, `${t}.wf`, `${t}.wi32`, `${t}.wu64`, `has(${t}.wi64)`, `${t}.wi64 != null`]);
    case 11: return pick([`${t}.st`, `${t}.st.a`, `${t}.st['key']`, `has(${t}.st.a)`, `${t}.val`, `${t}.val == null`,
      `${t}.lv`, `${t}.lv.size()`, `${t}.st == {}`, `type(${t}.val)`, `${t}.lv[0]`, `${t}.val.a`]);
    case 12: return pick([`${t}.any`, `${t}.any.id`, `has(${t}.any)`, `type(${t}.any)`, `${t}.any == duration('1.5s')`]);
    case 13: return pick([`has(${t}.opt)`, `${t}.opt`, `has(${t}.o_s)`, `${t}.o_s`, `has(${t}.o_i)`, `${t}.o_i`,
      `${t}.o_m.id`, `has(${t}.o_m)`, `has(${t}.o_m.tags)`]);
    case 14: return pick([`${t}.nope`, `has(${t}.nope)`, `getField(${t}, 'nope')`, `${t}.child.child.child.i32`,
      `has(${t}.child.child)`, `type(${t}) == cel.test.Msg`, `type(${t}.inner) == cel.test.Inner`, `${t} == ${t}`,
      `${t}.inner == ${t}.inner`, `${t}.child == ${t}`]);
    default: return `${t}.${f} == ${t}.child.${f}`;
  }
}

// protovalidate's standard rule expressions (buf/validate/validate.proto)
// over a stand-in rules message (cel.test.Rules in core/cel/diff_test.c).
const RULE_EXPRS = [
  "this != getField(rules, 'const') ? 'must equal %s'.format([getField(rules, 'const')]) : ''",
  "!has(rules.gte) && !has(rules.gt) && this >= rules.lt? 'must be less than %s'.format([rules.lt]) : ''",
  "!has(rules.gte) && !has(rules.gt) && this > rules.lte? 'must be less than or equal to %s'.format([rules.lte]) : ''",
  "!has(rules.lt) && !has(rules.lte) && this <= rules.gt? 'must be greater than %s'.format([rules.gt]) : ''",
  "has(rules.lt) && rules.lt >= rules.gt && (this >= rules.lt || this <= rules.gt)? 'must be greater than %s and less than %s'.format([rules.gt, rules.lt]) : ''",
  "has(rules.lt) && rules.lt < rules.gt && (rules.lt <= this && this <= rules.gt)? 'must be greater than %s or less than %s'.format([rules.gt, rules.lt]) : ''",
  "has(rules.lte) && rules.lte >= rules.gte && (this > rules.lte || this < rules.gte)? 'must be greater than or equal to %s and less than or equal to %s'.format([rules.gte, rules.lte]) : ''",
  "!(this in getField(rules, 'in')) ? 'must be in list %s'.format([getField(rules, 'in')]) : ''",
  "this in rules.not_in ? 'must not be in list %s'.format([rules.not_in]) : ''",
  "!has(rules.dgt) || double(this) > rules.dgt",
  "rules.finite ? (double(this).isNan() || double(this).isInf() ? 'must be finite' : '') : ''",
  "uint(string(this).size()) < rules.min_len ? 'must be at least %s characters'.format([rules.min_len]) : ''",
  "uint(string(this).size()) > rules.max_len ? 'must be at most %s characters'.format([rules.max_len]) : ''",
  "!string(this).matches(rules.pattern) ? 'does not match regex pattern `%s`'.format([rules.pattern]) : ''",
  "!string(this).startsWith(rules.prefix) ? 'does not have prefix `%s`'.format([rules.prefix]) : ''",
  "!rules.email || string(this) == '' || string(this).isEmail()",
  "!rules.hostname || string(this) == '' || string(this).isHostname()",
  "!rules.ip || string(this) == '' || string(this).isIp()",
  "!rules.unique || [this, this].unique()",
  "rules.well_known_regex != 1 || string(this) == '' || string(this).matches(!has(rules.strict) || rules.strict ?'^:?[0-9a-zA-Z!#$%&\\'*+-.^_|~\\x60]+$' :'^[^\\u0000\\u000A\\u000D]+$')",
  "timestamp(this) < timestamp(0) - rules.within || timestamp(this) > timestamp(0) + rules.within ? 'must be within %s of now'.format([rules.within]) : ''",
  "rules.sin.all(p, p.size() < 4)",
];

function rulesJson() {
  const r = {};
  const m = (p, k, f) => { if (chance(p)) r[k] = f(); };
  m(0.3, "const", () => pick(I64));
  m(0.4, "lt", () => pick(["0", "10", "-5", "100"]));
  m(0.3, "lte", () => pick(["0", "10", "-5"]));
  m(0.4, "gt", () => pick(["0", "10", "-5", "100"]));
  m(0.3, "gte", () => pick(["0", "10", "-5"]));
  m(0.4, "in", () => ["1", "2", "10"].filter(() => chance(0.5)));
  m(0.3, "notIn", () => ["0", "5"].filter(() => chance(0.5)));
  m(0.3, "dgt", () => pick([0, 1.5, "NaN"]));
  m(0.3, "finite", () => chance(0.5));
  m(0.3, "minLen", () => pick(["0", "2", "5"]));
  m(0.3, "maxLen", () => pick(["0", "2", "5"]));
  m(0.3, "pattern", () => pick(["^[0-9]+$", "-", "\\d", "(", ""]));
  m(0.3, "prefix", () => pick(["", "1", "-"]));
  m(0.3, "email", () => chance(0.5));
  m(0.3, "hostname", () => chance(0.5));
  m(0.3, "ip", () => chance(0.5));
  m(0.3, "unique", () => chance(0.5));
  m(0.3, "within", () => pick(["1s", "3600s", "0s"]));
  m(0.3, "strict", () => chance(0.5));
  m(0.3, "wellKnownRegex", () => pick([0, 1, 2]));
  m(0.3, "sin", () => ["a", "abcd", "xyz"].filter(() => chance(0.5)));
  return r;
}

function generated(i) {
  const id = `g${i}`;
  const roll = R();
  if (roll < 0.15) {
    return { id, container: "", expr: messageExpr(),
      vars: [{ name: "this", kind: "msg:cel.test.Msg", data: JSON.stringify(message()) }] };
  }
  if (roll < 0.2) {
    return { id, container: "", expr: pick(RULE_EXPRS),
      vars: [{ name: "this", kind: "expr", data: pick(["0", "5", "10", "-5", "100", "1", "42"]) },
        { name: "rules", kind: "msg:cel.test.Rules", data: JSON.stringify(rulesJson()) }] };
  }
  if (roll < 0.25) {
    // a variable holding a list or map, the comprehension over it
    const data = chance(0.5) ? listOf(pick(["int", "any"]), 1) : mapOf(1);
    return { id, container: "", expr: macro(1).replace(/^(\[.*?\]|\{.*?\})\./, "x."), vars: [{ name: "x", kind: "expr", data }] };
  }
  const type = pick(["int", "int", "uint", "double", "string", "string", "bool", "bool", "bool", "bool", "list",
    "map", "ts", "dur", "bytes"]);
  return { id, container: "", expr: gen(type, 1 + int(3)), vars: [] };
}

// -- The conformance suite ----------------------------------------------------------

// A conformance Value (JSON form) as a CEL literal, or undefined.
function valueLiteral(v) {
  if ("int64Value" in v) return `${v.int64Value}`;
  if ("uint64Value" in v) return `${v.uint64Value}u`;
  if ("doubleValue" in v) {
    const d = Number(v.doubleValue);
    if (Number.isNaN(d)) return "double('NaN')";
    if (!Number.isFinite(d)) return d > 0 ? "double('Infinity')" : "double('-Infinity')";
    const s = String(d);
    return /[.e]/.test(s) ? s : `${s}.0`;
  }
  if ("stringValue" in v) return celStr(v.stringValue);
  if ("bytesValue" in v) return celBytes(Buffer.from(v.bytesValue, "base64"));
  if ("boolValue" in v) return String(v.boolValue);
  if ("nullValue" in v) return "null";
  if ("listValue" in v) {
    const items = (v.listValue.values || []).map(valueLiteral);
    return items.includes(undefined) ? undefined : `[${items.join(", ")}]`;
  }
  if ("mapValue" in v) {
    const entries = (v.mapValue.entries || []).map((e) => [valueLiteral(e.key), valueLiteral(e.value)]);
    return entries.some(([k, x]) => k === undefined || x === undefined)
      ? undefined : `{${entries.map(([k, x]) => `${k}: ${x}`).join(", ")}}`;
  }
  if ("objectValue" in v) {
    const o = v.objectValue;
    if (o["@type"] === "type.googleapis.com/google.protobuf.Duration") return `duration(${celStr(o.value)})`;
    if (o["@type"] === "type.googleapis.com/google.protobuf.Timestamp") return `timestamp(${celStr(o.value)})`;
  }
  return undefined;
}

// The canonical text of a conformance Value, or undefined.
function valueCanon(v) {
  if ("int64Value" in v) return `${v.int64Value}`;
  if ("uint64Value" in v) return `${v.uint64Value}u`;
  if ("doubleValue" in v) return canonDouble(Number(v.doubleValue));
  if ("stringValue" in v) return quote(v.stringValue);
  if ("bytesValue" in v) return `b"${Buffer.from(v.bytesValue, "base64").toString("hex")}"`;
  if ("boolValue" in v) return String(v.boolValue);
  if ("nullValue" in v) return "null";
  if ("typeValue" in v) return `type(${v.typeValue})`;
  if ("listValue" in v) {
    const items = (v.listValue.values || []).map(valueCanon);
    return items.includes(undefined) ? undefined : `[${items.join(", ")}]`;
  }
  if ("mapValue" in v) {
    const pairs = (v.mapValue.entries || []).map((e) => [valueCanon(e.key), valueCanon(e.value)]);
    if (pairs.some(([k, x]) => k === undefined || x === undefined)) return undefined;
    pairs.sort((a, b) => utf8Compare(a[0], b[0]));
    return `{${pairs.map(([k, x]) => `${k}: ${x}`).join(", ")}}`;
  }
  if ("objectValue" in v) {
    const o = v.objectValue;
    const t = o["@type"];
    if (t === "type.googleapis.com/google.protobuf.Duration") {
      const m = /^(-)?(\d+)(?:\.(\d+))?s$/.exec(o.value);
      if (!m) return undefined;
      return `duration("${m[1] || ""}${m[2]}.${(m[3] || "").padEnd(9, "0")}s")`;
    }
    if (t === "type.googleapis.com/google.protobuf.Timestamp") {
      const ms = Date.parse(o.value);
      const frac = /\.(\d+)/.exec(o.value);
      const ns = frac ? Number(frac[1].padEnd(9, "0")) : 0;
      return `timestamp(${Math.floor(ms / 1000)}.${String(ns).padStart(9, "0")})`;
    }
  }
  return undefined;
}

// The conformance suite's schemas (TestAllTypes, GlobalEnum...) as a
// FileDescriptorSet, imports first, for the C side's pool.
function conformanceSchemas(files, path) {
  const seen = new Set();
  const order = [];
  const visit = (f) => {
    if (seen.has(f.name)) return;
    seen.add(f.name);
    for (const d of f.dependencies) visit(d);
    order.push(f.proto);
  };
  for (const f of files) visit(f);
  writeFileSync(path, toBinary(FileDescriptorSetSchema, create(FileDescriptorSetSchema, { file: order })));
}

async function conformance(schemaPath) {
  let suite;
  let SimpleTestSchema;
  let getTestRegistry;
  let schemas;
  try {
    ({ getConformanceSuite: suite } = await import("@bufbuild/cel-spec/testdata/tests.js"));
    ({ SimpleTestSchema } = await import("@bufbuild/cel-spec/cel/expr/conformance/test/simple_pb.js"));
    ({ getTestRegistry } = await import("@bufbuild/cel-spec/testdata/registry.js"));
    schemas = [
      (await import("@bufbuild/cel-spec/cel/expr/conformance/proto3/test_all_types_pb.js"))
        .file_cel_expr_conformance_proto3_test_all_types,
      (await import("@bufbuild/cel-spec/cel/expr/conformance/proto2/test_all_types_pb.js"))
        .file_cel_expr_conformance_proto2_test_all_types,
    ];
  } catch (e) {
    console.log(`cel_diff: the conformance suite is not installed (${e.message}): skipped`);
    return [];
  }
  conformanceSchemas(schemas, schemaPath);
  const reg = getTestRegistry();
  const out = [];
  const walk = (s, path) => {
    for (const t of s.tests) {
      const j = toJson(SimpleTestSchema, t.original, { registry: reg });
      out.push({ path: `${path}/${t.name}`, t: j });
    }
    for (const c of s.suites) walk(c, `${path}/${c.name}`);
  };
  walk(suite(), "");
  const cases = [];
  let skipped = 0;
  // the extensions protovalidate's environment does not have
  const extensions = ["/block_ext/", "/bindings_ext/", "/encoders_ext/", "/math_ext/", "/optionals/",
    "/proto2_ext/", "/type_deductions/"];
  for (const { path, t } of out) {
    if (extensions.some((e) => path.startsWith(e))) {
      skipped++;
      continue;
    }
    // (a NUL in the text would end the C side's line)
    if (t.disableMacros || t.checkOnly || !("value" in t || "evalError" in t || "anyEvalErrors" in t)
      || t.expr.includes("\0")) {
      skipped++;
      continue;
    }
    const vars = [];
    let ok = true;
    for (const [name, b] of Object.entries(t.bindings || {})) {
      const data = b.value ? valueLiteral(b.value) : undefined;
      if (data === undefined) ok = false;
      else vars.push({ name, kind: "expr", data });
    }
    const expect = "value" in t ? valueCanon(t.value) : "error";
    if (!ok || expect === undefined) {
      skipped++;
      continue;
    }
    cases.push({ id: `c${cases.length}`, container: t.container || "", expr: t.expr, vars, expect, path });
  }
  console.log(`cel_diff: ${cases.length} conformance tests taken, ${skipped} skipped (extensions protovalidate `
    + "does not use: cel.block, cel.bind, base64, math, optionals, proto2 extensions; type checks only; disabled "
    + "macros; bindings or results of message types)");
  return cases;
}

// -- The listed differences ----------------------------------------------------------

// Where protocall and the oracle differ by design, each with why: test(c,
// ours, theirs) is true for the case. For conformance cases 'theirs' is
// the expected value.
// Text a case's expression and bindings hold.
const allText = (c) => [c.expr, ...c.vars.map((b) => b.data)].join("\n");

// Strings Go's strconv.ParseFloat reads (what cel-go's double() takes).
const GO_FLOAT = /^[+-]?(((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?)|inf|infinity|nan|0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?\d+)$/i;

// The text of each string literal passed to function 'fn' (one argument).
const literalArgs = (c, fn) => [...allText(c).matchAll(new RegExp(`\\b${fn}\\([rR]?('''|'|")(.*?)\\1\\)`, "g"))]
  .map((m) => m[2]);

const DIFFERENCES = [
  {
    reason: "timestamp(int): cel-spec (and protocall) read seconds since the epoch, @bufbuild/cel milliseconds",
    test: (c) => /timestamp\(-?\d+\)/.test(allText(c)),
  },
  {
    reason: "double(string): protocall reads what cel-go reads (Go's strconv.ParseFloat); @bufbuild/cel takes "
      + "JavaScript's Number(), which gives NaN for any other text and accepts blanks, '' and 0x integers",
    test: (c, ours, theirs) => (ours.startsWith("error") || theirs.startsWith("error"))
      && literalArgs(c, "double").some((s) => !GO_FLOAT.test(s)),
  },
  {
    reason: "int(string) / uint(string): @bufbuild/cel parses through BigInt(), which accepts blanks, 0x, 0b and a "
      + "'+' before a uint; protocall reads what cel-go reads (strconv.ParseInt: an optional sign then digits; "
      + "ParseUint: digits only)",
    test: (c, ours, theirs) => (ours.startsWith("error") || theirs.startsWith("error"))
      && (literalArgs(c, "int").some((s) => !/^[+-]?\d+$/.test(s)) || literalArgs(c, "uint").some((s) => !/^\d+$/.test(s))),
  },
  {
    reason: "matches(string, pattern), the global form cel-spec lists beside string.matches(pattern), is missing "
      + "from @bufbuild/cel",
    test: (c, ours, theirs) => theirs.startsWith("error") && /(^|[^.\w])matches\(/.test(allText(c)),
  },
  {
    reason: "the two-variable comprehensions (all(i, v, p), exists(i, v, p), existsOne(i, v, p): cel-spec's "
      + "macros2 suite) are missing from @bufbuild/cel",
    test: (c, ours, theirs) => theirs.startsWith("error")
      && /\.(all|exists|existsOne|exists_one)\(\w+, \w+, /.test(allText(c)),
  },
  {
    reason: "timestamp accessors: @bufbuild/cel reads a timestamp through JavaScript's Date, which rounds the "
      + "nanoseconds up to the millisecond (so 23:59:59.999999999 is the next day), maps years 0 to 99 to "
      + "1900-1999 and, through Intl, counts days before 1582 in the Julian calendar",
    test: (c) => /\.get(FullYear|Month|Day\w*|Date|Hours|Minutes|Seconds|Milliseconds)\(/.test(c.expr)
      && (/\.\d{4,9}(Z|[+-]\d)/.test(allText(c)) || /\b0\d\d\d-\d\d-\d\d/.test(allText(c))),
  },
  {
    reason: "a timestamp text with a day past the month's end (2009-02-30): Go and RFC 3339 refuse it, "
      + "protobuf-es (JavaScript's Date) rolls it over",
    test: (c, ours) => ours.includes("is not an RFC 3339 time") && /\d{4}-02-3\d/.test(c.expr),
  },
  {
    reason: "strings are indexed by code point in CEL (charAt, indexOf, lastIndexOf, substring, as cel-go); "
      + "@bufbuild/cel indexes JavaScript's UTF-16 code units, which differ past U+FFFF",
    test: (c) => /(charAt|indexOf|lastIndexOf|substring)\(/.test(c.expr) && /[\u{10000}-\u{10FFFF}]/u.test(allText(c)),
  },
  {
    reason: "replace(): protocall follows cel-go (Go's strings.Replace: a negative count replaces all, an empty "
      + "pattern matches between code points); @bufbuild/cel replaces none for a negative count and loops on an empty one",
    test: (c) => /\.replace\((''|""|r''|'''''')/.test(c.expr) || /\.replace\([^)]*, -\d+\)/.test(c.expr),
  },
  {
    reason: "split(sep, n): protocall follows cel-go (Go's strings.SplitN: the last part keeps the rest); "
      + "@bufbuild/cel uses JavaScript's split limit, which drops it",
    test: (c) => /\.split\([^)]*, [2-9]\)/.test(c.expr) || /\.split\((''|""|r''|'''''')/.test(c.expr),
  },
  {
    reason: "string(timestamp) and format's %s of one: protocall writes RFC 3339 with the fraction's trailing zeros "
      + "dropped, as cel-go (Go's RFC3339Nano); @bufbuild/cel writes protobuf JSON (0, 3, 6 or 9 digits)",
    test: (c, ours, theirs) => /(string\(|format)/.test(c.expr) && /(timestamp\(|\.ts\b|\.rts\b)/.test(allText(c)),
  },
  {
    reason: "string(duration) and format's %s of one: protocall writes seconds with the fraction's trailing zeros "
      + "dropped, as cel-go; @bufbuild/cel writes protobuf JSON (0, 3, 6 or 9 digits)",
    test: (c, ours, theirs) => /(string\(|format)/.test(c.expr) && /(duration\(|\.dur\b)/.test(allText(c)),
  },
  {
    reason: "format's %s of a map orders the entries by their keys' text byte by byte (as cel-go); @bufbuild/cel "
      + "sorts with localeCompare",
    test: (c) => /format/.test(c.expr) && /\{/.test(c.expr),
  },
  {
    reason: "format's %f rounds the double's exact value (C's printf, as Go's strconv); @bufbuild/cel rounds the "
      + "shortest decimal that reads back as the double (Intl.NumberFormat), so ties of the decimal text differ",
    test: (c, ours, theirs) => /%\.?\d*f/.test(c.expr) && !ours.startsWith("error") && !theirs.startsWith("error"),
  },
  {
    reason: "a time zone name (IANA database, 'America/New_York'): protocall has fixed offsets and UTC only",
    test: (c, ours) => /get\w+\('[A-Za-z]+\/[A-Za-z_]+'\)/.test(c.expr) && ours.startsWith("error"),
  },
  {
    reason: "a float field holds a float32 (protocall and cel-go widen it to a double); protobuf-es keeps the "
      + "double its JSON reader read until the message is serialized",
    test: (c, ours, theirs) => /\b(fl|wf)\b/.test(c.expr) && !ours.startsWith("error")
      && Math.fround(Number(theirs)) === Number(ours),
  },
  {
    reason: "a map entry whose value is null is there: has(m.f) and `in` ask for the key (cel-spec); "
      + "@bufbuild/cel takes a null value for an absent key",
    test: (c, ours, theirs) => /(has\(|\bin\b)/.test(c.expr) && /null/.test(allText(c)) && ours === "true"
      && theirs === "false",
  },
  {
    reason: "-9223372036854775808 % -1 overflows int64 as the division does (cel-go: moduloInt64Checked); "
      + "@bufbuild/cel computes it with BigInt and gives 0",
    test: (c, ours) => /-9223372036854775808\s*%\s*-1/.test(c.expr) && ours.includes("integer overflow in '_%_'"),
  },
  {
    reason: "a map literal with a repeated key is an error (cel-spec: \"It is an error to have duplicate keys\"; "
      + "1 and 1u are the same key, as they are equal); @bufbuild/cel keeps both entries",
    test: (c, ours) => ours.includes("repeated key in a map literal"),
  },
  {
    reason: "enums read as int, cel-spec's legacy behaviour and protovalidate's (its runtimes declare them so); "
      + "the conformance suite's strong_proto2 and strong_proto3 tests expect enum types and enum conversions",
    test: (c) => (c.path || "").startsWith("/enums/strong_"),
  },
  {
    reason: "message literals (TestAllTypes{...}) are not supported by protocall (protovalidate's expressions "
      + "have none): a compile error",
    test: (c, ours) => ours.includes("message literals"),
  },
  {
    reason: "an undeclared variable or function is a compile error in protocall (as cel-go's checker makes it), "
      + "so `x || true` fails to compile where cel-spec's unchecked evaluation absorbs the error",
    test: (c, ours) => ours.includes("undeclared reference"),
  },
];

function explain(c, ours, theirs) {
  for (const d of DIFFERENCES) if (d.test(c, ours, theirs)) return d.reason;
  return null;
}

// -- Commands ------------------------------------------------------------------------

function loadRegistry() {
  const set = option("--descriptors");
  if (!set) throw new Error("--descriptors SET is required");
  registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(set)));
}

function writeCases(path, cases) {
  const lines = cases.map((c) => [c.id, c.container, c.expr, c.vars.length,
    ...c.vars.flatMap((b) => [b.name, b.kind, b.data])].map(esc).join("\t"));
  writeFileSync(path, lines.join("\n") + "\n");
  const meta = {};
  for (const c of cases) if (c.expect !== undefined) meta[c.id] = { expect: c.expect, path: c.path };
  writeFileSync(`${path}.meta.json`, JSON.stringify(meta));
}

function readCases(path) {
  const meta = JSON.parse(readFileSync(`${path}.meta.json`, "utf8"));
  return readFileSync(path, "utf8").split("\n").filter((l) => l).map((line) => {
    const f = line.split("\t").map(unesc);
    const n = Number(f[3]);
    const vars = [];
    for (let i = 0; i < n; i++) vars.push({ name: f[4 + 3 * i], kind: f[5 + 3 * i], data: f[6 + 3 * i] });
    return { id: f[0], container: f[1], expr: f[2], vars, ...(meta[f[0]] || {}) };
  });
}

async function genCommand() {
  loadRegistry();
  const count = Number(option("--count", "4000"));
  R = rng(Number(option("--seed", "1")));
  const cases = [];
  for (let i = 0; i < count; i++) cases.push(generated(i));
  // every case must be valid for @bufbuild/cel's parser too, or it says nothing
  cases.push(...await conformance(`${args[1]}.conformance.pb`));
  writeCases(args[1], cases);
  console.log(`cel_diff: ${cases.length} cases written to ${args[1]}`);
}

function checkCommand() {
  loadRegistry();
  const cases = readCases(args[1]);
  const ours = new Map(readFileSync(args[2], "utf8").split("\n").filter((l) => l).map((l) => {
    const tab = l.indexOf("\t");
    return [l.slice(0, tab), unesc(l.slice(tab + 1))];
  }));
  const tally = { agree: 0, explained: new Map(), failed: [], conformance: 0, generated: 0, theirsWrong: 0 };
  for (const c of cases) {
    const mine = ours.get(c.id);
    if (mine === undefined) {
      tally.failed.push({ c, ours: "(no result)", theirs: "" });
      continue;
    }
    const other = c.expect !== undefined ? c.expect : theirs(c);
    if (c.expect !== undefined) {
      tally.conformance++;
      if (theirs(c) !== c.expect && !(c.expect === "error" && theirs(c).startsWith("error"))) tally.theirsWrong++;
    } else {
      tally.generated++;
    }
    const agree = mine === other || (mine.startsWith("error") && other.startsWith("error"));
    if (agree) {
      tally.agree++;
      continue;
    }
    const reason = explain(c, mine, other);
    if (reason) {
      const e = tally.explained.get(reason) || { count: 0, example: { c, ours: mine, theirs: other } };
      e.count++;
      tally.explained.set(reason, e);
    } else {
      tally.failed.push({ c, ours: mine, theirs: other });
    }
  }
  const show = ({ c, ours: o, theirs: t }) => {
    const vars = c.vars.map((b) => `${b.name}=${b.kind}:${b.data}`).join(" ");
    return `  ${c.id}${c.path ? ` ${c.path}` : ""}: ${c.expr}${vars ? `  [${vars}]` : ""}\n`
      + `    protocall: ${o}\n    ${c.expect !== undefined ? "expected" : "@bufbuild/cel"}: ${t}`;
  };
  for (const [reason, e] of tally.explained) {
    console.log(`listed difference (${e.count}): ${reason}\n${show(e.example)}`);
  }
  for (const f of tally.failed.slice(0, Number(process.env.PC_DIFF_SHOW || 60))) console.log(`UNEXPLAINED DIFFERENCE\n${show(f)}`);
  const explained = [...tally.explained.values()].reduce((n, e) => n + e.count, 0);
  console.log(`cel_diff: ${cases.length} cases (${tally.generated} generated, ${tally.conformance} from the conformance `
    + `suite, where @bufbuild/cel itself misses ${tally.theirsWrong}): ${tally.agree} agree, ${explained} listed `
    + `differences, ${tally.failed.length} unexplained`);
  process.exit(tally.failed.length ? 1 : 0);
}

if (args[0] === "gen") await genCommand();
else if (args[0] === "check") checkCommand();
else {
  console.error("usage: cel_diff.mjs gen CASES --seed N --count N --descriptors SET | check CASES OURS --descriptors SET");
  process.exit(2);
}
