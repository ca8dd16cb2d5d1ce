/** What the dashboard needs to sign in, from the gateway's <meta name="sts-dashboard"> tag. */
export interface SignInSettings {
  readonly issuer: string;
  readonly clientId: string;
  readonly audience: string;
}

/** For `vite dev` without the gateway: the development identity provider's defaults. */
export const DEVELOPMENT_SETTINGS: SignInSettings = {
  issuer: 'http://127.0.0.1:4400',
  clientId: 'sts-dashboard',
  audience: 'https://api.security-telemetry.local',
};

/**
 * Parses the meta tag's content. Undefined content (no tag: `vite dev`) gives the development
 * settings; a tag that is present but unreadable is an error, never silently the defaults.
 */
export function parseSettings(content: string | null | undefined): SignInSettings {
  if (content === null || content === undefined) return DEVELOPMENT_SETTINGS;
  let parsed: unknown;
  try {
    parsed = JSON.parse(content);
  } catch {
    throw new Error('The sts-dashboard settings are not JSON');
  }
  const value = (parsed && typeof parsed === 'object' ? parsed : {}) as Record<string, unknown>;
  const field = (name: keyof SignInSettings): string => {
    const item = value[name];
    if (typeof item !== 'string' || !item) throw new Error(`The sts-dashboard settings lack ${name}`);
    return item;
  };
  return { issuer: field('issuer'), clientId: field('clientId'), audience: field('audience') };
}

/** Reads the settings from the page. */
export function readSettings(doc: Pick<Document, 'querySelector'>): SignInSettings {
  const meta = doc.querySelector<HTMLMetaElement>('meta[name=sts-dashboard]');
  return parseSettings(meta ? meta.content : undefined);
}

/** Where to go after signing in: a path of this app only (never another origin). */
export function safeReturnTo(value: unknown): string {
  if (typeof value !== 'string' || !value.startsWith('/') || value.startsWith('//')) return '/';
  if (value.startsWith('/auth/callback')) return '/';
  return value;
}
