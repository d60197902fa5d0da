// Validates Kubernetes objects (a multi-document YAML stream on stdin, e.g. `kubectl kustomize`'s
// output) against the OpenAPI schemas of the Kubernetes API that the kubernetes-models package
// ships (generated from Kubernetes' own OpenAPI spec, validated with ajv): unknown fields, wrong
// types and missing required fields fail. Prints one line per object; exits 1 if any fails, or if
// an object's apiVersion/kind has no schema here.
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";

const text = readFileSync(0, "utf8");
const docs = parseAllDocuments(text).map((d) => d.toJS()).filter((d) => d);
let failed = 0;
for (const doc of docs) {
  const { apiVersion, kind } = doc;
  const name = `${kind}/${doc.metadata?.name} (${apiVersion})`;
  const group = apiVersion.includes("/") ? apiVersion : `v1`;
  let Model;
  try {
    Model = (await import(`kubernetes-models/${group}/${kind}`))[kind];
  } catch (error) {
    console.log(`FAIL ${name}: no schema for ${apiVersion} ${kind}`);
    failed++;
    continue;
  }
  // kustomize wraps long base64 values over lines; the API server's decoder (Go's encoding/base64)
  // skips the newlines, the "byte" format check here does not.
  if (kind === "Secret" && doc.data) {
    for (const key of Object.keys(doc.data)) doc.data[key] = doc.data[key].replace(/\s+/g, "");
  }
  try {
    new Model(doc).validate();
    console.log(`ok   ${name}`);
  } catch (error) {
    console.log(`FAIL ${name}: ${error.message}`);
    failed++;
  }
}
if (docs.length === 0) {
  console.log("FAIL no objects on stdin");
  failed++;
}
process.exit(failed ? 1 : 0);
