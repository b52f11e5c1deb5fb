// The oracle of protocall's validation (core/validate, pc.validate):
// @bufbuild/protovalidate (protovalidate-es) on the same messages. Run by
// spec/validate_diff_spec.lua.
//
//   node spec/node/validate_diff.mjs SET CASES OUT
//       SET: a FileDescriptorSet (protoc --include_imports) of the schemas.
//       CASES: one case a line, a JSON object {"type": full name, "json":
//       the message as proto3 JSON text}. Writes OUT, one line a case, a
//       JSON object: {"result": "valid" | "invalid" | "error", "violations":
//       [[field path, rule id, for_key], ...] (as protovalidate-es gives
//       them), "error": the text of a compile or runtime error}.
import { readFileSync, writeFileSync } from "node:fs";
import { createFileRegistry, fromBinary, fromJson } from "@bufbuild/protobuf";
import { pathToString } from "@bufbuild/protobuf/reflect";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { createValidator } from "@bufbuild/protovalidate";

const [setPath, casesPath, outPath] = process.argv.slice(2);
const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(setPath)));
const validator = createValidator({ registry });
const out = [];
for (const line of readFileSync(casesPath, "utf8").split("\n")) {
  if (line === "") continue;
  const c = JSON.parse(line);
  const schema = registry.getMessage(c.type);
  let r;
  try {
    const msg = fromJson(schema, JSON.parse(c.json), { registry });
    const res = validator.validate(schema, msg);
    if (res.kind === "error") {
      r = { result: "error", error: String(res.error.message) };
    } else {
      r = {
        result: res.kind,
        violations: (res.violations ?? []).map((v) => [pathToString(v.field), v.ruleId, !!v.forKey]),
      };
    }
  } catch (e) {
    r = { result: "error", error: "reading the case: " + String(e.message ?? e) };
  }
  out.push(JSON.stringify(r));
}
writeFileSync(outPath, out.join("\n") + "\n");
