#!/usr/bin/python3
"""Python baseline for bench/json_bench.lua: Debian's python3-protobuf
json_format (MessageToJson without indent, Parse) over messages from a
descriptor set (no generated code).

  json_py.py SET.pb TYPE BIN JSON NAME [TYPE BIN JSON NAME ...]

Prints "NAME to_json_ns from_json_ns" per case (best of 5 runs of at least
50 ms each)."""
import os
import sys
import time

from google.protobuf import json_format

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "spec", "tools"))
import wire_diff  # noqa: E402  (load_set: a pool and message classes from a descriptor set)


def best(fn):
    n = 1
    while True:
        t0 = time.perf_counter()
        fn(n)
        t = time.perf_counter() - t0
        if t >= 0.05:
            break
        n *= 4
    b = t
    for _ in range(5):
        t0 = time.perf_counter()
        fn(n)
        b = min(b, time.perf_counter() - t0)
    return b / n * 1e9


def main(argv):
    pool, factory, _ = wire_diff.load_set(argv[1])
    rest = argv[2:]
    while rest:
        tname, binp, jsonp, name = rest[:4]
        rest = rest[4:]
        cls = factory.GetPrototype(pool.FindMessageTypeByName(tname))
        m = cls()
        with open(binp, "rb") as f:
            m.ParseFromString(f.read())
        with open(jsonp, encoding="utf-8") as f:
            doc = f.read()

        def to_json(n):
            for _ in range(n):
                json_format.MessageToJson(m, indent=None, descriptor_pool=pool)

        def from_json(n):
            for _ in range(n):
                json_format.Parse(doc, cls(), descriptor_pool=pool)

        print("%s %.1f %.1f" % (name, best(to_json), best(from_json)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
