import { randomBytes } from 'node:crypto';
import { loadConfig } from '@sts/config/load-config';
import { testServiceAuth } from '@sts/testing/service-auth';
import { notificationEnvSchema } from './notification-config';

const required = {
  SECRET_SEALING_KEY: randomBytes(32).toString('base64'),
  ...testServiceAuth().envOf('notification'),
};

describe('notification configuration', () => {
  it('defaults PUBLIC_API_URL to the local gateway', () => {
    expect(loadConfig(notificationEnvSchema, required).PUBLIC_API_URL).toBe('http://localhost:8080');
  });

  it('takes an http or https PUBLIC_API_URL and refuses anything else', () => {
    expect(
      loadConfig(notificationEnvSchema, { ...required, PUBLIC_API_URL: 'https://api.example.com' })
        .PUBLIC_API_URL,
    ).toBe('https://api.example.com');
    expect(() =>
      loadConfig(notificationEnvSchema, { ...required, PUBLIC_API_URL: 'ftp://api.example.com' }),
    ).toThrow(/PUBLIC_API_URL/);
    expect(() => loadConfig(notificationEnvSchema, { ...required, PUBLIC_API_URL: 'not a url' })).toThrow(
      /PUBLIC_API_URL/,
    );
  });
});
