import { maskedUrl, trimSlashes, URL_MASK } from './urls';

describe('maskedUrl', () => {
  it.each([
    // Slack: the last three segments are the credential.
    [
      'https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX',
      'https://hooks.slack.com/services/…/…/…',
    ],
    // Teams (Power Automate / Office 365 connectors).
    [
      'https://acme.webhook.office.com/webhookb2/0b6a8a55-7c55@0b6a8a55-7c56/IncomingWebhook/abc123/0b6a8a55',
      'https://acme.webhook.office.com/webhookb2/…/…/…/…',
    ],
    // Query values are hidden, their names stay.
    [
      'https://alerts.example.com/hook?token=abc&channel=ops',
      'https://alerts.example.com/…?token=…&channel=…',
    ],
    [
      'https://prod-00.westus.logic.azure.com:8443/workflows/f00/triggers/manual/paths/invoke?api-version=2016-10-01&sig=s3cr3t',
      'https://prod-00.westus.logic.azure.com:8443/workflows/…/…/…/…/…?api-version=…&sig=…',
    ],
    // A lone segment may be the token itself (webhook.site, Make).
    ['https://webhook.site/0b6a8a55-7c55-4b8e-9d0e-5f2f3c1a1a01', 'https://webhook.site/…'],
    ['https://webhook.site/0b6a8a55-7c55-4b8e-9d0e-5f2f3c1a1a01/', 'https://webhook.site/…/'],
    // So may a long first one.
    ['https://example.com/a1b2c3d4e5f6a7b8c9/alerts', 'https://example.com/…/…'],
    ['https://example.com/sixteen-chars-xx/alerts', 'https://example.com/sixteen-chars-xx/…'],
    // A parameter without a value may be a token; empty segments and parameters keep the shape.
    ['https://example.com/a//b?s3cr3t&&x=', 'https://example.com/a//…?…&x=…'],
    ['https://example.com/', 'https://example.com/'],
    ['https://example.com?', 'https://example.com/'],
    // User name, password and fragment are left out.
    ['https://user:pass@example.com/api/x#frag', 'https://example.com/api/…'],
  ])('masks %s as %s', (url, masked) => {
    expect(maskedUrl(url)).toBe(masked);
  });

  it('never shows what follows the origin but the first short segment', () => {
    const secret = 'Zq9vS3cr3tT0k3nValue';
    for (const url of [
      `https://hooks.example.com/services/${secret}`,
      `https://hooks.example.com/${secret}`,
      `https://hooks.example.com/x?token=${secret}`,
      `https://hooks.example.com/x?${secret}`,
      `https://hooks.example.com/x/${encodeURIComponent(`${secret}/?&=`)}`,
    ])
      expect(maskedUrl(url)).not.toContain(secret.slice(0, 4));
  });

  it('answers a mask alone for what has no origin to show', () => {
    for (const value of ['', 'not a url', '/relative/path?token=x', 'mailto:ops@example.com'])
      expect(maskedUrl(value)).toBe(URL_MASK);
  });
});

describe('trimSlashes', () => {
  it('drops trailing slashes only', () => {
    expect(trimSlashes('https://idp.example.com//')).toBe('https://idp.example.com');
    expect(trimSlashes('https://idp.example.com/a/')).toBe('https://idp.example.com/a');
  });
});
