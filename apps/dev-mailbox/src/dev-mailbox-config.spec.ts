import { ConfigError } from '@sts/config/load-config';
import { loadDevMailboxConfig, PRODUCTION_REFUSAL } from './dev-mailbox-config';

describe("the development mailbox's configuration", () => {
  it('has defaults, and takes a blank variable as unset', () => {
    expect(loadDevMailboxConfig({ DEV_MAILBOX_SMTP_PORT: ' ' })).toMatchObject({
      DEV_MAILBOX_HOST: '127.0.0.1',
      DEV_MAILBOX_SMTP_PORT: 1025,
      DEV_MAILBOX_HTTP_PORT: 8025,
    });
  });

  it('refuses NODE_ENV=production as a configuration error that says why', () => {
    expect(() => loadDevMailboxConfig({ NODE_ENV: 'production' })).toThrow(ConfigError);
    expect(() => loadDevMailboxConfig({ NODE_ENV: 'production' })).toThrow(PRODUCTION_REFUSAL);
  });
});
