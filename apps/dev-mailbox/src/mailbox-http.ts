import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { ReceivedMail, SmtpSink } from '@sts/stand-ins/smtp-sink';
import { escapeHtml } from '@sts/vocabulary/html';

/**
 * The web view of the development mailbox. Mail content is untrusted: every value is HTML-escaped,
 * an HTML body is shown only inside a sandboxed iframe (no scripts, no same-origin access), and the
 * pages forbid scripts and remote content through Content-Security-Policy.
 */
export function createMailboxHttpServer(sink: SmtpSink): Server {
  return createServer((request, response) => {
    try {
      route(sink, request, response);
    } catch {
      send(response, 500, 'text/plain; charset=utf-8', 'internal error');
    }
  });
}

function route(sink: SmtpSink, request: IncomingMessage, response: ServerResponse): void {
  const path = new URL(request.url ?? '/', 'http://mailbox.local').pathname;
  const method = request.method ?? 'GET';

  if (path === '/api/messages' && method === 'DELETE') {
    sink.clear();
    response.writeHead(204).end();
    return;
  }
  if (method !== 'GET' && method !== 'HEAD') {
    send(response, 405, 'text/plain; charset=utf-8', 'method not allowed', { allow: 'GET, HEAD' });
    return;
  }

  if (path === '/') {
    sendHtml(response, 200, renderIndex(newestFirst(sink)));
    return;
  }
  if (path === '/api/messages') {
    sendJson(response, 200, newestFirst(sink).map(toJson));
    return;
  }

  const match = /^\/(api\/)?messages\/(\d+)(?:\/(raw|attachments\/(\d+)))?$/.exec(path);
  const mail = match ? sink.messages.find((candidate) => candidate.id === Number(match[2])) : undefined;
  if (!match || !mail) {
    if (path.startsWith('/api/')) sendJson(response, 404, { error: 'not found' });
    else
      sendHtml(
        response,
        404,
        page('Not found', '<p>No such message (only the newest are kept). <a href="/">Back</a></p>'),
      );
    return;
  }
  const [, api, , sub, attachmentIndex] = match;
  if (api) {
    if (sub) sendJson(response, 404, { error: 'not found' });
    else sendJson(response, 200, toJson(mail));
    return;
  }
  if (sub === 'raw') {
    send(response, 200, 'text/plain; charset=utf-8', mail.raw);
    return;
  }
  if (attachmentIndex !== undefined) {
    const attachment = mail.attachments[Number(attachmentIndex)];
    if (!attachment) {
      sendHtml(response, 404, page('Not found', '<p>No such attachment.</p>'));
      return;
    }
    // Always a download, never rendered in the mailbox's origin.
    send(response, 200, 'application/octet-stream', attachment.content, {
      'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(attachment.filename ?? `attachment-${attachmentIndex}`)}`,
    });
    return;
  }
  sendHtml(response, 200, renderMessage(mail));
}

function newestFirst(sink: SmtpSink): ReceivedMail[] {
  return [...sink.messages].reverse();
}

export function toJson(mail: ReceivedMail) {
  return {
    id: mail.id,
    received_at: mail.receivedAt.toISOString(),
    envelope: mail.envelope,
    from: mail.from,
    to: mail.to,
    cc: mail.cc,
    subject: mail.subject,
    date: mail.date ?? null,
    message_id: mail.messageId ?? null,
    text: mail.text ?? null,
    html: mail.html ?? null,
    attachments: mail.attachments.map((attachment) => ({
      filename: attachment.filename ?? null,
      content_type: attachment.contentType,
      size: attachment.content.length,
    })),
  };
}

// --- HTML ----------------------------------------------------------------------------------------

