/**
 * A bounded map that forgets the least recently used entry past `max`, and entries older than
 * `ttlMs` when one is given. Small enough to keep here: per-user caches must stay bounded under
 * abuse (one entry per principal and upstream at most `max`).
 */
export class Lru<K, V> {
  readonly #map = new Map<K, { value: V; at: number }>();

  constructor(
    readonly max: number,
    readonly ttlMs: number = Infinity,
  ) {}

  get size(): number {
    return this.#map.size;
  }

  get(key: K, now = Date.now()): V | undefined {
    const entry = this.#map.get(key);
    if (!entry) return undefined;
    this.#map.delete(key);
    if (now - entry.at > this.ttlMs) return undefined;
    this.#map.set(key, entry);
    return entry.value;
  }

  set(key: K, value: V, now = Date.now()): void {
    this.#map.delete(key);
    this.#map.set(key, { value, at: now });
    while (this.#map.size > this.max) this.#map.delete(this.#map.keys().next().value as K);
  }

  delete(key: K): void {
    this.#map.delete(key);
  }

  clear(): void {
    this.#map.clear();
  }
}
