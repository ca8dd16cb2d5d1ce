import type { AddressInfo } from 'node:net';
import PostalMime, { decodeWords, type Address } from 'postal-mime';
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';

/**
 * A local SMTP server that accepts every message and keeps it in memory, parsed by postal-mime
 * (multipart, quoted-printable, base64, encoded words, RFC 2231 parameters, charsets).
 * Used by tests and, through `apps/dev-mailbox`, in development. No TLS, no authentication.
 */

export interface MailAddress {
  name: string;
  address: string;
}

export interface MailAttachment {
  filename: string | undefined;
  contentType: string;
  content: Buffer;
}

export interface ParsedMail {
  /** Header names lower-cased; values unfolded and decoded; the first occurrence of each. */
  headers: Record<string, string>;
  subject: string;
  /** Decoded header values, e.g. `Zoë <zoe@example.com>`. */
  from: string;
  to: string;
  cc: string;
  /** Addresses of the `To` and `Cc` headers. */
  recipients: MailAddress[];
  messageId: string | undefined;
  date: string | undefined;
  /** The decoded text/plain and text/html bodies (line breaks as `\n`), if the mail has them. */
  text: string | undefined;
  html: string | undefined;
  attachments: MailAttachment[];
}

export interface ReceivedMail extends ParsedMail {
  /** 1, 2, 3… in order of arrival at this sink. */
  id: number;
  receivedAt: Date;
  /** The SMTP envelope (MAIL FROM / RCPT TO), which may differ from the headers (Bcc). */
  envelope: { from: string; to: string[] };
  /** The message as received (after SMTP dot-unstuffing). */
  raw: Buffer;
}

export interface SmtpSinkOptions {
  /** 0 (default) picks a free port. */
  port?: number;
  host?: string;
  /** Keep only the newest this many messages (default: all). */
  maxMessages?: number;
  /** Largest accepted message (default 25 MB). */
  maxMessageBytes?: number;
  /** Called for every received message, after it was stored. */
  onMail?: (mail: ReceivedMail) => void;
}

export interface SmtpSink {
  readonly host: string;
  readonly port: number;
  /** `smtp://host:port`, for `SMTP_URL`. */
  readonly url: string;
  /** Received messages, oldest first (the same array throughout). */
  readonly messages: ReceivedMail[];
  /** The first message (already received or still to come) that matches `predicate`. */
  waitFor(predicate: (mail: ReceivedMail) => boolean, timeoutMs?: number): Promise<ReceivedMail>;
  clear(): void;
  close(): Promise<void>;
}

interface Waiter {
  predicate: (mail: ReceivedMail) => boolean;
  resolve: (mail: ReceivedMail) => void;
  reject: (error: Error) => void;
  timer: NodeJS.Timeout;
}

