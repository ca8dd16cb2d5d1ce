import { randomBytes } from 'node:crypto';
import type { SignedInUser } from './authorization-code-flow';
import { escapeHtml } from '@sts/vocabulary/html';

/**
 * The HTML of the browser sign-in: the form, error pages and the signed-out page. No scripts at all; the
 * one <style> carries a per-response nonce, and the Content-Security-Policy allows nothing else.
 */

export interface HtmlPage {
  readonly html: string;
  readonly contentSecurityPolicy: string;
}

export interface SignInForm {
  readonly requestId: string;
  readonly clientId: string;
  /** Origin of the redirect URI the form's answer goes to. */
  readonly redirectOrigin: string;
  readonly recent: readonly SignedInUser[];
  readonly error?: string;
  readonly email?: string;
  readonly name?: string;
}

export function signInPage(form: SignInForm): HtmlPage {
  const recent =
    form.recent.length === 0
      ? ''
      : `<section>
<h2>Recently signed in</h2>
<ul>
${form.recent
  .map(
    (user) =>
      `<li><button type="submit" name="recent" value="${escapeHtml(user.email)}" formnovalidate>` +
      `${escapeHtml(user.name)} <span>&lt;${escapeHtml(user.email)}&gt;</span></button></li>`,
  )
  .join('\n')}
</ul>
</section>`;
  return page(
    'Sign in',
    `<h1>Sign in</h1>
<p>to <strong>${escapeHtml(form.clientId)}</strong>. Development identity provider: any e-mail signs in, no password.</p>
${form.error ? `<p class="error" role="alert">${escapeHtml(form.error)}</p>` : ''}
<form method="post" action="authorize">
<input type="hidden" name="request_id" value="${escapeHtml(form.requestId)}">
<label>E-mail <input type="email" name="email" required maxlength="254" autocomplete="email" autofocus value="${escapeHtml(form.email ?? '')}"></label>
<label>Name <input type="text" name="name" maxlength="200" autocomplete="name" placeholder="the e-mail's local part" value="${escapeHtml(form.name ?? '')}"></label>
<button type="submit">Sign in</button>
${recent}
<button type="submit" name="cancel" value="1" formnovalidate class="secondary">Cancel</button>
</form>`,
    // Browsers apply form-action to the redirect that answers the form, too: the application must be allowed.
    `'self' ${form.redirectOrigin}`,
  );
}

export function messagePage(title: string, message: string): HtmlPage {
  return page(title, `<h1>${escapeHtml(title)}</h1>\n<p>${escapeHtml(message)}</p>`, "'none'");
}

function page(title: string, body: string, formAction: string): HtmlPage {
  const nonce = randomBytes(16).toString('base64');
  return {
    contentSecurityPolicy: [
      "default-src 'none'",
      `style-src 'nonce-${nonce}'`,
      `form-action ${formAction}`,
      "frame-ancestors 'none'",
      "base-uri 'none'",
    ].join('; '),
    html: `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · dev-idp</title>
<style nonce="${nonce}">${STYLE}</style>
</head>
<body>
<main>
${body}
</main>
</body>
</html>
`,
  };
}

const STYLE = `
body { font: 16px/1.5 system-ui, sans-serif; margin: 0; background: #f4f5f7; color: #1d2330; }
main { max-width: 26rem; margin: 4rem auto; padding: 2rem; background: #fff; border-radius: 8px; }
h1 { margin-top: 0; font-size: 1.5rem; }
h2 { font-size: 1rem; margin: 1.5rem 0 0.5rem; }
label { display: block; margin: 0.75rem 0; }
input { display: block; width: 100%; box-sizing: border-box; padding: 0.5rem; font: inherit; }
button { font: inherit; padding: 0.5rem 1rem; margin-top: 0.5rem; cursor: pointer; }
ul { list-style: none; padding: 0; margin: 0; }
li button { width: 100%; text-align: left; background: none; border: 1px solid #ccd; border-radius: 4px; }
li span { color: #667; }
.secondary { background: none; border: none; color: #667; }
.error { color: #a01818; }
`;
