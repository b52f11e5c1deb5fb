#!/usr/bin/python3
"""Differential oracle for protocall's codec: Debian's python3-protobuf.

Run with /usr/bin/python3 (Debian's python3-protobuf; no generated code: the
schemas come from the corpus descriptor sets through descriptor_pool and
message_factory).

  wire_diff.py gen DESCRIPTORS_DIR OUT --seed N --count N [--seconds S]
      Writes OUT as lines "set<TAB>type<TAB>hex": random messages of every
      message type of every corpus descriptor set (every field kind, extreme
      values, extensions, maps, oneofs, groups, unknown fields), each as its
      deterministic encoding (SerializePartialToString(deterministic=True)).
  wire_diff.py check DESCRIPTORS_DIR IN
      IN has lines "set<TAB>type<TAB>expected_hex<TAB>protocall_hex": the
      reference parses protocall's bytes and must get a message equal to the
      one the expected bytes give (compared by deterministic re-encoding, so
      NaN compares equal to itself). Prints "N checked, N differ" last and
      one line per difference before it; exits 1 when any differ.
"""
import math
import os
import random
import struct
import sys
import time

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.descriptor import FieldDescriptor as FD

SETS = ["wkt", "protobuf", "opentelemetry", "grpc", "googleapis"]


def load_set(path):
    fds = descriptor_pb2.FileDescriptorSet()
    with open(path, "rb") as f:
        fds.ParseFromString(f.read())
    pool = descriptor_pool.DescriptorPool()
    for fd in fds.file:
        pool.Add(fd)
    factory = message_factory.MessageFactory(pool)
    types = []
    for fd in fds.file:
        fdesc = pool.FindFileByName(fd.name)

        def walk(descs):
            for d in descs:
                if not d.GetOptions().map_entry:
                    types.append(d)
                walk(d.nested_types)

        walk(fdesc.message_types_by_name.values())
    return pool, factory, types


INT32 = [0, 1, -1, 127, 128, -128, 2**31 - 1, -2**31, 300, -300]
INT64 = INT32 + [2**63 - 1, -2**63, 2**32, -2**32, 2**40 + 7]
UINT32 = [0, 1, 127, 128, 2**32 - 1, 2**31, 16383, 16384]
UINT64 = UINT32 + [2**64 - 1, 2**63, 2**56]
FLOATS = [0.0, -0.0, 1.0, -1.5, float("inf"), float("-inf"), float("nan"),
          3.4028234663852886e38, 1.1754943508222875e-38, 1e-45, 0.1]
DOUBLES = FLOATS + [1.7976931348623157e308, 2.2250738585072014e-308, 5e-324, 1e300]
STRINGS = ["", "a", "hello world", "caf\u00e9", "\u20ac\U0001F600", "\x00nul", "x" * 200,
           "\u07ff\u0800\uffff\U0010FFFF"]


def rand_scalar(rng, f):
    t = f.type
    if t in (FD.TYPE_INT32, FD.TYPE_SINT32, FD.TYPE_SFIXED32):
        return rng.choice(INT32) if rng.random() < 0.6 else rng.randint(-2**31, 2**31 - 1)
    if t in (FD.TYPE_INT64, FD.TYPE_SINT64, FD.TYPE_SFIXED64):
        return rng.choice(INT64) if rng.random() < 0.6 else rng.randint(-2**63, 2**63 - 1)
    if t in (FD.TYPE_UINT32, FD.TYPE_FIXED32):
        return rng.choice(UINT32) if rng.random() < 0.6 else rng.randint(0, 2**32 - 1)
    if t in (FD.TYPE_UINT64, FD.TYPE_FIXED64):
        return rng.choice(UINT64) if rng.random() < 0.6 else rng.randint(0, 2**64 - 1)
    if t == FD.TYPE_FLOAT:
        if rng.random() < 0.6:
            return rng.choice(FLOATS)
        return struct.unpack("<f", struct.pack("<f", rng.uniform(-1e6, 1e6)))[0]
    if t == FD.TYPE_DOUBLE:
        return rng.choice(DOUBLES) if rng.random() < 0.6 else rng.uniform(-1e12, 1e12)
    if t == FD.TYPE_BOOL:
        return rng.random() < 0.5
    if t == FD.TYPE_STRING:
        if rng.random() < 0.6:
            return rng.choice(STRINGS)
        return "".join(chr(rng.choice([rng.randint(32, 126), rng.randint(0xa0, 0xd7ff),
                                       rng.randint(0xe000, 0x10ffff)]))
                       for _ in range(rng.randint(0, 12)))
    if t == FD.TYPE_BYTES:
        return bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 20)))
    if t == FD.TYPE_ENUM:
        values = [v.number for v in f.enum_type.values]
        closed = (f.enum_type.file.syntax != "proto3" or f.file.syntax != "proto3"
                  or f.is_extension or f.containing_type.file.syntax != "proto3")
        if not closed and rng.random() < 0.2:
            return rng.choice([-1, 99, 2**31 - 1, -2**31])
        return rng.choice(values)
    raise ValueError(t)


def fill(rng, msg, pool, depth):
    d = msg.DESCRIPTOR
    for f in d.fields:
        if f.containing_oneof is not None and rng.random() < 0.5:
            continue
        if rng.random() < 0.35:
            continue
        set_field(rng, msg, f, pool, depth, lambda: getattr(msg, f.name))
    if d.extension_ranges:
        for ext in pool.FindAllExtensions(d):
            if rng.random() < 0.5:
                set_ext(rng, msg, ext, pool, depth)


def is_map(f):
    return (f.type == FD.TYPE_MESSAGE and f.message_type.GetOptions().map_entry
            and f.label == FD.LABEL_REPEATED)


