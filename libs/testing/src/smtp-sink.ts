import type { AddressInfo } from 'node:net';
import { SMTPServer, type SMTPServerDataStream, type SMTPServerSession } from 'smtp-server';

/**
 * A local SMTP server that accepts every message and keeps it in memory, with a small MIME parser
 * (the subset that nodemailer and ordinary mail clients produce: multipart, quoted-printable,
 * base64, RFC 2047 encoded words, RFC 2231 parameters, any charset Node's TextDecoder knows).
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

  function store(raw: Buffer, session: SMTPServerSession): void {
    const { mailFrom, rcptTo } = session.envelope;
    const mail: ReceivedMail = {
      id: nextId++,
      receivedAt: new Date(),
      envelope: { from: mailFrom ? mailFrom.address : '', to: rcptTo.map((recipient) => recipient.address) },
      raw,
      ...parseMail(raw),
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
        store(Buffer.concat(chunks), session);
        callback();
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

// ---------------------------------------------------------------------------------------------
// MIME parsing. Works on "binary" strings (one char per byte, latin1) until a part is decoded with
// its charset, so that 8-bit content and base64/quoted-printable bytes survive intact.

interface Entity {
  headers: [name: string, value: string][];
  body: string;
}

/** Parses a raw RFC 5322 message. Lenient: a malformed message yields what could be read. */
export function parseMail(raw: Buffer): ParsedMail {
  const root = parseEntity(raw.toString('latin1'));
  // SMTP ends every message with a line break; it belongs to the transport, not to a text body
  // (just as the line break before a multipart delimiter belongs to the delimiter).
  root.body = root.body.replace(/\r?\n$/, '');
  const headers: Record<string, string> = {};
  for (const [name, value] of root.headers) headers[name] ??= decodeHeaderValue(value);
  // Addresses are split before decoding: a decoded display name may contain a comma.
  const rawRecipients = ['to', 'cc'].map((name) => header(root, name) ?? '');

  const parsed: ParsedMail = {
    headers,
    subject: headers.subject ?? '',
    from: headers.from ?? '',
    to: headers.to ?? '',
    cc: headers.cc ?? '',
    recipients: rawRecipients.flatMap((value) => parseAddressList(value)),
    messageId: headers['message-id'],
    date: headers.date,
    text: undefined,
    html: undefined,
    attachments: [],
  };
  try {
    collectParts(root, parsed, 0);
  } catch {
    // Keep the headers of a message whose body we could not make sense of.
  }
  return parsed;
}

function parseEntity(source: string): Entity {
  let headerEnd: number;
  let bodyStart: number;
  if (/^\r?\n/.test(source)) {
    headerEnd = 0;
    bodyStart = source.startsWith('\r\n') ? 2 : 1;
  } else {
    const match = /\r?\n\r?\n/.exec(source);
    headerEnd = match ? match.index : source.length;
    bodyStart = match ? match.index + match[0].length : source.length;
  }
  const headers: [string, string][] = [];
  // Unfold: a line break followed by white space continues the previous line.
  const unfolded = source.slice(0, headerEnd).replace(/\r?\n(?=[ \t])/g, '');
  for (const line of unfolded.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon <= 0) continue;
    headers.push([line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()]);
  }
  return { headers, body: source.slice(bodyStart) };
}

function header(entity: Entity, name: string): string | undefined {
  return entity.headers.find(([key]) => key === name)?.[1];
}

function collectParts(entity: Entity, into: ParsedMail, depth: number): void {
  const contentType = parseHeaderWithParams(header(entity, 'content-type') ?? 'text/plain; charset=us-ascii');
  const mimeType = contentType.value.toLowerCase() || 'text/plain';
  const boundary = contentType.params.boundary;

  if (mimeType.startsWith('multipart/') && boundary && depth < 20) {
    for (const part of splitMultipart(entity.body, boundary))
      collectParts(parseEntity(part), into, depth + 1);
    return;
  }

  const disposition = parseHeaderWithParams(header(entity, 'content-disposition') ?? '');
  const filename = disposition.params.filename ?? contentType.params.name;
  const content = decodeTransferEncoding(entity.body, header(entity, 'content-transfer-encoding'));
  const isAttachment = disposition.value.toLowerCase() === 'attachment' || filename !== undefined;

  if (!isAttachment && (mimeType === 'text/plain' || mimeType === 'text/html')) {
    const text = decodeCharset(content, contentType.params.charset).replace(/\r\n/g, '\n');
    if (mimeType === 'text/plain') into.text = into.text === undefined ? text : `${into.text}\n${text}`;
    else into.html ??= text;
    return;
  }
  into.attachments.push({ filename, contentType: mimeType, content });
}

