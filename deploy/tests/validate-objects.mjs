// Validates Kubernetes objects (YAML documents on stdin) against the Kubernetes schemas, offline, with
// the kubernetes-models package (ESM only, hence a script of its own that deploy.int-spec.ts runs).
// Prints one JSON line: {"objects": n, "errors": ["Kind/name: message", …]}.
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';

const objects = parseAllDocuments(readFileSync(0, 'utf8'))
  .map((document) => document.toJS())
  .filter(Boolean);
const errors = [];
for (const object of objects) {
  const label = `${object.kind}/${object.metadata?.name}`;
  let models;
  try {
    models = await import(`kubernetes-models/${object.apiVersion}`);
  } catch {
    errors.push(`${label}: no schema for apiVersion ${object.apiVersion}`);
    continue;
  }
  const Model = models[object.kind];
  if (!Model) {
    errors.push(`${label}: no schema for kind ${object.kind} in ${object.apiVersion}`);
    continue;
  }
  try {
    new Model(object).validate();
  } catch (error) {
    errors.push(`${label}: ${error.message}`);
  }
}
console.log(JSON.stringify({ objects: objects.length, errors }));