def set_field(rng, msg, f, pool, depth, get):
    if is_map(f):
        kf = f.message_type.fields_by_name["key"]
        vf = f.message_type.fields_by_name["value"]
        m = get()
        for _ in range(rng.randint(0, 4)):
            k = rand_scalar(rng, kf)
            if vf.type == FD.TYPE_MESSAGE:
                if depth > 0:
                    fill(rng, m[k], pool, depth - 1)
                else:
                    m[k].SetInParent() if hasattr(m[k], "SetInParent") else None
            else:
                m[k] = rand_scalar(rng, vf)
        return
    if f.label == FD.LABEL_REPEATED:
        c = get()
        for _ in range(rng.randint(0, 4)):
            if f.type in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
                sub = c.add()
                if depth > 0:
                    fill(rng, sub, pool, depth - 1)
            else:
                c.append(rand_scalar(rng, f))
        return
    if f.type in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
        sub = getattr(msg, f.name)
        sub.SetInParent()
        if depth > 0:
            fill(rng, sub, pool, depth - 1)
        return
    setattr(msg, f.name, rand_scalar(rng, f))


def set_ext(rng, msg, ext, pool, depth):
    if ext.label == FD.LABEL_REPEATED:
        c = msg.Extensions[ext]
        for _ in range(rng.randint(0, 3)):
            if ext.type in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
                sub = c.add()
                if depth > 0:
                    fill(rng, sub, pool, depth - 1)
            else:
                c.append(rand_scalar(rng, ext))
    elif ext.type in (FD.TYPE_MESSAGE, FD.TYPE_GROUP):
        sub = msg.Extensions[ext]
        sub.SetInParent()
        if depth > 0:
            fill(rng, sub, pool, depth - 1)
    else:
        msg.Extensions[ext] = rand_scalar(rng, ext)


def varint(v):
    v &= (1 << 64) - 1
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7f) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def unknown_fields(rng, d, pool):
    """A few fields whose numbers the type (and its extensions) lack."""
    used = {f.number for f in d.fields}
    if d.extension_ranges:
        used |= {e.number for e in pool.FindAllExtensions(d)}
    out = b""
    for _ in range(rng.randint(1, 3)):
        n = rng.choice([1000, 4095, 19999, 100000, 536870911, rng.randint(1, 5000)])
        if n in used or 19000 <= n <= 19999:
            continue
        wt = rng.choice([0, 1, 2, 3, 5])
        if wt == 0:
            body = varint(rng.choice([0, 1, 2**64 - 1, 300]))
        elif wt == 1:
            body = bytes(rng.randint(0, 255) for _ in range(8))
        elif wt == 5:
            body = bytes(rng.randint(0, 255) for _ in range(4))
        elif wt == 2:
            b = bytes(rng.randint(0, 255) for _ in range(rng.randint(0, 6)))
            body = varint(len(b)) + b
        else:
            body = varint(8) + varint(7) + varint((n << 3) | 4)
        out += varint((n << 3) | wt) + body
    return out


def gen(desc_dir, out_path, seed, count, seconds):
    rng = random.Random(seed)
    start = time.monotonic()
    lines = []
    per_set = max(1, count // len(SETS))
    for name in SETS:
        path = os.path.join(desc_dir, name + ".pb")
        pool, factory, types = load_set(path)
        for i in range(per_set):
            if time.monotonic() - start > seconds:
                break
            d = rng.choice(types)
            cls = factory.GetPrototype(d)
            msg = cls()
            fill(rng, msg, pool, rng.randint(0, 3))
            data = msg.SerializePartialToString(deterministic=True)
            if rng.random() < 0.15:
                extra = unknown_fields(rng, d, pool)
                m2 = cls()
                m2.MergeFromString(data + extra)
                data = m2.SerializePartialToString(deterministic=True)
            lines.append("%s\t%s\t%s\n" % (name, d.full_name, data.hex()))
    with open(out_path, "w") as f:
        f.writelines(lines)
    print("%d generated" % len(lines))


def check(desc_dir, in_path):
    sets = {}
    checked = differ = 0
    with open(in_path) as f:
        for line in f:
            name, tname, want_hex, got_hex = line.rstrip("\n").split("\t")
            if name not in sets:
                pool, factory, _ = load_set(os.path.join(desc_dir, name + ".pb"))
                sets[name] = (pool, factory)
            pool, factory = sets[name]
            cls = factory.GetPrototype(pool.FindMessageTypeByName(tname))
            want, got = cls(), cls()
            want.MergeFromString(bytes.fromhex(want_hex))
            checked += 1
            try:
                got.MergeFromString(bytes.fromhex(got_hex))
            except Exception as e:  # a parse failure is a difference
                differ += 1
                print("DIFF %s %s: reference cannot parse protocall's bytes: %s" % (name, tname, e))
                continue
            a = want.SerializePartialToString(deterministic=True)
            b = got.SerializePartialToString(deterministic=True)
            if a != b:
                differ += 1
                print("DIFF %s %s: want %s got %s" % (name, tname, a.hex(), b.hex()))
    print("%d checked, %d differ" % (checked, differ))
    return 1 if differ else 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "gen":
        seed, count, seconds = 1, 1000, 10.0
        rest = argv[4:]
        while rest:
            k, v = rest[0], rest[1]
            rest = rest[2:]
            if k == "--seed":
                seed = int(v)
            elif k == "--count":
                count = int(v)
            elif k == "--seconds":
                seconds = float(v)
            else:
                raise SystemExit("unknown option " + k)
        gen(argv[2], argv[3], seed, count, seconds)
        return 0
    if len(argv) == 4 and argv[1] == "check":
        return check(argv[2], argv[3])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
