import { generateSecret } from '@sts/crypto/secrets';
import { DEVICE_TOKEN_PREFIX, looksLikeDeviceToken } from './device-token';

describe('device token shape', () => {
  it('takes every token the enrollment service mints and nothing of another shape', () => {
    for (let i = 0; i < 200; i++)
      expect(looksLikeDeviceToken(generateSecret(DEVICE_TOKEN_PREFIX))).toBe(true);
    for (const value of [
      '',
      'sts_dt_',
      'sts_dt_x',
      `sts_dt_${'a'.repeat(42)}`,
      `sts_dt_${'a'.repeat(44)}`,
      `sts_ek_${'a'.repeat(43)}`,
      `sts_dt_${'a'.repeat(42)}=`,
      ` sts_dt_${'a'.repeat(43)}`,
      `sts_dt_${'a'.repeat(43)}\n`,
    ])
      expect([value, looksLikeDeviceToken(value)]).toEqual([value, false]);
  });
});
