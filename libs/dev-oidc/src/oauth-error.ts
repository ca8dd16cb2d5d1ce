/** An OAuth 2.0 error answer (RFC 6749 section 5.2): HTTP status, `error` code and description. */
export class OAuthError extends Error {
  constructor(
    readonly status: number,
    readonly error: string,
    readonly description: string,
  ) {
    super(description);
  }
}
