import { plainTextLine } from '@sts/vocabulary/plain-text';
import { formatUtc, headerSafe, shellArg } from './email-format';

describe('plainTextLine', () => {
  it('trims and keeps ordinary text, including non-Latin scripts and emoji', () => {
    expect(plainTextLine('  web-01  ', 255)).toBe('web-01');
    expect(plainTextLine('Zoë’s Mac — 東京 🖥️', 255)).toBe('Zoë’s Mac — 東京 🖥️');
  });

  it('turns line breaks and tabs into single spaces, so a value cannot add lines', () => {
    expect(plainTextLine('web-01\r\nDevice "db-01" was deleted', 255)).toBe(
      'web-01 Device "db-01" was deleted',
    );
    expect(plainTextLine('a\t\tb\u2028c\u0085d', 255)).toBe('a b c d');
  });

  it('removes control and invisible characters', () => {
    // NUL, ESC (terminal colour sequences), DEL, a C1 control, bidi override and isolate, zero-width space, soft hyphen.
    expect(plainTextLine('we\u0000b\u001b[31m-0\u007f1\u009b', 255)).toBe('web[31m-01');
    expect(plainTextLine('\u202egnp.exe\u2066x\u2069', 255)).toBe('gnp.exex');
    expect(plainTextLine('ad\u200bmin\u00ad', 255)).toBe('admin');
    expect(plainTextLine('lone \ud800 surrogate', 255)).toBe('lone surrogate');
  });

  it('normalises to NFC', () => {
    expect(plainTextLine('Zoe\u0308', 255)).toBe('Zo\u00eb');
  });

  it('caps the length in code points, ending with an ellipsis', () => {
    expect(plainTextLine('a'.repeat(255), 255)).toBe('a'.repeat(255));
    const capped = plainTextLine('a'.repeat(1000), 255);
    expect(Array.from(capped)).toHaveLength(255);
    expect(capped.endsWith('a…')).toBe(true);
    // Astral characters count once and are never cut in half.
    const emoji = plainTextLine('🖥'.repeat(300), 255);
    expect(Array.from(emoji)).toHaveLength(255);
    expect(emoji).not.toMatch(/[\ud800-\udfff](?![\udc00-\udfff])/u);
  });

  it('leaves nothing of a value made only of whitespace and controls', () => {
    expect(plainTextLine(' \u0000\r\n\u200b ', 255)).toBe('');
  });
});

describe('shellArg', () => {
  it('leaves keys, codes and URLs as they are', () => {
    expect(shellArg('7KQD-M3XP')).toBe('7KQD-M3XP');
    expect(shellArg('sts_ek_AbC-123_xyz')).toBe('sts_ek_AbC-123_xyz');
    expect(shellArg('https://api.example.com:8443/base')).toBe('https://api.example.com:8443/base');
  });

  it('single-quotes anything a shell would interpret', () => {
    expect(shellArg('a b')).toBe("'a b'");
    expect(shellArg('$(rm -rf ~)')).toBe("'$(rm -rf ~)'");
    expect(shellArg("it's")).toBe("'it'\\''s'");
    expect(shellArg('https://x.test/?a=1&b=2')).toBe("'https://x.test/?a=1&b=2'");
    expect(shellArg('')).toBe("''");
  });
});

describe('headerSafe', () => {
  it('keeps a header value on one line: a run of line breaks and controls becomes a single space', () => {
    expect(headerSafe('Acme\r\nBcc: victim@example.com')).toBe('Acme Bcc: victim@example.com');
    expect(headerSafe('a\u0000\u001f\u007fb')).toBe('a b');
    expect(headerSafe('\r\n Acme \t')).toBe('Acme');
  });
});

describe('formatUtc', () => {
  it('shows the date and the minute in UTC', () => {
    expect(formatUtc(new Date('2026-03-01T14:05:59.999Z'))).toBe('2026-03-01 14:05 UTC');
  });
});
