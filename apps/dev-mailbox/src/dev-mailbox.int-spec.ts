import { spawn } from 'node:child_process';
import { once } from 'node:events';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { startSmtpSink, type SmtpSink } from '@sts/stand-ins/smtp-sink';
import { eventually } from '@sts/testing/eventually';
import { createTransport } from 'nodemailer';
import { createMailboxHttpServer } from './mailbox-http';

jest.setTimeout(30_000);

const ROOT = join(__dirname, '..', '..', '..');
const MAIN = join(__dirname, 'main.ts');

describe('development mailbox web view', () => {
  let sink: SmtpSink;
  let http: Server;
  let base: string;

  beforeAll(async () => {
    sink = await startSmtpSink({ maxMessages: 200 });
    http = createMailboxHttpServer(sink);
    http.listen(0, '127.0.0.1');
    await once(http, 'listening');
    base = `http://127.0.0.1:${(http.address() as AddressInfo).port}`;

    const send = createTransport({ host: sink.host, port: sink.port, secure: false, ignoreTLS: true });
    await send.sendMail({ from: 'app@example.com', to: 'first@example.com', subject: 'First', text: 'one' });
    await send.sendMail({
      from: '"Mallory" <mallory@example.com>',
      to: 'Ada <ada@example.com>',
      subject: '<b>Hi</b> & "welcome"',
      text: 'Accept: https://app.example.com/invites/accept?token=abc&x=1 <script>alert(1)</script>',
      html: '<p onclick="steal()">Hello</p><script>alert(1)</script><img src=x onerror="alert(2)">',
      attachments: [
        { filename: 'evil.html', content: '<script>alert(3)</script>', contentType: 'text/html' },
      ],
    });
  });

  afterAll(async () => {
    http.closeAllConnections();
    await new Promise((resolve) => http.close(resolve));
    await sink.close();
  });

  it('lists mail newest first, escaped', async () => {
    const response = await fetch(`${base}/`);
    expect(response.status).toBe(200);
    expect(response.headers.get('content-security-policy')).toContain("default-src 'none'");
    const html = await response.text();
    expect(html).toContain('&lt;b&gt;Hi&lt;/b&gt; &amp; &quot;welcome&quot;');
    expect(html).not.toContain('<b>Hi</b>');
    expect(html.indexOf('/messages/2')).toBeLessThan(html.indexOf('/messages/1'));
    expect(html).toContain('Ada &lt;ada@example.com&gt;');
  });

  it('shows text escaped and html only inside a sandboxed iframe', async () => {
    const response = await fetch(`${base}/messages/2`);
    expect(response.status).toBe(200);
    const html = await response.text();
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toMatch(/<p onclick/i);
    expect(html).not.toMatch(/<img/i);
    expect(html).toContain('&lt;script&gt;alert(1)&lt;/script&gt;');
    const iframe = /<iframe ([^>]*)>/.exec(html)?.[1] ?? '';
    expect(iframe).toMatch(/sandbox="allow-popups allow-popups-to-escape-sandbox"/);
    expect(iframe).not.toMatch(/allow-scripts|allow-same-origin/);
    expect(iframe).toContain(
      'srcdoc="&lt;base target=&quot;_blank&quot;&gt;&lt;p onclick=&quot;steal()&quot;&gt;Hello',
    );
    // The link in the text is clickable, with its query string intact.
    expect(html).toContain(
      '<a href="https://app.example.com/invites/accept?token=abc&amp;x=1" target="_blank"',
    );
  });

  it('serves attachments as downloads, and the raw message as plain text', async () => {
    const attachment = await fetch(`${base}/messages/2/attachments/0`);
    expect(attachment.headers.get('content-type')).toBe('application/octet-stream');
    expect(attachment.headers.get('content-disposition')).toBe("attachment; filename*=UTF-8''evil.html");
    expect(await attachment.text()).toBe('<script>alert(3)</script>');

    const raw = await fetch(`${base}/messages/2/raw`);
    expect(raw.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    expect(await raw.text()).toMatch(/^From: Mallory <mallory@example.com>/m);
  });

  it('offers the messages as JSON', async () => {
    const response = await fetch(`${base}/api/messages`);
    const body = (await response.json()) as { id: number; subject: string; envelope: { to: string[] } }[];
    expect(body.map((mail) => mail.id)).toEqual([2, 1]);
    expect(body[0]).toMatchObject({
      id: 2,
      subject: '<b>Hi</b> & "welcome"',
      to: 'Ada <ada@example.com>',
      envelope: { from: 'mallory@example.com', to: ['ada@example.com'] },
      attachments: [{ filename: 'evil.html', content_type: 'text/html', size: 25 }],
    });
    const one = await fetch(`${base}/api/messages/1`);
    expect(await one.json()).toMatchObject({ id: 1, subject: 'First', text: 'one', html: null });
  });

  it('answers unknown messages with 404 and other methods with 405', async () => {
    expect((await fetch(`${base}/messages/999`)).status).toBe(404);
    expect((await fetch(`${base}/api/messages/999`)).status).toBe(404);
    expect((await fetch(`${base}/nope`)).status).toBe(404);
    expect((await fetch(`${base}/`, { method: 'POST' })).status).toBe(405);
  });
});

describe('dev-mailbox process', () => {
  function run(env: Record<string, string>) {
    const child = spawn(process.execPath, ['--import', 'tsx', MAIN], {
      cwd: ROOT,
      env: { ...process.env, LOG_LEVEL: 'info', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const lines = () =>
      output
        .split('\n')
        .filter((line) => line.startsWith('{'))
        .map((line) => JSON.parse(line) as Record<string, unknown>);
    return { child, lines, output: () => output };
  }

  it('refuses to start with NODE_ENV=production', async () => {
    const { child, output } = run({ NODE_ENV: 'production' });
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).toBe(1);
    expect(output()).toContain('refuses to run with NODE_ENV=production');
  });

  it('receives mail, logs subject and recipients only, serves it, and stops on SIGTERM', async () => {
    const { child, lines } = run({
      NODE_ENV: 'development',
      DEV_MAILBOX_SMTP_PORT: '0',
      DEV_MAILBOX_HTTP_PORT: '0',
    });
    try {
      const ready = await eventually(() => lines().find((line) => typeof line.smtp_url === 'string'), 20_000);
      const smtp = new URL(ready.smtp_url as string);
      const web = ready.web as string;

      await createTransport({
        host: smtp.hostname,
        port: Number(smtp.port),
        secure: false,
        ignoreTLS: true,
      }).sendMail({
        from: 'app@example.com',
        to: 'grace@example.com',
        subject: 'Your invitation',
        text: 'secret link https://app.example.com/invites/accept?token=s3cr3t',
      });
      const logged = await eventually(() => lines().find((line) => line.msg === 'mail received'), 20_000);
      expect(logged).toMatchObject({ subject: 'Your invitation', to: ['grace@example.com'] });
      expect(JSON.stringify(lines())).not.toContain('s3cr3t');

      const listed = (await (await fetch(`${web}api/messages`)).json()) as { subject: string }[];
      expect(listed.map((mail) => mail.subject)).toEqual(['Your invitation']);
    } finally {
      child.kill('SIGTERM');
    }
    const [code] = (await once(child, 'exit')) as [number];
    expect(code).toBe(0);
  });
});
