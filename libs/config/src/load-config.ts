import type { z } from 'zod';
import { productionUrlIssues } from './https-in-production';

export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/**
 * Parses environment variables with a zod object schema. On failure it throws one error that
 * names every bad variable, so a misconfigured service stops at start with a message a person can act on.
 * With NODE_ENV=production it also refuses http for the URLs marked `httpsInProduction` (loopback only with
 * ALLOW_LOOPBACK_HTTP=true).
 */
export function loadConfig<Shape extends z.ZodRawShape>(
  schema: z.ZodObject<Shape>,
  env: Record<string, string | undefined> = process.env,
): z.infer<z.ZodObject<Shape>> {
  // Empty (or blank) strings mean "not set": shells and compose files produce them for unset variables
  // (String(): an environment parsed from YAML may hold numbers).
  const cleaned = Object.fromEntries(
    Object.entries(env).filter(([, value]) => value !== undefined && String(value).trim() !== ''),
  );
  const result = schema.safeParse(cleaned);
  if (!result.success) {
    const lines = result.error.issues.map(
      (issue) => `  - ${issue.path.join('.') || '(root)'}: ${issue.message}`,
    );
    throw new ConfigError(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const insecure = productionUrlIssues(schema.shape, result.data);
  if (insecure.length > 0)
    throw new ConfigError(`Invalid configuration:\n${insecure.map((line) => `  - ${line}`).join('\n')}`);
  return result.data;
}
