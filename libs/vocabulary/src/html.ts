/**
 * Escapes text for HTML element content and double- or single-quoted attribute values: the one way
 * every page and e-mail we render (e-mails, the development peers' pages, the dashboard's settings tag)
 * puts untrusted text into HTML.
 */
export function escapeHtml(value: string): string {
  return value
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}