/** Escaped text with http(s) links made clickable (opened in a new tab, without referrer). */
function linkify(text: string): string {
  let html = '';
  let last = 0;
  for (const match of text.matchAll(/https?:\/\/[^\s<>"']+/g)) {
    const url = match[0];
    html += escapeHtml(text.slice(last, match.index));
    html += `<a href="${escapeHtml(url)}" target="_blank" rel="noopener noreferrer">${escapeHtml(url)}</a>`;
    last = match.index + url.length;
  }
  return html + escapeHtml(text.slice(last));
}

const STYLE = `
body{font:14px/1.45 system-ui,sans-serif;margin:2rem auto;max-width:70rem;padding:0 1rem;color:#222}
table{border-collapse:collapse;width:100%}td,th{border-bottom:1px solid #ddd;padding:.4rem .5rem;text-align:left;vertical-align:top}
th{background:#f4f4f4}pre{background:#f7f7f7;border:1px solid #ddd;padding:.75rem;white-space:pre-wrap;word-break:break-word}
iframe{width:100%;height:32rem;border:1px solid #ddd;background:#fff}.muted{color:#777}dt{font-weight:600}dd{margin:0 0 .4rem 0}
`;

function page(title: string, body: string): string {
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${escapeHtml(title)}</title>
<meta name="viewport" content="width=device-width, initial-scale=1"><style>${STYLE}</style></head>
<body>${body}</body></html>`;
}

function renderIndex(mails: ReceivedMail[]): string {
  const rows = mails
    .map(
      (
        mail,
      ) => `<tr><td>${mail.id}</td><td><a href="/messages/${mail.id}">${escapeHtml(mail.subject || '(no subject)')}</a></td>
<td>${escapeHtml(mail.to || mail.envelope.to.join(', '))}</td><td>${escapeHtml(mail.receivedAt.toISOString())}</td></tr>`,
    )
    .join('\n');
  const table = mails.length
    ? `<table><thead><tr><th>#</th><th>Subject</th><th>To</th><th>Received</th></tr></thead><tbody>${rows}</tbody></table>`
    : '<p class="muted">No mail yet. Mail sent to this mailbox over SMTP shows up here.</p>';
  return page(
    'Development mailbox',
    `<h1>Development mailbox</h1><p class="muted">Newest first. <a href="/">Refresh</a> · <a href="/api/messages">JSON</a></p>${table}`,
  );
}

function renderMessage(mail: ReceivedMail): string {
  const fields: [string, string][] = [
    ['Subject', mail.subject || '(no subject)'],
    ['From', mail.from],
    ['To', mail.to],
    ['Cc', mail.cc],
    ['Date', mail.date ?? ''],
    ['Received', mail.receivedAt.toISOString()],
    ['Envelope', `from ${mail.envelope.from || '<>'} to ${mail.envelope.to.join(', ')}`],
  ];
  const header = fields
    .filter(([, value]) => value)
    .map(([name, value]) => `<dt>${name}</dt><dd>${escapeHtml(value)}</dd>`)
    .join('');
  const sections = [`<dl>${header}</dl>`];
  if (mail.text !== undefined) sections.push(`<h2>Text</h2><pre>${linkify(mail.text)}</pre>`);
  if (mail.html !== undefined) {
    // sandbox without allow-scripts/allow-same-origin: the mail's HTML runs no code and cannot
    // reach this page; <base target=_blank> plus allow-popups lets its links open in a new tab.
    const srcdoc = `<base target="_blank">${mail.html}`;
    sections.push(
      `<h2>HTML</h2><iframe sandbox="allow-popups allow-popups-to-escape-sandbox" referrerpolicy="no-referrer" srcdoc="${escapeHtml(srcdoc)}"></iframe>`,
      `<details><summary>HTML source</summary><pre>${escapeHtml(mail.html)}</pre></details>`,
    );
  }
  if (mail.attachments.length) {
    const items = mail.attachments
      .map(
        (attachment, index) =>
          `<li><a href="/messages/${mail.id}/attachments/${index}">${escapeHtml(attachment.filename ?? `attachment ${index + 1}`)}</a> <span class="muted">${escapeHtml(attachment.contentType)}, ${attachment.content.length} bytes</span></li>`,
      )
      .join('');
    sections.push(`<h2>Attachments</h2><ul>${items}</ul>`);
  }
  sections.push(`<p><a href="/messages/${mail.id}/raw">Raw message</a> · <a href="/">All mail</a></p>`);
  return page(mail.subject || '(no subject)', `<p><a href="/">← All mail</a></p>${sections.join('\n')}`);
}

// --- responses -----------------------------------------------------------------------------------

const SECURITY_HEADERS = {
  // No scripts, no remote loads; inline styles for our page and for mail HTML in the iframe.
  'content-security-policy':
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-src 'self'; frame-ancestors 'none'; form-action 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

function send(
  response: ServerResponse,
  status: number,
  contentType: string,
  body: string | Buffer,
  headers: Record<string, string> = {},
): void {
  const payload = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  response.writeHead(status, {
    ...SECURITY_HEADERS,
    ...headers,
    'content-type': contentType,
    'content-length': String(payload.length),
  });
  response.end(response.req.method === 'HEAD' ? undefined : payload);
}

function sendHtml(response: ServerResponse, status: number, html: string): void {
  send(response, status, 'text/html; charset=utf-8', html);
}

function sendJson(response: ServerResponse, status: number, value: unknown): void {
  send(response, status, 'application/json; charset=utf-8', JSON.stringify(value));
}
