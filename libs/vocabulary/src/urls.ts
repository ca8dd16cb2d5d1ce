/** A base address without trailing slashes, ready for `${base}/path`. */
export function trimSlashes(url: string): string {
  return url.replace(/\/+$/, '');
}

/** What stands for a hidden part of a masked URL. */
export const URL_MASK = '…';

/** A first path segment longer than this may be a token itself, and is hidden like the others. */
const SHOWN_SEGMENT_MAX_LENGTH = 16;

/**
 * A URL with every part that may be a bearer secret hidden, for readers who may know where something goes
 * but must not be able to call it: webhook addresses such as Slack's and Teams' are the credential itself,
 * and so is a `?token=`. What stays: the origin (scheme, host, port) and the first path segment when more
 * follow and it has at most 16 characters (it names the receiver's API: `services`, `webhookb2`). Every
 * other segment becomes `…`; each query parameter keeps its name and its value becomes `…` (a parameter
 * without `=` becomes `…`). User name, password and fragment are left out. A value that is not an absolute
 * URL with an origin becomes `…`.
 *
 * `https://hooks.slack.com/services/T0/B0/XXXX` → `https://hooks.slack.com/services/…/…/…`;
 * `https://alerts.example.com/hook?token=abc&channel=ops` → `https://alerts.example.com/…?token=…&channel=…`.
 */
export function maskedUrl(input: string): string {
  let url: URL;
  try {
    url = new URL(input);
  } catch {
    return URL_MASK;
  }
  // Only URLs of special schemes (http, https, ws, ftp…) have an origin; `null` names none.
  if (url.origin === 'null') return URL_MASK;
  const segments = url.pathname.split('/').slice(1);
  const path = segments
    .map((segment, index) => {
      if (segment === '') return '';
      const named =
        index === 0 &&
        segment.length <= SHOWN_SEGMENT_MAX_LENGTH &&
        segments.slice(1).some((later) => later !== '');
      return named ? segment : URL_MASK;
    })
    .join('/');
  const query = url.search
    .slice(1)
    .split('&')
    .filter((parameter) => parameter !== '')
    .map((parameter) => {
      const equals = parameter.indexOf('=');
      return equals < 0 ? URL_MASK : `${parameter.slice(0, equals)}=${URL_MASK}`;
    })
    .join('&');
  return `${url.origin}/${path}${query ? `?${query}` : ''}`;
}
