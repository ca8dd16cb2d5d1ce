/** A class of errors, abstract ones included (`expect(…).toBeInstanceOf` takes the same). */
type ErrorClass<E> = abstract new (...args: never[]) => E;

/**
 * The error a call failed with: a promise that rejects, or a function that throws or rejects. The test
 * fails if it did not fail, and, given a class, if the error is not one of it (the error comes back
 * typed, so the test can read its fields).
 */
export async function failureOf(run: Promise<unknown> | (() => unknown)): Promise<unknown>;
export async function failureOf<E>(run: Promise<unknown> | (() => unknown), type: ErrorClass<E>): Promise<E>;
export async function failureOf<E>(
  run: Promise<unknown> | (() => unknown),
  type?: ErrorClass<E>,
): Promise<unknown> {
  try {
    await (typeof run === 'function' ? run() : run);
  } catch (error) {
    if (type) expect(error).toBeInstanceOf(type);
    return error;
  }
  throw new Error('expected a failure, and the call succeeded');
}
