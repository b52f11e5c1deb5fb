#!/usr/bin/python3
"""Corpus proof for the .proto parser: for every .proto under
CORPUS/protos/<project>/, the FileDescriptorProto protocall builds (printed as
JSON by the proto_dump tool) must equal, field by field, the one protoc built
in CORPUS/descriptors/<project>.pb. The built-in well-known types are also
compared with CORPUS/descriptors/wkt.pb (loaded with no import path).

protoc's side is read with Debian's python3-protobuf (descriptor_pb2) and
turned into the same JSON shape as proto_dump's: descriptor.proto field
names, only the fields that are set (ListFields), enums as numbers, options
as the hex of their serialized bytes. Each difference prints as a path:
  opentelemetry/proto/trace/v1/trace.proto: message_type[Span].field[3 trace_id].json_name: "x" vs "y"
(ours first, then protoc's).

Usage: proto_compare.py CORPUS_DIR PROTO_DUMP
       proto_compare.py --protoc DIR PROTO_DUMP
The second form compiles every .proto under DIR with Debian's protoc
(-I DIR -I /usr/include --include_imports) and compares the same way: the
differential test on the project's own tricky fixtures.
Exit 0 when equal, 1 on a difference, 77 (skip) when the corpus is absent
and env CI is not set.
"""
import json
import os
import subprocess
import sys
import tempfile

from google.protobuf import descriptor_pb2

WKT = ["any", "api", "descriptor", "duration", "empty", "field_mask",
       "source_context", "struct", "timestamp", "type", "wrappers"]


def to_json(msg):
    out = {}
    for fd, val in msg.ListFields():
        if fd.name == "source_code_info":
            continue
        if fd.name == "options":
            out["options"] = val.SerializeToString().hex()
        elif fd.label == fd.LABEL_REPEATED:
            if fd.message_type is not None:
                out[fd.name] = [to_json(v) for v in val]
            else:
                out[fd.name] = list(val)
        elif fd.message_type is not None:
            out[fd.name] = to_json(val)
        else:
            out[fd.name] = val
    return out


def label(item, i):
    if isinstance(item, dict) and "name" in item:
        return "%d %s" % (i, item["name"])
    return str(i)


def compare(ours, theirs, path, diffs):
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for k in sorted(set(ours) | set(theirs)):
            p = path + "." + k if path else k
            if k not in ours:
                diffs.append("%s: (absent) vs %s" % (p, json.dumps(theirs[k])[:200]))
            elif k not in theirs:
                diffs.append("%s: %s vs (absent)" % (p, json.dumps(ours[k])[:200]))
            else:
                compare(ours[k], theirs[k], p, diffs)
    elif isinstance(ours, list) and isinstance(theirs, list):
        for i in range(max(len(ours), len(theirs))):
            if i >= len(ours):
                diffs.append("%s[%s]: (absent) vs present" % (path, label(theirs[i], i)))
            elif i >= len(theirs):
                diffs.append("%s[%s]: present vs (absent)" % (path, label(ours[i], i)))
            else:
                compare(ours[i], theirs[i], "%s[%s]" % (path, label(theirs[i], i)), diffs)
    elif ours != theirs:
        diffs.append("%s: %s vs %s" % (path, json.dumps(ours), json.dumps(theirs)))


def dump(tool, args):
    r = subprocess.run([tool] + args, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    return {f["name"]: f for f in json.loads(r.stdout)["file"]}, None


def proto_files(root):
    files = []
    for d, _, names in os.walk(root):
        for n in names:
            if n.endswith(".proto"):
                files.append(os.path.relpath(os.path.join(d, n), root))
    return sorted(files)


def compare_set(what, fds, ours, builtin):
    compared = failed = 0
    for fp in fds.file:
        if builtin and fp.name not in ours:
            continue  # compiler/plugin.proto is not built in
        compared += 1
        if fp.name not in ours:
            print("%s: %s: not loaded" % (what, fp.name))
            failed += 1
            continue
        diffs = []
        compare(ours[fp.name], to_json(fp), "", diffs)
        if diffs:
            failed += 1
            for d in diffs:
                print("%s: %s" % (fp.name, d))
    return compared, failed


def main_protoc(root, tool):
    files = proto_files(root)
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "set.pb")
        # the files protocall builds in (google/api, google/rpc, buf/validate)
        # are on protoc's path too, as they are on ours
        builtin = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "core", "schema",
                               "protos")
        r = subprocess.run(["protoc", "-I", root, "-I", "/usr/include", "-I", builtin, "--include_imports",
                            "--descriptor_set_out=" + out] + files,
                           capture_output=True, text=True)
        if r.returncode != 0:
            print("protoc failed: " + r.stderr.strip())
            return 1
        fds = descriptor_pb2.FileDescriptorSet()
        with open(out, "rb") as f:
            fds.ParseFromString(f.read())
    ours, err = dump(tool, ["-I", root] + files)
    if ours is None:
        print("load failed: %s" % err)
        return 1
    compared, failed = compare_set(root, fds, ours, False)
    print("proto_compare: %d files compared, %d differ" % (compared, failed))
    return 1 if failed else 0


def main():
    if sys.argv[1] == "--protoc":
        return main_protoc(sys.argv[2], sys.argv[3])
    corpus, tool = sys.argv[1], sys.argv[2]
    protos = os.path.join(corpus, "protos")
    if not os.path.isdir(protos):
        msg = "proto_compare: corpus absent (%s)" % protos
        if os.environ.get("CI"):
            print(msg + ": FAIL (CI is set)")
            return 1
        print(msg + ": SKIP")
        return 77
    failed = 0
    compared = 0
    runs = []
    for project in sorted(os.listdir(protos)):
        root = os.path.join(protos, project)
        runs.append((project, ["-I", root] + proto_files(root)))
    runs.append(("wkt", ["google/protobuf/%s.proto" % n for n in WKT]))
    for project, args in runs:
        fds = descriptor_pb2.FileDescriptorSet()
        with open(os.path.join(corpus, "descriptors", project + ".pb"), "rb") as f:
            fds.ParseFromString(f.read())
        ours, err = dump(tool, args)
        builtin = "-I" not in args
        what = project + (" (built-in well-known types)" if builtin else "")
        if ours is None:
            print("%s: load failed: %s" % (what, err))
            failed += 1
            continue
        c, f = compare_set(what, fds, ours, builtin)
        compared += c
        failed += f
    print("proto_compare: %d files compared, %d differ" % (compared, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
