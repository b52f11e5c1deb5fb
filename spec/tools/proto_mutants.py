"""Mutated copies of a .proto file and protoc's verdict on each.

usage: /usr/bin/python3 spec/tools/proto_mutants.py BASE SEED COUNT OUTDIR

Writes OUTDIR/1.proto ... OUTDIR/COUNT.proto, each BASE with one or two
tokens deleted, replaced or preceded by another, and OUTDIR/verdicts.txt:
line i is protoc's first error on i.proto ("OK" when it compiles), warnings
left out. The same SEED gives the same files. protoc (Debian's
protobuf-compiler) must be on PATH; each file is compiled as "x.proto".
"""
import os
import random
import re
import shutil
import subprocess
import sys

FILLERS = ['{', '}', ';', '=', '(', ')', '<', '>', ',', 'message', 'enum', 'int32',
           'repeated', 'optional', 'required', '1', '"x"', 'foo', '[', ']', 'option',
           'returns', 'stream', '-', '.', 'max', 'to', 'reserved', 'oneof', 'map', 'extend',
           'syntax', 'group', '0x', '1.5', 'string', 'bytes', 'A', 'B', '2', '536870912',
           'default', 'packed']


def main():
    base, seed, count, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    rng = random.Random(seed)
    tokens = re.findall(r'"[^"\n]*"|[A-Za-z_][A-Za-z0-9_.]*|\d+|\S|\n| +', open(base).read())
    spots = [i for i, t in enumerate(tokens) if t.strip()]
    work = os.path.join(out, "protoc")
    os.makedirs(work, exist_ok=True)
    verdicts = []
    for n in range(1, count + 1):
        t = list(tokens)
        for _ in range(rng.choice([1, 1, 1, 2])):
            i = rng.choice(spots)
            op = rng.randrange(3)
            if op == 0:
                t[i] = ''
            elif op == 1:
                t[i] = rng.choice(FILLERS) + ' ' + t[i]
            else:
                t[i] = rng.choice(FILLERS)
        src = ''.join(t)
        with open(os.path.join(out, "%d.proto" % n), "w") as f:
            f.write(src)
        with open(os.path.join(work, "x.proto"), "w") as f:
            f.write(src)
        r = subprocess.run(["protoc", "-I", work, "-o", os.devnull, "x.proto"],
                           capture_output=True, text=True)
        lines = [l for l in r.stderr.splitlines() if "warning" not in l.lower()]
        verdicts.append("OK" if r.returncode == 0 else (lines[0] if lines else "?"))
    shutil.rmtree(work)
    with open(os.path.join(out, "verdicts.txt"), "w") as f:
        f.write("\n".join(verdicts) + "\n")


if __name__ == "__main__":
    main()
