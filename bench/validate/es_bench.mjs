// protovalidate-es's side of bench/validate_bench.lua: validates the same
// message (JSON in argv) many times and prints nanoseconds per validation
// (the best of 5 runs of at least 200 ms each, after a warm-up).
import { readFileSync } from "node:fs";
import { createFileRegistry, fromBinary, fromJson } from "@bufbuild/protobuf";
import { FileDescriptorSetSchema } from "@bufbuild/protobuf/wkt";
import { createValidator } from "@bufbuild/protovalidate";

const [setPath, typeName, json] = process.argv.slice(2);
const registry = createFileRegistry(fromBinary(FileDescriptorSetSchema, readFileSync(setPath)));
const schema = registry.getMessage(typeName);
const validator = createValidator({ registry });
const msg = fromJson(schema, JSON.parse(json), { registry });
const res = validator.validate(schema, msg);
if (res.kind !== "valid") throw new Error("not valid: " + JSON.stringify(res.violations ?? res.error));
let n = 1000;
const run = (k) => {
  const t = process.hrtime.bigint();
  for (let i = 0; i < k; i++) validator.validate(schema, msg);
  return Number(process.hrtime.bigint() - t);
};
while (run(n) < 200e6) n *= 2;
let best = Infinity;
for (let r = 0; r < 5; r++) best = Math.min(best, run(n) / n);
console.log(best.toFixed(1));
