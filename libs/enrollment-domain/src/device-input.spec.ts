import { AppError } from '@sts/errors/app-error';
import { normalizeDeviceQuery, parseMetadataJson, validateDeviceInput } from './device-input';

const valid = {
  machineId: '4c4c4544-0042-3510-8052-b7c04f4e3432',
  hostname: 'laptop-01',
  metadata: { os: 'linux', arch: 'x64' },
};

function failure(run: () => unknown): AppError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe('VALIDATION_FAILED');
    return error as AppError;
  }
  throw new Error('expected a validation failure');
}

const paths = (error: AppError) => error.fields.map((f) => f.path);

describe('device input', () => {
  it('accepts an agent report and trims the hostname', () => {
    expect(validateDeviceInput({ ...valid, hostname: '  laptop-01\t' })).toEqual(valid);
  });

  it('accepts unicode hostnames', () => {
    expect(validateDeviceInput({ ...valid, hostname: 'Jürgens MacBook 💻' }).hostname).toBe(
      'Jürgens MacBook 💻',
    );
    expect(validateDeviceInput({ ...valid, hostname: '💻'.repeat(255) }).hostname).toHaveLength(510);
  });

  it('bounds machine ids to 1..128 printable characters', () => {
    expect(validateDeviceInput({ ...valid, machineId: 'a'.repeat(128) }).machineId).toHaveLength(128);
    for (const machineId of ['', 'a'.repeat(129), 'has space', 'nul\u0000', 'tab\t', 'ünicode']) {
      expect(paths(failure(() => validateDeviceInput({ ...valid, machineId })))).toEqual(['machine_id']);
    }
  });

  it('bounds hostnames to 1..255 characters without control characters', () => {
    for (const hostname of [
      '',
      '   ',
      'x'.repeat(256),
      'a\u0000b',
      'line\nbreak',
      'bell\u0007',
      'c1\u0085',
      'lone\ud800',
    ]) {
      expect(paths(failure(() => validateDeviceInput({ ...valid, hostname })))).toEqual(['hostname']);
    }
  });

  it('reports every bad field at once', () => {
    expect(paths(failure(() => validateDeviceInput({ machineId: '', hostname: '', metadata: [] })))).toEqual([
      'machine_id',
      'hostname',
      'metadata',
    ]);
  });

  it('wants metadata to be an object', () => {
    for (const metadata of [null, [], 'text', 42, true]) {
      expect(paths(failure(() => validateDeviceInput({ ...valid, metadata })))).toEqual(['metadata']);
    }
    expect(validateDeviceInput({ ...valid, metadata: {} }).metadata).toEqual({});
  });

  it('limits metadata to 16 KiB serialized, with the limit in the message', () => {
    const fits = { blob: 'x'.repeat(16 * 1024 - 11) };
    expect(JSON.stringify(fits)).toHaveLength(16 * 1024);
    expect(validateDeviceInput({ ...valid, metadata: fits }).metadata).toBe(fits);
    const error = failure(() => validateDeviceInput({ ...valid, metadata: { blob: 'x'.repeat(16 * 1024) } }));
    expect(paths(error)).toEqual(['metadata']);
    expect(error.message).toContain('16384');
    // Bytes, not characters: 6000 three-byte characters are 18000 bytes.
    expect(
      paths(failure(() => validateDeviceInput({ ...valid, metadata: { s: '€'.repeat(6000) } }))),
    ).toEqual(['metadata']);
  });

  it('limits nesting to 8 levels and names the offending path', () => {
    const nest = (levels: number): Record<string, unknown> =>
      levels === 1 ? { leaf: 1 } : { a: nest(levels - 1) };
    expect(validateDeviceInput({ ...valid, metadata: nest(8) }).metadata).toEqual(nest(8));
    expect(paths(failure(() => validateDeviceInput({ ...valid, metadata: nest(9) })))).toEqual([
      'metadata.a.a.a.a.a.a.a.a',
    ]);
    expect(
      paths(failure(() => validateDeviceInput({ ...valid, metadata: { l: [[[[[[[[1]]]]]]]] } }))),
    ).toEqual(['metadata.l.0.0.0.0.0.0.0']);
  });

  it('refuses text PostgreSQL cannot store in jsonb', () => {
    expect(
      paths(
        failure(() =>
          validateDeviceInput({ ...valid, metadata: JSON.parse('{"a":"x\\u0000y"}') as unknown }),
        ),
      ),
    ).toEqual(['metadata.a']);
    expect(
      paths(
        failure(() =>
          validateDeviceInput({ ...valid, metadata: JSON.parse('{"a":["\\ud800"]}') as unknown }),
        ),
      ),
    ).toEqual(['metadata.a.0']);
    expect(
      paths(
        failure(() => validateDeviceInput({ ...valid, metadata: JSON.parse('{"k\\u0000":1}') as unknown })),
      ),
    ).toEqual(['metadata.k\uFFFD']);
    expect(validateDeviceInput({ ...valid, metadata: { emoji: '😀', ctl: 'tab\there' } }).metadata).toEqual({
      emoji: '😀',
      ctl: 'tab\there',
    });
  });

  it('names the rule each bad field broke, in the fields and in the message', () => {
    const fieldsOf = (input: Partial<typeof valid>) =>
      failure(() => validateDeviceInput({ ...valid, ...input })).fields;
    expect(fieldsOf({ machineId: '' })).toEqual([{ path: 'machine_id', message: 'is required' }]);
    expect(fieldsOf({ machineId: 'a'.repeat(129) })).toEqual([
      { path: 'machine_id', message: 'must be at most 128 characters' },
    ]);
    expect(fieldsOf({ machineId: 'has space' })).toEqual([
      { path: 'machine_id', message: 'must be printable ASCII without spaces' },
    ]);
    expect(fieldsOf({ hostname: ' ' })).toEqual([{ path: 'hostname', message: 'is required' }]);
    expect(fieldsOf({ hostname: 'x'.repeat(256) })).toEqual([
      { path: 'hostname', message: 'must be at most 255 characters' },
    ]);
    expect(fieldsOf({ hostname: 'bell\u0007' })).toEqual([
      { path: 'hostname', message: 'must not contain control characters' },
    ]);
    expect(fieldsOf({ metadata: [] as unknown as typeof valid.metadata })).toEqual([
      { path: 'metadata', message: 'must be a JSON object' },
    ]);
    expect(failure(() => validateDeviceInput({ machineId: '', hostname: '', metadata: 1 })).message).toBe(
      'machine_id is required; hostname is required; metadata must be a JSON object',
    );
  });

  it('names what is wrong inside metadata', () => {
    const fieldsOf = (metadataJson: string) =>
      failure(() => validateDeviceInput({ ...valid, metadata: JSON.parse(metadataJson) as unknown })).fields;
    expect(fieldsOf('{"a":"x\\u0000"}')).toEqual([
      { path: 'metadata.a', message: 'must not contain NUL characters or unpaired surrogates' },
    ]);
    expect(fieldsOf('{"k\\u0000":1}')).toEqual([
      { path: 'metadata.k\uFFFD', message: 'key must not contain NUL characters or unpaired surrogates' },
    ]);
    expect(fieldsOf('{"a":{"a":{"a":{"a":{"a":{"a":{"a":{"a":{}}}}}}}}}')).toEqual([
      { path: 'metadata.a.a.a.a.a.a.a.a', message: 'nests deeper than 8 levels' },
    ]);
  });

  it('shows every unpaired surrogate of a bad key as U+FFFD in the field path', () => {
    const error = failure(() =>
      validateDeviceInput({ ...valid, metadata: JSON.parse('{"a\\ud800b\\udc00":1}') as unknown }),
    );
    expect(paths(error)).toEqual(['metadata.a\uFFFDb\uFFFD']);
  });

  it('reports at most 10 metadata violations', () => {
    const metadata = Object.fromEntries(Array.from({ length: 12 }, (_, i) => [`k${i}\u0000`, i]));
    expect(paths(failure(() => validateDeviceInput({ ...valid, metadata })))).toEqual(
      Array.from({ length: 10 }, (_, i) => `metadata.k${i}\uFFFD`),
    );
  });

  it('parses metadata JSON text of up to 64 KiB, refusing longer text unparsed and with the 16 KiB limit named', () => {
    const atLimit = `"${'x'.repeat(64 * 1024 - 2)}"`;
    expect(Buffer.byteLength(atLimit, 'utf8')).toBe(64 * 1024);
    expect(parseMetadataJson(atLimit)).toBe('x'.repeat(64 * 1024 - 2));
    expect(failure(() => parseMetadataJson(`"${'x'.repeat(64 * 1024 - 1)}"`)).fields).toEqual([
      { path: 'metadata', message: 'must be at most 16384 bytes as JSON' },
    ]);
  });

  it('parses whitespace-only metadata text as an empty object and names malformed JSON', () => {
    expect(parseMetadataJson(' \n\t ')).toEqual({});
    expect(failure(() => parseMetadataJson('{oops')).fields).toEqual([
      { path: 'metadata', message: 'must be a JSON object' },
    ]);
  });

  it('parses metadata JSON text, empty meaning an empty object', () => {
    expect(parseMetadataJson('')).toEqual({});
    expect(parseMetadataJson(' {"os":"linux"} ')).toEqual({ os: 'linux' });
    expect(paths(failure(() => parseMetadataJson('{oops')))).toEqual(['metadata']);
    expect(paths(failure(() => parseMetadataJson(`"${'x'.repeat(70_000)}"`)))).toEqual(['metadata']);
  });
});

describe('device list query', () => {
  it('is trimmed, bounded and free of control characters', () => {
    expect(normalizeDeviceQuery('  ')).toBeNull();
    expect(normalizeDeviceQuery(' Lap% ')).toBe('Lap%');
    expect(paths(failure(() => normalizeDeviceQuery('x'.repeat(256))))).toEqual(['query']);
    expect(paths(failure(() => normalizeDeviceQuery('a\u0000')))).toEqual(['query']);
  });

  it('accepts 255 characters and refuses 256, naming the rule', () => {
    expect(normalizeDeviceQuery('💻'.repeat(255))).toBe('💻'.repeat(255));
    expect(failure(() => normalizeDeviceQuery('x'.repeat(256))).fields).toEqual([
      { path: 'query', message: 'must be at most 255 characters' },
    ]);
    expect(failure(() => normalizeDeviceQuery('a\u0000')).fields).toEqual([
      { path: 'query', message: 'must not contain control characters' },
    ]);
  });
});
