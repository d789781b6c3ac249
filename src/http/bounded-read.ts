/**
 * The body of `response` read into memory, or `undefined` (the stream cancelled) as soon as it is
 * over `maxBytes`: the one bounded read for what an upstream, its authorization server or a provider sends.
 */
export async function readBounded(response: Response, maxBytes: number): Promise<Buffer<ArrayBuffer> | undefined> {
  const reader = response.body?.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  if (reader) {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > maxBytes) {
        await reader.cancel().catch(() => undefined);
        return undefined;
      }
      chunks.push(value);
    }
  }
  return Buffer.concat(chunks);
}
