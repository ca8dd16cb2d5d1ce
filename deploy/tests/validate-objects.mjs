// Validates Kubernetes objects (YAML documents on stdin) against the Kubernetes schemas, offline, with
// the kubernetes-models package (ESM only, hence a script of its own that deploy.int-spec.ts runs), and
// the custom resources of the operators the deploy uses (ClickHouseInstallation, ScaledObject) against those
// operators' own CustomResourceDefinitions (crds/, see its README), as the API server would.
// Prints one JSON line: {"objects": n, "errors": ["Kind/name: message", …]}.
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import AjvModule from 'ajv';
import { parse, parseAllDocuments } from 'yaml';

const Ajv = AjvModule.default ?? AjvModule;
const CRD_DIR = join(import.meta.dirname ?? new URL('.', import.meta.url).pathname, 'crds');

/**
 * A CRD's schema as the API server applies it with strict field validation: a field the schema does not
 * name is an error, except where the schema keeps unknown fields (x-kubernetes-preserve-unknown-fields).
 */
function strict(schema) {
  if (Array.isArray(schema)) return schema.map(strict);
  if (!schema || typeof schema !== 'object') return schema;
  const copy = Object.fromEntries(Object.entries(schema).map(([key, value]) => [key, strict(value)]));
  if (
    copy.properties &&
    copy.additionalProperties === undefined &&
    !copy['x-kubernetes-preserve-unknown-fields']
  )
    copy.additionalProperties = false;
  return copy;
}

/** `<group>/<version>` + kind → the compiled schema of every served version of the CRDs in crds/. */
const ajv = new Ajv({ strict: false, allErrors: true, validateFormats: false });
const crdSchemas = new Map();
for (const file of readdirSync(CRD_DIR).filter((name) => name.endsWith('.yaml'))) {
  const crd = parse(readFileSync(join(CRD_DIR, file), 'utf8'), { merge: true, maxAliasCount: -1 });
  for (const version of crd.spec.versions.filter((candidate) => candidate.served)) {
    crdSchemas.set(
      `${crd.spec.group}/${version.name}/${crd.spec.names.kind}`,
      ajv.compile(strict(version.schema.openAPIV3Schema)),
    );
  }
}

/** Why the Kubernetes schemas reject `object` (a built-in kind), or null. */
async function kubernetesProblem(object) {
  let models;
  try {
    models = await import(`kubernetes-models/${object.apiVersion}`);
  } catch {
    return `no schema for apiVersion ${object.apiVersion}`;
  }
  const Model = models[object.kind];
  if (!Model) return `no schema for kind ${object.kind} in ${object.apiVersion}`;
  try {
    new Model(object).validate();
    return null;
  } catch (error) {
    return error.message;
  }
}

/**
 * The Kubernetes objects a ClickHouseInstallation's templates become, which its CRD leaves unchecked
 * (x-kubernetes-preserve-unknown-fields): the operator makes each server's pod of a pod template, its
 * volumes of the volume claim templates and its Services of the service templates.
 */
function templatedObjects(object) {
  if (object.kind !== 'ClickHouseInstallation') return [];
  const templates = object.spec?.templates ?? {};
  return [
    ...(templates.podTemplates ?? []).map((template) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: template.name, ...template.metadata },
      spec: template.spec,
    })),
    ...(templates.volumeClaimTemplates ?? []).map((template) => ({
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: template.name },
      spec: template.spec,
    })),
    // The operator adds the selector.
    ...(templates.serviceTemplates ?? []).map((template) => ({
      apiVersion: 'v1',
      kind: 'Service',
      metadata: { name: template.name },
      spec: template.spec,
    })),
  ];
}

const objects = parseAllDocuments(readFileSync(0, 'utf8'))
  .map((document) => document.toJS())
  .filter(Boolean);
const errors = [];
for (const object of objects) {
  const label = `${object.kind}/${object.metadata?.name}`;
  const custom = crdSchemas.get(`${object.apiVersion}/${object.kind}`);
  if (custom) {
    if (!custom(object)) {
      for (const error of custom.errors ?? []) {
        const detail = error.params?.additionalProperty ? ` (${error.params.additionalProperty})` : '';
        errors.push(`${label}: ${error.instancePath || '/'} ${error.message}${detail}`);
      }
    }
    for (const templated of templatedObjects(object)) {
      const problem = await kubernetesProblem(templated);
      if (problem) errors.push(`${label}: template ${templated.kind}/${templated.metadata.name}: ${problem}`);
    }
    continue;
  }
  const problem = await kubernetesProblem(object);
  if (problem) errors.push(`${label}: ${problem}`);
}
console.log(JSON.stringify({ objects: objects.length, errors }));