/** The body parts between `--boundary` delimiter lines (RFC 2046 section 5.1.1). */
function splitMultipart(body: string, boundary: string): string[] {
  const delimiter = `--${boundary}`;
  const parts: string[] = [];
  let current: string[] | undefined;
  for (const line of body.split(/\r?\n/)) {
    const trimmed = line.trimEnd(); // transport padding may follow a delimiter
    if (trimmed === delimiter || trimmed === `${delimiter}--`) {
      if (current) parts.push(current.join('\r\n'));
      if (trimmed !== delimiter) return parts; // the close delimiter; the epilogue is ignored
      current = [];
      continue;
    }
    current?.push(line); // lines before the first delimiter are the preamble
  }
  if (current) parts.push(current.join('\r\n')); // no close delimiter: take what arrived
  return parts;
}

function decodeTransferEncoding(body: string, encoding: string | undefined): Buffer {
  switch ((encoding ?? '').trim().toLowerCase()) {
    case 'base64':
      return Buffer.from(body.replace(/[^A-Za-z0-9+/=]/g, ''), 'base64');
    case 'quoted-printable':
      return decodeQuotedPrintable(body);
    default:
      return Buffer.from(body, 'latin1');
  }
}

export function decodeQuotedPrintable(input: string): Buffer {
  return decodeHexEscapes(
    input
      .replace(/[ \t]+(?=\r?\n|$)/g, '') // trailing white space was added in transit (RFC 2045 6.7)
      .replace(/=(\r?\n|$)/g, ''), // soft line breaks
  );
}

/** `=XX` → the byte XX; every other character → its (latin1) byte. */
function decodeHexEscapes(text: string): Buffer {
  const bytes = Buffer.alloc(text.length);
  let length = 0;
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code === 0x3d && /^[0-9A-Fa-f]{2}$/.test(text.slice(i + 1, i + 3))) {
      bytes[length++] = parseInt(text.slice(i + 1, i + 3), 16);
      i += 2;
    } else {
      bytes[length++] = code & 0xff;
    }
  }
  return bytes.subarray(0, length);
}

function decodeCharset(bytes: Uint8Array, charset: string | undefined): string {
  const label = (charset ?? 'utf-8').trim().toLowerCase();
  try {
    // us-ascii is decoded as UTF-8: 8-bit bytes in a mislabelled part are then still readable.
    return new TextDecoder(label === 'us-ascii' || label === 'ascii' ? 'utf-8' : label).decode(bytes);
  } catch {
    return new TextDecoder('utf-8').decode(bytes);
  }
}

const ENCODED_WORD = /=\?([^?\s]+)\?([QqBb])\?([^?\s]*)\?=/g;

/** Decodes RFC 2047 encoded words (`=?UTF-8?Q?Gr=C3=BC=C3=9Fe?=`) and raw UTF-8 in a header value. */
export function decodeHeaderValue(value: string): string {
  // Raw 8-bit header bytes (RFC 6532) are UTF-8.
  const text = Buffer.from(value, 'latin1').toString('utf8');
  let result = '';
  let pending: { charset: string; bytes: Buffer[] } | undefined;
  const flush = () => {
    if (pending) result += decodeCharset(Buffer.concat(pending.bytes), pending.charset);
    pending = undefined;
  };
  let last = 0;
  for (const match of text.matchAll(ENCODED_WORD)) {
    const between = text.slice(last, match.index);
    // White space between two encoded words is not part of the text.
    if (!(pending && /^\s*$/.test(between))) {
      flush();
      result += between;
    }
    const charset = (match[1] ?? 'utf-8').split('*')[0] ?? 'utf-8'; // drop an RFC 2231 language tag
    const data = match[3] ?? '';
    const bytes =
      match[2]?.toUpperCase() === 'B'
        ? Buffer.from(data, 'base64')
        : decodeHexEscapes(data.replace(/_/g, ' '));
    if (pending && pending.charset.toLowerCase() !== charset.toLowerCase()) flush();
    pending ??= { charset, bytes: [] };
    pending.bytes.push(bytes);
    last = match.index + match[0].length;
  }
  flush();
  return result + text.slice(last);
}

