import { isDevelopmentKeySet } from '@sts/vocabulary/development-provider';

/**
 * Whether the key set at `jwksUrl` is the development provider's: asked once, no redirect followed.
 * Undefined when it could not be told (no answer within `timeoutMs`, not 200, not JSON): the provider may
 * be away, and the gateway starts without it (the verifier then refuses such a key set when it comes).
 */
export async function probeDevelopmentProvider(
  jwksUrl: string,
  timeoutMs: number,
): Promise<boolean | undefined> {
  try {
    const response = await fetch(jwksUrl, {
      headers: { accept: 'application/json' },
      redirect: 'manual',
      signal: AbortSignal.timeout(timeoutMs),
    });
    if (response.status !== 200) {
      await response.body?.cancel();
      return undefined;
    }
    return isDevelopmentKeySet(await response.json());
  } catch {
    return undefined;
  }
}
