/**
 * The development identity provider (dev-idp, `@sts/dev-oidc`) signs in anyone as anyone, so a production
 * gateway must never trust its keys. It says what it is in its JWKS document, beside `keys`, in a member of
 * its own that a real provider never sends; the production gateway refuses to start when its key set carries
 * it, and never trusts a key set that does (docs/decisions.md, "Production refuses http peers and the
 * development identity provider").
 */
export const DEVELOPMENT_PROVIDER_MARKER = 'sts_development_provider';

/** Whether a JWKS document is the development provider's. */
export function isDevelopmentKeySet(document: unknown): boolean {
  return (
    typeof document === 'object' &&
    document !== null &&
    (document as Record<string, unknown>)[DEVELOPMENT_PROVIDER_MARKER] === true
  );
}
