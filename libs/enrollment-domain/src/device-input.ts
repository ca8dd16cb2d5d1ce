import { AppError, invalidField, type FieldViolation } from '@sts/errors/app-error';
import { METADATA_MAX_BYTES, METADATA_MAX_DEPTH } from '@sts/vocabulary/device-metadata';
import type { DeviceMetadata } from './enrollment-model';

export const MACHINE_ID_MAX_LENGTH = 128;
export const HOSTNAME_MAX_LENGTH = 255;
/** JSON text longer than this is not even parsed (whitespace may shrink, but not by this much). */
const METADATA_TEXT_MAX_BYTES = 64 * 1024;
export const DEVICE_QUERY_MAX_LENGTH = 255;

/** Visible ASCII, no spaces: what machine ids look like on every platform (hex, GUIDs, UUIDs). */
const MACHINE_ID_PATTERN = /^[\x21-\x7e]+$/;
/** C0 and C1 control characters and DEL. */
const CONTROL_CHARACTER = /\p{Cc}/u;

export interface DeviceInput {
  machineId: string;
  hostname: string;
  metadata: DeviceMetadata;
}

/**
 * Checks what an agent reports at enrollment and returns it normalised (hostname trimmed).
 * Throws VALIDATION_FAILED listing every bad field (`machine_id`, `hostname`, `metadata…`).
 */
export function validateDeviceInput(input: {
  machineId: string;
  hostname: string;
  metadata: unknown;
}): DeviceInput {
  const fields: FieldViolation[] = [];

  const machineId = input.machineId;
  if (machineId.length === 0) fields.push({ path: 'machine_id', message: 'is required' });
  else if (machineId.length > MACHINE_ID_MAX_LENGTH) {
    fields.push({ path: 'machine_id', message: `must be at most ${MACHINE_ID_MAX_LENGTH} characters` });
  } else if (!MACHINE_ID_PATTERN.test(machineId)) {
    fields.push({ path: 'machine_id', message: 'must be printable ASCII without spaces' });
  }

  const hostname = input.hostname.trim();
  if (hostname.length === 0) fields.push({ path: 'hostname', message: 'is required' });
  else if ([...hostname].length > HOSTNAME_MAX_LENGTH) {
    fields.push({ path: 'hostname', message: `must be at most ${HOSTNAME_MAX_LENGTH} characters` });
  } else if (CONTROL_CHARACTER.test(hostname) || !wellFormed(hostname)) {
    fields.push({ path: 'hostname', message: 'must not contain control characters' });
  }

  fields.push(...metadataViolations(input.metadata));
  if (fields.length > 0) {
    throw new AppError('VALIDATION_FAILED', fields.map((f) => `${f.path} ${f.message}`).join('; '), {
      fields,
    });
  }
  return { machineId, hostname, metadata: input.metadata as DeviceMetadata };
}

/** Parses metadata sent as JSON text (gRPC carries it so); empty text is an empty object. */
export function parseMetadataJson(text: string): unknown {
  if (text.trim() === '') return {};
  if (Buffer.byteLength(text, 'utf8') > METADATA_TEXT_MAX_BYTES) {
    throw invalidField('metadata', `must be at most ${METADATA_MAX_BYTES} bytes as JSON`);
  }
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw invalidField('metadata', 'must be a JSON object');
  }
}

function metadataViolations(metadata: unknown): FieldViolation[] {
  if (!isPlainObject(metadata)) return [{ path: 'metadata', message: 'must be a JSON object' }];
  const fields: FieldViolation[] = [];
  walk(metadata, 'metadata', 1, fields);
  if (fields.length > 0) return fields.slice(0, 10);
  const bytes = Buffer.byteLength(JSON.stringify(metadata), 'utf8');
  if (bytes > METADATA_MAX_BYTES) {
    return [
      { path: 'metadata', message: `must be at most ${METADATA_MAX_BYTES} bytes as JSON (is ${bytes})` },
    ];
  }
  return [];
}

/**
 * Depth and text checks. PostgreSQL's jsonb refuses U+0000 and unpaired surrogates (which JSON
 * text may spell as `\u0000`, `\ud800`), so they are client errors here rather than a failed insert.
 */
function walk(value: unknown, path: string, depth: number, fields: FieldViolation[]): void {
  if (fields.length >= 10) return;
  if (typeof value === 'string') {
    if (!storableText(value))
      fields.push({ path, message: 'must not contain NUL characters or unpaired surrogates' });
    return;
  }
  if (value === null || typeof value !== 'object') return;
  if (depth > METADATA_MAX_DEPTH) {
    fields.push({ path, message: `nests deeper than ${METADATA_MAX_DEPTH} levels` });
    return;
  }
  if (Array.isArray(value)) {
    value.forEach((item, index) => walk(item, `${path}.${index}`, depth + 1, fields));
    return;
  }
  for (const [key, item] of Object.entries(value)) {
    const child = `${path}.${pathSegment(key)}`;
    if (!storableText(key))
      fields.push({ path: child, message: 'key must not contain NUL characters or unpaired surrogates' });
    else walk(item, child, depth + 1, fields);
  }
}

/** Keys as they appear in a field path: unprintable code units shown as U+FFFD. */
function pathSegment(key: string): string {
  return key.replace(/\p{Cc}/gu, '\uFFFD').replace(new RegExp(UNPAIRED_SURROGATE.source, 'g'), '\uFFFD');
}

function storableText(text: string): boolean {
  return !text.includes('\u0000') && wellFormed(text);
}

/** Code units, not code points: a high surrogate not followed by a low one, or a low one not preceded by a high one. */
const UNPAIRED_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

function wellFormed(text: string): boolean {
  return !UNPAIRED_SURROGATE.test(text);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The list filter's search text: trimmed, bounded, no control characters; empty means none. */
export function normalizeDeviceQuery(query: string): string | null {
  const trimmed = query.trim();
  if (trimmed === '') return null;
  if ([...trimmed].length > DEVICE_QUERY_MAX_LENGTH)
    throw invalidField('query', `must be at most ${DEVICE_QUERY_MAX_LENGTH} characters`);
  if (CONTROL_CHARACTER.test(trimmed) || !wellFormed(trimmed))
    throw invalidField('query', 'must not contain control characters');
  return trimmed;
}
