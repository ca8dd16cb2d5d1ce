import { createTransport } from 'nodemailer';
import { startSmtpSink, type SmtpSink } from './smtp-sink';

jest.setTimeout(30_000);

describe('SMTP sink', () => {
  let sink: SmtpSink;

  beforeAll(async () => {
    sink = await startSmtpSink();
  });

  afterAll(async () => {
    await sink.close();
  });

  const transport = () =>
    createTransport({ host: sink.host, port: sink.port, secure: false, ignoreTLS: true });

  it('listens on a free local port and names it as an SMTP URL', () => {
    expect(sink.port).toBeGreaterThan(0);
    expect(sink.url).toBe(`smtp://127.0.0.1:${sink.port}`);
  });

  it('decodes quoted-printable text and html alternatives, headers and envelope exactly', async () => {
    const longLine = `Grüße aus Köln — ${'sehr lange Zeile '.repeat(8)}Ende.`;
    const text = [
      'Hallo Ådam,',
      longLine,
      'a = b, 100% sicher; Tab\there',
      'trailing space ',
      '',
      'Link: https://app.example.com/invites/accept?token=abc_DEF-123&x=1',
    ].join('\n');
    const html = `<p>Grüße, <b>Zoë</b> — 🎉</p>\n<p>${longLine}</p>\n<a href="https://app.example.com/?a=1&amp;b=2">öffnen</a>`;
    const subject = `Einladung: Grüße 🎉 ${'lang '.repeat(15)}Ende`;

    const info = await transport().sendMail({
      from: '"Zoë Ünicode" <zoe@example.com>',
      to: ['"Doe, Jöhn" <john@example.com>', 'bob@example.com'],
      bcc: 'hidden@example.com',
      subject,
      text,
      html,
    });
    const mail = await sink.waitFor((received) => received.messageId === info.messageId);

    expect(mail.raw.toString('latin1')).toMatch(/Content-Transfer-Encoding: quoted-printable/);
    expect(mail.subject).toBe(subject);
    expect(mail.from).toBe('Zoë Ünicode <zoe@example.com>');
    expect(mail.recipients).toEqual([
      { name: 'Doe, Jöhn', address: 'john@example.com' },
      { name: '', address: 'bob@example.com' },
    ]);
    expect(mail.envelope).toEqual({
      from: 'zoe@example.com',
      to: ['john@example.com', 'bob@example.com', 'hidden@example.com'],
    });
    expect(mail.headers['mime-version']).toBe('1.0');
    expect(mail.date).toBeDefined();
    expect(mail.text).toBe(text);
    expect(mail.html).toBe(html);
    expect(mail.attachments).toEqual([]);
  });

  it('decodes base64 bodies and attachments with non-ASCII file names', async () => {
    const text = 'こんにちは、世界。'.repeat(30);
    const html = `<p>${'Привет, мир! '.repeat(20)}</p>`;
    await transport().sendMail({
      from: 'app@example.com',
      to: 'ada@example.com',
      subject: 'base64',
      text,
      html,
      attachments: [
        { filename: 'Bericht Ü 2026.txt', content: 'Inhalt: Grüße\n' },
        { filename: 'data.bin', content: Buffer.from([0, 1, 2, 255, 254]) },
      ],
    });
    const mail = await sink.waitFor((received) => received.subject === 'base64');

    expect(mail.raw.toString('latin1')).toMatch(/Content-Transfer-Encoding: base64/);
    expect(mail.text).toBe(text);
    expect(mail.html).toBe(html);
    expect(mail.attachments).toHaveLength(2);
    expect(mail.attachments[0]?.filename).toBe('Bericht Ü 2026.txt');
    expect(mail.attachments[0]?.content.toString('utf8')).toBe('Inhalt: Grüße\n');
    expect(mail.attachments[1]?.filename).toBe('data.bin');
    expect([...(mail.attachments[1]?.content ?? [])]).toEqual([0, 1, 2, 255, 254]);
  });

  it('keeps plain ASCII text-only mail as it was sent', async () => {
    const text = 'Plain text.\nSecond line.';
    await transport().sendMail({ from: 'a@example.com', to: 'b@example.com', subject: 'ascii', text });
    const mail = await sink.waitFor((received) => received.subject === 'ascii');
    expect(mail.text).toBe(text);
    expect(mail.html).toBeUndefined();
  });

  it('waits for mail still to come and times out with what it saw', async () => {
    const waiting = sink.waitFor((received) => received.subject === 'later', 5_000);
    await transport().sendMail({ from: 'a@example.com', to: 'c@example.com', subject: 'later', text: 'x' });
    await expect(waiting).resolves.toMatchObject({ subject: 'later', envelope: { to: ['c@example.com'] } });

    await expect(sink.waitFor((received) => received.subject === 'never', 100)).rejects.toThrow(
      /no matching mail within 100 ms; received: \[.*later/,
    );
  });

  it('numbers mail in order of arrival and keeps only the newest when capped', async () => {
    const capped = await startSmtpSink({ maxMessages: 2 });
    try {
      const send = createTransport({ host: capped.host, port: capped.port, secure: false, ignoreTLS: true });
      for (const subject of ['one', 'two', 'three']) {
        await send.sendMail({ from: 'a@example.com', to: 'b@example.com', subject, text: subject });
      }
      expect(capped.messages.map((mail) => [mail.id, mail.subject])).toEqual([
        [2, 'two'],
        [3, 'three'],
      ]);
    } finally {
      await capped.close();
    }
  });
});
