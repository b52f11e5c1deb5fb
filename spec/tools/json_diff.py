#!/usr/bin/python3
"""Differential oracle for protocall's proto3 JSON: Debian's python3-protobuf
json_format (run with /usr/bin/python3; schemas from the corpus descriptor
sets, random messages from wire_diff.py beside this file).

  json_diff.py gen DESCRIPTORS_DIR OUT --seed N --count N [--seconds S]
      As wire_diff.py gen: lines "set<TAB>type<TAB>hex" of random messages.
  json_diff.py check DESCRIPTORS_DIR IN OUT
      IN has lines "set<TAB>type<TAB>hex<TAB>json", json being what
      pc.to_json printed for the message the hex holds, or "!reason" when it
      refused. For each line the reference prints the same message
      (MessageToJson): both must refuse, or both print, and then the two
      documents must be equal as JSON values (floats to 1e-7 relative, or
      equal as float32: the printers may pick other shortest digits for a
      float32; the parse-back check below compares exactly) and
      protocall's must Parse to the message the reference's own document
      parses to. OUT gets "set<TAB>type<TAB>hex<TAB>json" with the
      reference's JSON and the hex of what it parses to (Any values
      re-encoded with map entries by key, as protocall writes them), for the
      way back
      (the caller reads each with pc.from_json and compares the encodings).
      Known reference behaviour, allowed: messages holding a repeated
      extension or reaching a MessageSet type are skipped (python3-protobuf 4.21
      prints the former under their json_name without brackets; core/wire
      keeps MessageSet items as unknown fields); the reference's ListFields
      omits message-typed extensions it decoded from bytes, so protocall's
      extra "[ext]" objects are allowed (and such messages not parsed back);
      it prints Timestamps and Durations outside their range,
      and infinite Value numbers, which protocall refuses, and refuses FieldMask paths with non-ASCII
      capitals, which protocall prints; it refuses float32 FLT_MAX as it prints it.
      Prints "N checked, N differ, ..." last and one line per difference
      before it; exits 1 when any differ.
"""
import importlib.util
import json
import math
import os
import struct
import sys

from google.protobuf import json_format

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("wire_diff", os.path.join(HERE, "wire_diff.py"))
wire_diff = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(wire_diff)


def has_repeated_extension(msg):
    for fd, val in msg.ListFields():
        if fd.is_extension and fd.label == fd.LABEL_REPEATED:
            return True
        if fd.message_type is not None:
            if fd.message_type.GetOptions().map_entry:
                vals = val.values() if fd.message_type.fields_by_name["value"].message_type else []
            elif fd.label == fd.LABEL_REPEATED:
                vals = val
            else:
                vals = [val]
            for v in vals:
                if has_repeated_extension(v):
                    return True
    return False


def canonical_any(msg, pool, factory):
    """Re-encodes every Any value inside msg deterministically (map entries
    by key), as protocall writes them; the reference's order follows its
    hash maps."""
    if msg.DESCRIPTOR.full_name == "google.protobuf.Any" and msg.type_url:
        try:
            d = pool.FindMessageTypeByName(msg.type_url.split("/")[-1])
        except KeyError:
            return
        inner = factory.GetPrototype(d)()
        inner.MergeFromString(msg.value)
        canonical_any(inner, pool, factory)
        msg.value = inner.SerializePartialToString(deterministic=True)
        return
    for fd, val in msg.ListFields():
        if fd.message_type is None:
            continue
        if fd.message_type.GetOptions().map_entry:
            vals = val.values() if fd.message_type.fields_by_name["value"].message_type else []
        elif fd.label == fd.LABEL_REPEATED:
            vals = val
        else:
            vals = [val]
        for v in vals:
            canonical_any(v, pool, factory)


def reaches_message_set(d, pool, seen=None):
    """Whether a MessageSet type is d or reachable through d's fields and
    extensions."""
    seen = set() if seen is None else seen
    if d.full_name in seen:
        return False
    seen.add(d.full_name)
    if d.GetOptions().message_set_wire_format:
        return True
    fields = list(d.fields) + list(pool.FindAllExtensions(d))
    return any(f.message_type is not None and reaches_message_set(f.message_type, pool, seen)
               for f in fields)


