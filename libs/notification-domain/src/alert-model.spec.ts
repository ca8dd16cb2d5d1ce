import { AppError } from '@sts/errors/app-error';
import {
  ALERT_LIMITS,
  alertEndpointHost,
  alertSecretContext,
  validAlertDescription,
  validAlertUrl,
} from './alert-model';

/** The error a validator throws, as the caller (and the admin, through the API) sees it. */
function refusal(validate: () => unknown): { code: string; detail: string; fields: unknown } {
  try {
    validate();
  } catch (error) {
    expect(error).toBeInstanceOf(AppError);
    const { code, detail, fields } = error as AppError;
    return { code, detail, fields };
  }
  throw new Error('expected a refusal');
}

const urlRefusal = (message: string) => ({
  code: 'VALIDATION_FAILED',
  detail: message,
  fields: [{ path: 'url', message }],
});

describe('alertEndpointHost', () => {
  it('shows the host and a non-default port only, never the path, query or credentials', () => {
    expect(alertEndpointHost('https://Hooks.Example.com:8443/alerts/t0ken?key=secret')).toBe(
      'hooks.example.com:8443',
    );
    expect(alertEndpointHost('https://user:pw@hooks.example.com:443/a')).toBe('hooks.example.com');
  });

  it('says so when the stored URL cannot be read', () => {
    expect(alertEndpointHost('not a url')).toBe('an unreadable URL');
    expect(alertEndpointHost('')).toBe('an unreadable URL');
  });
});

describe('alertSecretContext', () => {
  it('binds a sealed secret to its organization and endpoint, in a fixed format (stored secrets depend on it)', () => {
    expect(alertSecretContext({ orgId: 'org-1', id: 'ep-9' })).toBe('alert-endpoint:secret:org-1:ep-9');
    expect(alertSecretContext({ orgId: 'org-2', id: 'ep-9' })).not.toBe(
      alertSecretContext({ orgId: 'org-1', id: 'ep-9' }),
    );
  });
});

describe('validAlertUrl', () => {
  it('accepts a URL of exactly the maximum length and refuses one character more, naming the field', () => {
    const base = 'https://hooks.example.com/';
    const longest = base + 'a'.repeat(ALERT_LIMITS.urlLength - base.length);
    expect(longest).toHaveLength(2_048);
    expect(validAlertUrl(longest)).toBe(longest);
    expect(refusal(() => validAlertUrl(`${longest}a`))).toEqual(urlRefusal('at most 2048 characters'));
  });

  it('refuses spaces and control characters with a message that says so', () => {
    for (const bad of [
      'https://hooks.example.com/ a',
      'https://hooks.example.com/\u0000',
      'https://hooks.example.com/\u007f',
    ]) {
      expect(refusal(() => validAlertUrl(bad))).toEqual(
        urlRefusal('must not contain spaces or control characters'),
      );
    }
  });

  it('refuses what is not an absolute URL', () => {
    for (const bad of ['hooks.example.com', '/alerts', 'https://']) {
      expect(refusal(() => validAlertUrl(bad))).toEqual(urlRefusal('must be an absolute URL'));
    }
  });

  it('refuses any scheme but https', () => {
    for (const bad of ['http://hooks.example.com/', 'ftp://hooks.example.com/', 'javascript:alert(1)']) {
      expect(refusal(() => validAlertUrl(bad))).toEqual(urlRefusal('must be an https:// URL'));
    }
  });

  it('refuses a user name alone, a password alone, or both', () => {
    for (const bad of [
      'https://user@hooks.example.com/',
      'https://:secret@hooks.example.com/',
      'https://user:secret@hooks.example.com/',
    ]) {
      expect(refusal(() => validAlertUrl(bad))).toEqual(urlRefusal('must not carry a user name or password'));
    }
  });

  it('refuses a fragment, even an empty one', () => {
    for (const bad of ['https://hooks.example.com/#frag', 'https://hooks.example.com/a#']) {
      expect(refusal(() => validAlertUrl(bad))).toEqual(urlRefusal('must not have a fragment'));
    }
  });
});

describe('validAlertDescription', () => {
  const descriptionRefusal = (message: string) => ({
    code: 'VALIDATION_FAILED',
    detail: message,
    fields: [{ path: 'description', message }],
  });

  it('accepts exactly the maximum length (after trimming) and refuses one character more', () => {
    const longest = 'd'.repeat(ALERT_LIMITS.descriptionLength);
    expect(longest).toHaveLength(200);
    expect(validAlertDescription(longest)).toBe(longest);
    expect(validAlertDescription(`  ${longest}  `)).toBe(longest);
    expect(refusal(() => validAlertDescription(`${longest}d`))).toEqual(
      descriptionRefusal('at most 200 characters'),
    );
  });

  it('refuses control characters, naming the field', () => {
    for (const bad of ['line\nbreak', 'tab\there', 'del\u007f']) {
      expect(refusal(() => validAlertDescription(bad))).toEqual(
        descriptionRefusal('must not contain control characters'),
      );
    }
  });
});
