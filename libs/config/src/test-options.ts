import { z } from 'zod';
import { commonEnv } from './env-fragments';
import { ConfigError, loadConfig } from './load-config';

/**
 * Settings that exist only for tests (a fault to inject, a timer to shorten) are not configuration: they
 * are typed start options of a service (`startAnalyticsService(config, logger, options)`), which
 * in-process tests pass directly. A test that runs an app as a process of its own hands them over in
 * this one variable, JSON that the app parses with its own zod schema (unknown keys refused). Operators
 * never set it and README does not list it; with NODE_ENV=production an app refuses to start while it is
 * set (docs/decisions.md, "Configuration is for operators; tests use start options").
 */
export const TEST_OPTIONS_VARIABLE = 'STS_TEST_OPTIONS';

const testOptionsEnv = z.object({
  NODE_ENV: commonEnv.NODE_ENV,
  STS_TEST_OPTIONS: z.string().optional(),
});

/** `{}` when the variable is unset (so every field of `shape` must be optional). */
export function loadTestOptions<Shape extends z.ZodRawShape>(
  shape: Shape,
  env: Record<string, string | undefined> = process.env,
): z.infer<z.ZodObject<Shape>> {
  const { NODE_ENV, STS_TEST_OPTIONS } = loadConfig(testOptionsEnv, env);
  if (STS_TEST_OPTIONS !== undefined && NODE_ENV === 'production') {
    throw new ConfigError(
      `Invalid configuration:\n  - ${TEST_OPTIONS_VARIABLE}: is for tests and refused with NODE_ENV=production`,
    );
  }
  let json: unknown;
  try {
    json = JSON.parse(STS_TEST_OPTIONS ?? '{}');
  } catch {
    throw new ConfigError(`Invalid configuration:\n  - ${TEST_OPTIONS_VARIABLE}: must be a JSON object`);
  }
  const result = z.strictObject(shape).safeParse(json);
  if (!result.success) {
    const lines = result.error.issues.map(
      (issue) => `  - ${TEST_OPTIONS_VARIABLE}.${issue.path.join('.') || '(root)'}: ${issue.message}`,
    );
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  return result.data;
}

/** The value of `STS_TEST_OPTIONS` for a test that starts an app as a process with these options. */
export function testOptionsVariable(options: Record<string, unknown>): Record<string, string> {
  return { [TEST_OPTIONS_VARIABLE]: JSON.stringify(options) };
}
