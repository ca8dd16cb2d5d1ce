import { ConfigError, loadConfig } from '@sts/config/load-config';
import { healthcheckEnvSchema, healthcheckTarget } from './healthcheck-config';

describe("the health probe's configuration", () => {
  const target = (env: Record<string, string>, liveness = false) =>
    healthcheckTarget(loadConfig(healthcheckEnvSchema, env), liveness);

  it("asks a service's gRPC health, else the gateway's probe route", () => {
    expect(target({ GRPC_PORT: '50051' })).toBe('grpc://127.0.0.1:50051');
    expect(target({})).toBe('http://127.0.0.1:8080/readyz');
    expect(target({ PORT: '9000' }, true)).toBe('http://127.0.0.1:9000/livez');
  });

  it('takes HEALTHCHECK_URL instead, and a blank variable as unset', () => {
    expect(target({ HEALTHCHECK_URL: 'grpc://analytics:50055', GRPC_PORT: '50051' })).toBe(
      'grpc://analytics:50055',
    );
    expect(target({ HEALTHCHECK_URL: ' ', GRPC_PORT: '', PORT: '' })).toBe('http://127.0.0.1:8080/readyz');
  });

  it('names a bad variable', () => {
    expect(() => target({ HEALTHCHECK_URL: 'ftp://x' })).toThrow(ConfigError);
    expect(() => target({ GRPC_PORT: 'many' })).toThrow(/GRPC_PORT/);
  });
});
