import { parseMail } from './smtp-sink';

const crlf = (lines: string[]) => Buffer.from(lines.join('\r\n'), 'latin1');

describe('MIME parsing of the SMTP sink', () => {
  it('decodes encoded words in headers and reads addresses with quoted names, groups and encoded names', async () => {
    const mail = await parseMail(
      crlf([
        'From: =?UTF-8?Q?Zo=C3=AB?= <zoe@example.com>',
        'To: "Doe, \\"JD\\" Jane" <jane@example.com>, team: a@example.com, =?UTF-8?Q?J=C3=B6rg?= <j@example.com>;',
        'Cc: b@example.com',
        'Subject: =?UTF-8?Q?Gr=C3=BC=C3=9Fe_aus_K=C3=B6ln?=',
        'X-Note: =?ISO-8859-1?B?R3L832U=?=',
        '',
        'body',
        '',
      ]),
    );
    expect(mail.subject).toBe('Grüße aus Köln');
    expect(mail.headers['x-note']).toBe('Grüße');
    expect(mail.from).toBe('Zoë <zoe@example.com>');
    expect(mail.recipients).toEqual([
      { name: 'Doe, "JD" Jane', address: 'jane@example.com' },
      { name: '', address: 'a@example.com' },
      { name: 'Jörg', address: 'j@example.com' },
      { name: '', address: 'b@example.com' },
    ]);
  });

  it('walks nested multiparts, picks text and html, keeps attachments with RFC 2231 names', async () => {
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
    const mail = await parseMail(raw);
    expect(mail.from).toBe('Zoë <zoe@example.com>');
    expect(mail.subject).toBe('Nested and folded');
    expect(mail.text).toBe('Grüße');
    expect(mail.html).toBe('<p>Grüße</p>');
    expect(mail.attachments.map((a) => [a.filename, a.contentType])).toEqual([
      ['logo.png', 'image/png'],
      ['Bericht Ü final.txt', 'text/plain'],
    ]);
    expect(mail.attachments[0]?.content.length).toBe(6);
    expect(mail.attachments[1]?.content.toString('utf8').trim()).toBe('attached');
  });

  it('reads a message without MIME headers, with bare LF line ends and raw UTF-8 headers', async () => {
    const mail = await parseMail(
      Buffer.from('Subject: Grüße\nTo: ada@example.com\n\nline 1\nline 2\n', 'utf8'),
    );
    expect(mail.subject).toBe('Grüße');
    expect(mail.recipients).toEqual([{ name: '', address: 'ada@example.com' }]);
    expect(mail.text).toBe('line 1\nline 2');
    expect(mail.html).toBeUndefined();
  });

  it('survives garbage', async () => {
    const mail = await parseMail(Buffer.from('\x00\x01 not a mail', 'latin1'));
    expect(mail.subject).toBe('');
    expect(mail.attachments).toEqual([]);
  });
});