/** `text/plain; charset="utf-8"` → value and lower-cased parameters, with RFC 2231 values decoded. */
function parseHeaderWithParams(value: string): { value: string; params: Record<string, string> } {
  const [head = '', ...rest] = splitOutsideQuotes(value, ';');
  const simple: Record<string, string> = {};
  const extended = new Map<string, { index: number; encoded: boolean; value: string }[]>();
  for (const segment of rest) {
    const eq = segment.indexOf('=');
    if (eq <= 0) continue;
    const key = segment.slice(0, eq).trim().toLowerCase();
    let raw = segment.slice(eq + 1).trim();
    if (raw.startsWith('"') && raw.endsWith('"') && raw.length >= 2)
      raw = raw.slice(1, -1).replace(/\\(.)/g, '$1');
    const rfc2231 = /^([^*]+)\*(?:(\d+)\*?|)$/.exec(key);
    if (rfc2231?.[1] && key.includes('*')) {
      const name = rfc2231[1];
      const list = extended.get(name) ?? [];
      list.push({ index: Number(rfc2231[2] ?? 0), encoded: key.endsWith('*'), value: raw });
      extended.set(name, list);
    } else {
      simple[key] = decodeHeaderValue(raw);
    }
  }
  for (const [name, pieces] of extended) {
    pieces.sort((a, b) => a.index - b.index);
    let charset = 'utf-8';
    const bytes: Buffer[] = [];
    for (const piece of pieces) {
      let data = piece.value;
      if (piece.encoded && piece.index === 0) {
        const quote = /^([^']*)'[^']*'/.exec(data);
        if (quote) {
          charset = quote[1] || charset;
          data = data.slice(quote[0].length);
        }
      }
      bytes.push(piece.encoded ? percentDecode(data) : Buffer.from(data, 'latin1'));
    }
    simple[name] = decodeCharset(Buffer.concat(bytes), charset);
  }
  return { value: head.trim(), params: simple };
}

function percentDecode(value: string): Buffer {
  return decodeHexEscapes(value.replace(/=/g, '=3D').replace(/%([0-9A-Fa-f]{2})/g, '=$1'));
}

function splitOutsideQuotes(value: string, separator: string): string[] {
  const parts: string[] = [];
  let current = '';
  let quoted = false;
  let angle = 0;
  for (let i = 0; i < value.length; i++) {
    const char = value[i] ?? '';
    if (char === '\\' && quoted) {
      current += char + (value[i + 1] ?? '');
      i++;
      continue;
    }
    if (char === '"') quoted = !quoted;
    else if (!quoted && char === '<') angle++;
    else if (!quoted && char === '>') angle = Math.max(0, angle - 1);
    if (char === separator && !quoted && angle === 0) {
      parts.push(current);
      current = '';
    } else {
      current += char;
    }
  }
  parts.push(current);
  return parts;
}

/**
 * `"Doe, Jane" <jane@example.com>, bob@example.com` → names and addresses (groups flattened).
 * Takes the raw header value; display names are decoded.
 */
export function parseAddressList(value: string): MailAddress[] {
  const addresses: MailAddress[] = [];
  for (let item of splitOutsideQuotes(value, ',')) {
    // A group (`team: a@x, b@y;`) contributes its members.
    const group = /^[^"<]*:(.*)$/.exec(item);
    if (group) item = group[1] ?? '';
    item = item.replace(/;\s*$/, '').trim();
    if (!item) continue;
    const angle = /^(.*)<([^>]*)>\s*$/.exec(item);
    if (angle) {
      const quoted = (angle[1] ?? '')
        .trim()
        .replace(/^"(.*)"$/, '$1')
        .replace(/\\(.)/g, '$1');
      const name = decodeHeaderValue(quoted);
      addresses.push({ name, address: (angle[2] ?? '').trim() });
    } else {
      addresses.push({ name: '', address: item });
    }
  }
  return addresses;
}
