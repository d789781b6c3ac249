import type { DevIdpStore } from './store/index.js';

/**
 * oidc-provider's storage adapter contract (one instance per model name) over SQLite, so the
 * development IdP keeps its registered clients, sessions and grants across restarts.
 */
export function sqliteAdapter(store: DevIdpStore) {
  return class SqliteAdapter {
    constructor(private readonly model: string) {}

    async upsert(id: string, payload: Record<string, unknown>, expiresIn?: number): Promise<void> {
      store.upsert(this.model, id, payload, expiresIn);
    }

    async find(id: string): Promise<Record<string, unknown> | undefined> {
      const r = store.find(this.model, id);
      return r && { ...r.payload, ...(r.consumed ? { consumed: true } : {}) };
    }

    async findByUid(uid: string): Promise<Record<string, unknown> | undefined> {
      return store.findByUid(this.model, uid)?.payload;
    }

    async findByUserCode(userCode: string): Promise<Record<string, unknown> | undefined> {
      return store.findByUserCode(this.model, userCode)?.payload;
    }

    async consume(id: string): Promise<void> {
      store.consume(this.model, id);
    }

    async destroy(id: string): Promise<void> {
      store.destroy(this.model, id);
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      store.revokeByGrantId(this.model, grantId);
    }
  };
}
