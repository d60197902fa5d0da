// Lints a Dockerfile (path in argv) with dockerfile-utils, the validator of the Dockerfile language
// server: unknown instructions, bad flags and durations, wrong argument counts, invalid ports.
// Prints each diagnostic as LINE: MESSAGE; exits 1 if there is any.
import { readFileSync } from "node:fs";
import { validate } from "dockerfile-utils";

const path = process.argv[2];
const diagnostics = validate(readFileSync(path, "utf8"));
for (const d of diagnostics) console.log(`${path}:${d.range.start.line + 1}: ${d.message}`);
console.log(`${path}: ${diagnostics.length} diagnostics`);
process.exit(diagnostics.length ? 1 : 0);