export async function startSmtpSink(options: SmtpSinkOptions = {}): Promise<SmtpSink> {
  const host = options.host ?? '127.0.0.1';
  const maxMessageBytes = options.maxMessageBytes ?? 25 * 1024 * 1024;
  const messages: ReceivedMail[] = [];
  const waiters = new Set<Waiter>();
  let nextId = 1;

  function store(raw: Buffer, parsed: ParsedMail, session: SMTPServerSession): void {
    const { mailFrom, rcptTo } = session.envelope;
    const mail: ReceivedMail = {
      id: nextId++,
      receivedAt: new Date(),
      envelope: { from: mailFrom ? mailFrom.address : '', to: rcptTo.map((recipient) => recipient.address) },
      raw,
      ...parsed,
    };
    messages.push(mail);
    if (options.maxMessages !== undefined && messages.length > options.maxMessages) {
      messages.splice(0, messages.length - options.maxMessages);
    }
    for (const waiter of waiters) {
      if (matches(waiter.predicate, mail)) {
        waiters.delete(waiter);
        clearTimeout(waiter.timer);
        waiter.resolve(mail);
      }
    }
    options.onMail?.(mail);
  }

  const server = new SMTPServer({
    secure: false,
    disabledCommands: ['STARTTLS', 'AUTH'],
    authOptional: true,
    logger: false,
    banner: 'sts smtp sink',
    size: maxMessageBytes,
    closeTimeout: 1_000,
    onData(
      stream: SMTPServerDataStream,
      session: SMTPServerSession,
      callback: (error?: Error | null) => void,
    ) {
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('error', (error: Error) => callback(error));
      stream.on('end', () => {
        if (stream.sizeExceeded) {
          callback(
            Object.assign(new Error('message exceeds fixed maximum message size'), { responseCode: 552 }),
          );
          return;
        }
        const raw = Buffer.concat(chunks);
        parseMail(raw).then(
          (parsed) => {
            store(raw, parsed, session);
            callback();
          },
          (error: unknown) => callback(error instanceof Error ? error : new Error('unparseable message')),
        );
      });
    },
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  // A failing client connection must not bring the sink (or the test process) down.
  server.on('error', () => undefined);
  const { port } = server.server.address() as AddressInfo;

  return {
    host,
    port,
    url: `smtp://${host}:${port}`,
    messages,
    waitFor(predicate, timeoutMs = 5_000) {
      const found = messages.find((mail) => matches(predicate, mail));
      if (found) return Promise.resolve(found);
      return new Promise<ReceivedMail>((resolve, reject) => {
        const waiter: Waiter = {
          predicate,
          resolve,
          reject,
          timer: setTimeout(() => {
            waiters.delete(waiter);
            const seen = messages.map(
              (mail) => `#${mail.id} to ${mail.envelope.to.join(', ')}: ${mail.subject}`,
            );
            reject(new Error(`no matching mail within ${timeoutMs} ms; received: [${seen.join('; ')}]`));
          }, timeoutMs),
        };
        waiters.add(waiter);
      });
    },
    clear() {
      messages.length = 0;
    },
    close() {
      for (const waiter of waiters) {
        clearTimeout(waiter.timer);
        waiter.reject(new Error('SMTP sink closed'));
      }
      waiters.clear();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function matches(predicate: (mail: ReceivedMail) => boolean, mail: ReceivedMail): boolean {
  try {
    return predicate(mail);
  } catch {
    return false;
  }
}

/** The message as the sink keeps it: postal-mime's parse, in the shape tests read. */
export async function parseMail(raw: Buffer): Promise<ParsedMail> {
  const email = await PostalMime.parse(raw, { attachmentEncoding: 'arraybuffer' });
  const headers: Record<string, string> = {};
  for (const { key, value } of email.headers) headers[key] ??= decodeWords(value);
  const to = email.to ?? [];
  const cc = email.cc ?? [];
  return {
    headers,
    subject: email.subject ?? '',
    from: email.from ? formatAddresses([email.from]) : '',
    to: formatAddresses(to),
    cc: formatAddresses(cc),
    recipients: mailboxes([...to, ...cc]),
    messageId: email.messageId,
    date: headers['date'],
    text: email.text === undefined ? undefined : normalizeBody(email.text),
    html: email.html === undefined ? undefined : normalizeBody(email.html),
    attachments: email.attachments.map((attachment) => ({
      filename: attachment.filename ?? undefined,
      contentType: attachment.mimeType,
      content: Buffer.from(attachment.content as ArrayBuffer),
    })),
  };
}

function mailboxes(addresses: Address[]): MailAddress[] {
  return addresses.flatMap((address) =>
    address.group
      ? address.group.map(({ name, address: mailbox }) => ({ name, address: mailbox }))
      : [{ name: address.name, address: address.address }],
  );
}

function formatAddresses(addresses: Address[]): string {
  return mailboxes(addresses)
    .map(({ name, address }) => (name ? `${name} <${address}>` : address))
    .join(', ');
}

/** Line breaks as `\n`, without the trailing one a MIME body ends with. */
function normalizeBody(body: string): string {
  return body.replace(/\r\n?/g, '\n').replace(/\n$/, '');
}
