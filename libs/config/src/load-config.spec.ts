import { z } from 'zod';
import { commonEnv, observabilityEnv, oidcEnv, sealingEnv } from './env-fragments';
import { ConfigError, loadConfig } from './load-config';

describe('loadConfig', () => {
  const schema = z.object({ ...commonEnv, ...oidcEnv, ...sealingEnv });
  const valid = {
    OIDC_ISSUER: 'https://idp.example.com/',
    OIDC_AUDIENCE: 'https://api.example.com',
    SECRET_SEALING_KEY: Buffer.alloc(32, 7).toString('base64'),
  };

  it('applies defaults and transforms', () => {
    const config = loadConfig(schema, valid);
    expect(config.NODE_ENV).toBe('development');
    expect(config.OIDC_ORG_CLAIM).toBe('org_id');
    expect(config.OIDC_ALGORITHMS).toEqual(['RS256', 'ES256', 'PS256', 'EdDSA']);
  });

  it('names every invalid variable in one error', () => {
    expect(() => loadConfig(schema, { OIDC_ISSUER: 'not a url', SECRET_SEALING_KEY: 'short' })).toThrow(
      ConfigError,
    );
    try {
      loadConfig(schema, { OIDC_ISSUER: 'not a url', SECRET_SEALING_KEY: 'short' });
    } catch (error) {
      const message = (error as Error).message;
      expect(message).toContain('OIDC_ISSUER');
      expect(message).toContain('OIDC_AUDIENCE');
      expect(message).toContain('SECRET_SEALING_KEY');
    }
  });

  it('treats empty and blank strings as unset', () => {
    expect(loadConfig(schema, { ...valid, LOG_LEVEL: '' }).LOG_LEVEL).toBe('info');
    expect(loadConfig(z.object(observabilityEnv), { OTEL_TRACES_SAMPLER_ARG: '  ' })).not.toHaveProperty(
      'OTEL_TRACES_SAMPLER_ARG',
    );
  });

  it("takes OpenTelemetry's sampler names and ratio, and refuses others", () => {
    const observability = z.object(observabilityEnv);
    expect(loadConfig(observability, {})).toMatchObject({ OTEL_TRACES_SAMPLER: 'parentbased_always_on' });
    expect(
      loadConfig(observability, {
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.1',
      }),
    ).toMatchObject({ OTEL_TRACES_SAMPLER: 'parentbased_traceidratio', OTEL_TRACES_SAMPLER_ARG: 0.1 });
    expect(() => loadConfig(observability, { OTEL_TRACES_SAMPLER: 'jaeger_remote' })).toThrow(
      /OTEL_TRACES_SAMPLER/,
    );
    expect(() => loadConfig(observability, { OTEL_TRACES_SAMPLER_ARG: '1.5' })).toThrow(
      /OTEL_TRACES_SAMPLER_ARG/,
    );
  });
});
