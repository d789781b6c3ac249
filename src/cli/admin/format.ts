import type { AuditRow, ConnectionListing, StoreStats, WebhookStats } from '../../store/index.js';
import { connectionEventData } from '../../events/index.js';
import { OUT } from './messages.js';

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** `connections list --json`: exactly these fields, never a token. */
export function connectionJson(row: ConnectionListing) {
  return {
    ...connectionEventData(row),
    status: row.status,
    createdAt: iso(row.created_at),
    lastUsedAt: iso(row.last_used_at),
  };
}

/** One line of `audit export`. */
export function auditLine(row: AuditRow): string {
  return JSON.stringify({
    id: row.id,
    at: iso(row.at),
    event: row.event,
    issuer: row.issuer,
    subject: row.subject,
    provider: row.provider,
    detail: row.detail,
  });
}

/** Control, format (bidi) and other invisible characters would move a terminal's cursor or reorder a line. */
function shown(value: string): string {
  return value.replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, '\uFFFD');
}

const COLUMNS = ['ISSUER', 'SUBJECT', 'PROVIDER', 'LOGIN', 'STATUS', 'SCOPES', 'CREATED', 'LAST USED'] as const;

/**
 * The readable `connections list`, written page by page: the column widths come from the header
 * and the first page (a later, longer value only pushes its own line wider).
 */
export function connectionsTable(): { rows(rows: ConnectionListing[]): string } {
  let widths: number[] | undefined;
  const cells = (row: ConnectionListing): string[] => {
    const json = connectionJson(row);
    return [
      json.issuer,
      json.subject,
      json.provider,
      json.login,
      json.status,
      json.scopes.join(',') || '-',
      json.createdAt?.replace(/\.\d{3}Z$/, 'Z') ?? '-',
      json.lastUsedAt?.replace(/\.\d{3}Z$/, 'Z') ?? 'never',
    ].map(shown);
  };
  const line = (values: readonly string[]) =>
    values
      .map((v, i) => (i === values.length - 1 ? v : v.padEnd(widths![i]!)))
      .join('  ')
      .trimEnd() + '\n';
  return {
    rows(rows) {
      const body = rows.map(cells);
      let out = '';
      if (!widths) {
        widths = COLUMNS.map((header, i) => Math.max(header.length, ...body.map((r) => r[i]!.length)));
        out += line(COLUMNS);
      }
      return out + body.map(line).join('');
    },
  };
}

/** @param webhooks the outbox's counts, shown only where webhook endpoints hold events. */
export function statsJson(stats: StoreStats, webhooks?: WebhookStats) {
  return {
    connections: stats.connections.map((c) => ({ provider: c.provider, status: c.status, count: c.n })),
    pendingConnections: { open: stats.pending.open, authorizing: stats.pending.authorizing },
    refreshFailuresLastDay: {
      total: stats.refreshFailures.reduce((sum, r) => sum + r.n, 0),
      byProvider: stats.refreshFailures.map((r) => ({ provider: r.provider, count: r.n })),
    },
    ...(webhooks && webhooks.endpoints.length > 0
      ? {
          webhooks: {
            endpoints: webhooks.endpoints,
            oldestPendingAt: webhooks.oldestPendingAt === null ? null : new Date(webhooks.oldestPendingAt).toISOString(),
          },
        }
      : {}),
  };
}

export function statsText(stats: StoreStats, webhooks?: WebhookStats): string {
  const json = statsJson(stats, webhooks);
  const width = Math.max(8, ...json.connections.map((c) => c.provider.length));
  const rows = json.connections.map((c) => `  ${shown(c.provider).padEnd(width)}  ${c.status.padEnd(15)}  ${String(c.count).padStart(6)}`);
  return (
    [
      OUT.statsConnections,
      ...(rows.length
        ? [`  ${'PROVIDER'.padEnd(width)}  ${'STATUS'.padEnd(15)}  ${'COUNT'.padStart(6)}`, ...rows]
        : [OUT.statsNoConnections]),
      OUT.statsPending(json.pendingConnections.open, json.pendingConnections.authorizing),
      OUT.statsRefreshFailures(
        json.refreshFailuresLastDay.total,
        json.refreshFailuresLastDay.byProvider.map((r) => `${shown(r.provider || '-')} ${r.count}`).join(', '),
      ),
      ...(json.webhooks?.endpoints ?? []).map((e) => OUT.statsWebhooks(shown(e.endpoint), e.pending, e.delivered, e.failed)),
    ].join('\n') + '\n'
  );
}
