import { decodeHeaderValue, decodeQuotedPrintable, parseAddressList, parseMail } from './smtp-sink';

const crlf = (lines: string[]) => Buffer.from(lines.join('\r\n'), 'latin1');

describe('MIME parsing of the SMTP sink', () => {
  it('decodes encoded words: Q and B, other charsets, split characters, white space rules', () => {
    expect(decodeHeaderValue('=?UTF-8?Q?Gr=C3=BC=C3=9Fe_aus_K=C3=B6ln?=')).toBe('Grüße aus Köln');
    expect(decodeHeaderValue('=?ISO-8859-1?B?R3L832U=?=')).toBe('Grüße');
    // One UTF-8 character (ü = C3 BC) split over two words, folded white space between them dropped.
    expect(decodeHeaderValue('=?UTF-8?Q?Gr=C3?=   =?UTF-8?Q?=BC=C3=9Fe?=')).toBe('Grüße');
    // White space next to plain text stays; a trailing encoded space is kept.
    expect(decodeHeaderValue('Re: =?UTF-8?Q?Gr=C3=BC=C3=9Fe_?= und mehr')).toBe('Re: Grüße  und mehr');
    expect(decodeHeaderValue('=?utf-8*de?Q?Stra=C3=9Fe?=')).toBe('Straße');
    expect(decodeHeaderValue('no encoding = here ?=')).toBe('no encoding = here ?=');
  });

  it('decodes quoted-printable: soft breaks, escapes, transport white space', () => {
    expect(decodeQuotedPrintable('a=3Db =\r\nc  \r\nd=C3=BC=\r\n').toString('utf8')).toBe('a=b c\r\ndü');
    expect(decodeQuotedPrintable('keep =20\r\nstray = sign').toString('utf8')).toBe('keep  \r\nstray = sign');
  });

  it('parses addresses with quoted names, groups and encoded names', () => {
    expect(
      parseAddressList(
        '"Doe, \\"JD\\" Jane" <jane@example.com>, team: a@example.com, =?UTF-8?Q?J=C3=B6rg?= <j@example.com>;, b@example.com',
      ),
    ).toEqual([
      { name: 'Doe, "JD" Jane', address: 'jane@example.com' },
      { name: '', address: 'a@example.com' },
      { name: 'Jörg', address: 'j@example.com' },
      { name: '', address: 'b@example.com' },
    ]);
  });

  it('walks nested multiparts, picks text and html, keeps attachments with RFC 2231 names', () => {
    const raw = crlf([
      'From: =?UTF-8?Q?Zo=C3=AB?= <zoe@example.com>',
      'To: ada@example.com',
      'Subject: Nested',
      ' and folded',
      'Content-Type: multipart/mixed; boundary="outer"',
      '',
      'This is the preamble.',
      '--outer',
      'Content-Type: multipart/related;',
      '\tboundary=inner',
      '',
      '--inner',
      'Content-Type: multipart/alternative; boundary="alt"',
      '',
      '--alt',
      'Content-Type: text/plain; charset="iso-8859-1"',
      'Content-Transfer-Encoding: quoted-printable',
      '',
      'Gr=FC=DFe',
      '--alt',
      'Content-Type: text/html; charset=utf-8',
      'Content-Transfer-Encoding: base64',
      '',
      Buffer.from('<p>Grüße</p>').toString('base64'),
      '--alt--',
      '--inner',
      'Content-Type: image/png',
      'Content-Disposition: inline; filename="logo.png"',
      'Content-Transfer-Encoding: base64',
      '',
      'iVBORw0K',
      '--inner--',
      '--outer',
      'Content-Type: text/plain; charset=utf-8',
      "Content-Disposition: attachment; filename*0*=utf-8''Bericht%20%C3%9C; filename*1*=%20final.txt",
      '',
      'attached',
      '--outer--',
      'epilogue',
      '',
    ]);
    const mail = parseMail(raw);
    expect(mail.from).toBe('Zoë <zoe@example.com>');
    expect(mail.subject).toBe('Nested and folded');
    expect(mail.text).toBe('Grüße');
    expect(mail.html).toBe('<p>Grüße</p>');
    expect(mail.attachments.map((a) => [a.filename, a.contentType, a.content.length])).toEqual([
      ['logo.png', 'image/png', 6],
      ['Bericht Ü final.txt', 'text/plain', 8],
    ]);
  });

  it('reads a message without MIME headers, with bare LF line ends and raw UTF-8 headers', () => {
    const mail = parseMail(Buffer.from('Subject: Grüße\nTo: ada@example.com\n\nline 1\nline 2\n', 'utf8'));
    expect(mail.subject).toBe('Grüße');
    expect(mail.recipients).toEqual([{ name: '', address: 'ada@example.com' }]);
    expect(mail.text).toBe('line 1\nline 2');
    expect(mail.html).toBeUndefined();
  });

  it('survives garbage', () => {
    const mail = parseMail(Buffer.from('\x00\x01 not a mail', 'latin1'));
    expect(mail.subject).toBe('');
    expect(mail.attachments).toEqual([]);
  });
});
