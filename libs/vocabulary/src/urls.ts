/** A base address without trailing slashes, ready for `${base}/path`. */
export function trimSlashes(url: string): string {
  return url.replace(/\/+$/, '');
}
