import { z } from 'zod';
import { ConfigError } from './load-config';
import { loadTestOptions, testOptionsVariable } from './test-options';

describe('loadTestOptions', () => {
  const shape = { killAfterIngest: z.boolean().optional() };

  it('is empty when STS_TEST_OPTIONS is unset or blank', () => {
    expect(loadTestOptions(shape, {})).toEqual({});
    expect(loadTestOptions(shape, { STS_TEST_OPTIONS: ' ', NODE_ENV: 'production' })).toEqual({});
  });

  it('parses the options a test hands to a process', () => {
    expect(
      loadTestOptions(shape, { NODE_ENV: 'test', ...testOptionsVariable({ killAfterIngest: true }) }),
    ).toEqual({ killAfterIngest: true });
  });

  it('refuses them in production', () => {
    expect(() =>
      loadTestOptions(shape, { NODE_ENV: 'production', ...testOptionsVariable({ killAfterIngest: true }) }),
    ).toThrow(
      new ConfigError(
        'Invalid configuration:\n  - STS_TEST_OPTIONS: is for tests and refused with NODE_ENV=production',
      ),
    );
  });

  it('refuses what is not JSON, unknown options and wrong types, naming them', () => {
    expect(() => loadTestOptions(shape, { STS_TEST_OPTIONS: 'kill' })).toThrow(
      /STS_TEST_OPTIONS: must be a JSON object/,
    );
    expect(() => loadTestOptions(shape, testOptionsVariable({ killAfterIngestt: true }))).toThrow(
      /killAfterIngestt/,
    );
    expect(() => loadTestOptions(shape, testOptionsVariable({ killAfterIngest: 'yes' }))).toThrow(
      /STS_TEST_OPTIONS\.killAfterIngest/,
    );
  });
});