def same_json(a, b, path="$", dropped=None):
    """None when equal, else the path of the first difference. Members
    "[pkg.ext]" of a holding an object (or a list of them) that b lacks are allowed and listed
    in 'dropped' (the reference's ListFields omits message extensions it
    decoded from bytes)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return None if a is b else path
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        if a == b or (math.isfinite(a) and math.isfinite(b) and abs(a - b) <= 1e-7 * abs(b)):
            return None
        try:  # float32 subnormals: "1e-45" and "1.4013e-45" are the same float
            if struct.unpack("f", struct.pack("f", a)) == struct.unpack("f", struct.pack("f", b)):
                return None
        except OverflowError:
            pass
        return path
    if isinstance(a, dict) and isinstance(b, dict):
        extra = [k for k, v in a.items() if k not in b and k.startswith("[") and (
            isinstance(v, dict) or (isinstance(v, list) and all(isinstance(x, dict) for x in v)))]
        if extra:
            dropped.extend(extra)
            a = {k: v for k, v in a.items() if k not in extra}
        if set(a) != set(b):
            return "%s keys %s vs %s" % (path, sorted(set(a) - set(b)), sorted(set(b) - set(a)))
        for k in a:
            d = same_json(a[k], b[k], "%s.%s" % (path, k), dropped)
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return "%s length %d vs %d" % (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = same_json(x, y, "%s[%d]" % (path, i), dropped)
            if d:
                return d
        return None
    return None if a == b else path


def check(desc_dir, in_path, out_path):
    sets = {}
    checked = differ = skipped = lenient = relaxed = 0
    out = []
    with open(in_path, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for line in lines:
        if not line:
            continue
        name, tname, hexs, ours = line.split("\t", 3)
        if name not in sets:
            pool, factory, _ = wire_diff.load_set(os.path.join(desc_dir, name + ".pb"))
            sets[name] = (pool, factory)
        pool, factory = sets[name]
        cls = factory.GetPrototype(pool.FindMessageTypeByName(tname))
        msg = cls()
        msg.MergeFromString(bytes.fromhex(hexs))
        if has_repeated_extension(msg) or reaches_message_set(msg.DESCRIPTOR, pool):
            skipped += 1
            continue
        checked += 1
        try:
            ref = json_format.MessageToJson(msg, indent=None, descriptor_pool=pool)
        except Exception as e:  # noqa: BLE001 - any refusal counts
            ref = None
            ref_err = str(e)
        if ours.startswith("!") and ref is not None and (
                ("out of range" in ours and ("Timestamp" in ours or "Duration" in ours)) or
                "Value number" in ours):
            lenient += 1  # the reference prints these out of range, and Value infinities
            continue
        if ours.startswith("!") and '["[' in ours and ref is not None:
            relaxed += 1  # refused inside a message extension the reference omits
            continue
        if ours.startswith("!") and "FieldMask path" in ours and "has no JSON form" in ours and ref is not None:
            lenient += 1  # the reference prints paths no field name has ("\0nul"): protobuf-go refuses them
            continue
        if ref is None and "must not contain uppercase" in ref_err and not ours.startswith("!"):
            lenient += 1  # the reference counts non-ASCII capitals in FieldMask paths
            continue
        if ours.startswith("!") or ref is None:
            if not (ours.startswith("!") and ref is None):
                differ += 1
                print("DIFF %s %s %s: protocall %s, reference %s" % (
                    name, tname, hexs, ours if ours.startswith("!") else "printed",
                    "refused: " + ref_err if ref is None else "printed"))
            continue
        dropped = []
        d = same_json(json.loads(ours), json.loads(ref), "$", dropped)
        if d:
            differ += 1
            print("DIFF %s %s %s: printed JSON differs at %s\n  ours %s\n  ref  %s" % (
                name, tname, hexs[:4000], d, ours[:2000], ref[:2000]))
            continue
        if dropped:
            relaxed += 1
            continue
        # Both documents must parse to the same message (JSON loses what an
        # empty Value or an unknown enum number held, so the reference's
        # parse of its own document is the target). The reference refuses
        # some documents it prints itself (float32 FLT_MAX as 3.4028235e+38).
        back, own = cls(), cls()
        try:
            json_format.Parse(ref, own, descriptor_pool=pool)
        except Exception as e:  # noqa: BLE001
            own = None
            own_err = str(e)
        try:
            json_format.Parse(ours, back, descriptor_pool=pool)
        except Exception as e:  # noqa: BLE001
            if own is None and str(e) == own_err:
                continue
            differ += 1
            print("DIFF %s %s: reference cannot parse protocall's JSON: %s\n  %s" % (
                name, tname, e, ours[:2000]))
            continue
        # An Any's value is bytes whose map order the reference does not fix:
        # equal bytes, or else equal JSON of the two (which unpacks the Any).
        if own is None or (back.SerializePartialToString(deterministic=True) !=
                           own.SerializePartialToString(deterministic=True) and
                           json_format.MessageToJson(back, descriptor_pool=pool, sort_keys=True) !=
                           json_format.MessageToJson(own, descriptor_pool=pool, sort_keys=True)):
            differ += 1
            print("DIFF %s %s: protocall's JSON parses to another message\n  %s" % (
                name, tname, ours[:2000]))
            continue
        canonical_any(own, pool, factory)
        out.append("%s\t%s\t%s\t%s\n" % (
            name, tname, own.SerializePartialToString(deterministic=True).hex(), ref))
    with open(out_path, "w", encoding="utf-8") as f:
        f.writelines(out)
    print("%d checked, %d differ, %d skipped, %d the reference is more or less lenient, "
          "%d with message extensions the reference omits" % (
              checked, differ, skipped, lenient, relaxed))
    return 1 if differ else 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "gen":
        return wire_diff.main(argv)
    if len(argv) == 5 and argv[1] == "check":
        return check(argv[2], argv[3], argv[4])
    sys.stderr.write(__doc__)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
