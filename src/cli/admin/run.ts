import { once } from 'node:events';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { userInfo } from 'node:os';
import { principalFromVerifiedClaims } from '../../auth/principal.js';
import { developmentEnvForAdmin, USING_DEVELOPMENT_FILES } from '../../config/development.js';
import { ConfigError, loadConfig, type Config } from '../../config/env.js';
import { ConnectionService } from '../../connections/index.js';
import { Sealer } from '../../crypto/index.js';
import type { EventSink } from '../../events/index.js';
import { createWebhooks } from '../../webhooks/index.js';
import type { Logger } from '../../log.js';
import { buildProviders } from '../../providers/registry.js';
import { builtinToolProvider } from '../../mcp/index.js';
import { upstreamCallback } from '../../providers/mcp-auth/index.js';
import { pruneAuditTrail, retentionCutoff } from '../../audit/retention.js';
import { verifyAuditChain, type LoggedHead } from '../../audit/verify.js';
import { headsFromLog } from '../../audit/heads.js';
import { auditChainKey, openStore, StoreUnavailableError, type AuditChainKey, type AuditCursor, type Store } from '../../store/index.js';
import { parseAdminArgs, UsageError, type AdminCommand } from './args.js';
import { auditLine, connectionJson, connectionsTable, statsJson, statsText } from './format.js';
import { HELP, OUT, USAGE } from './messages.js';

export interface AdminIo {
  stdout: NodeJS.WritableStream;
  stderr: NodeJS.WritableStream;
  env?: NodeJS.ProcessEnv;
  /** Where `connections revoke` tells of the revocation (the webhooks' outbox once configured). */
  events?: EventSink;
  /** Rows per page of `connections list` and `audit export` (each page one short query). */
  pageSize?: number;
}

export const EXIT = { ok: 0, notFound: 1, usage: 2 } as const;

const DAY_MS = 86_400_000;

/** Runs one admin command and returns its exit status: 0 done, 1 not found (or could not run), 2 bad usage. */
export async function runAdmin(argv: readonly string[], io: AdminIo): Promise<number> {
  let command: AdminCommand;
  try {
    command = parseAdminArgs(argv);
  } catch (err) {
    if (!(err instanceof UsageError)) throw err;
    io.stderr.write(`admin: ${err.message} (${USAGE.seeHelp})\n`);
    return EXIT.usage;
  }
  if (command.kind === 'help') {
    io.stdout.write(HELP[command.topic]);
    return EXIT.ok;
  }

  let config: Config;
  const env = io.env ?? process.env;
  // Nothing configured, and `npm run dev` left its files: that broker's database, with its settings.
  const development = developmentEnvForAdmin(env);
  if (development) io.stderr.write(USING_DEVELOPMENT_FILES(development.databasePath) + '\n');
  try {
    config = development ? loadConfig(development.env, { developmentMode: true }) : loadConfig(env);
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    io.stderr.write(err.problems.map((p) => `Configuration error: ${p}\n`).join(''));
    return EXIT.notFound;
  }

  if (command.kind === 'policy test') return policyTest(command, config, writer(io.stdout));

  // Opening would create an empty database: a mistyped path must not read as "no connections".
  if (!config.database.url && !existsSync(config.database.path)) {
    io.stderr.write(OUT.failed(OUT.noDatabase(config.database.path)) + '\n');
    return EXIT.notFound;
  }
  let store: Store | undefined;
  try {
    // Its own rows (an admin revocation, a prune's anchors) join the chain in a stream of this run's.
    store = await openStore(config.database, (event) => io.stderr.write(OUT.failed(event) + '\n'), {
      auditChain: auditChainKey(config.brokerSecret),
    });
    return await execute(command, { store, config, io, write: writer(io.stdout), pageSize: io.pageSize ?? 500 });
  } catch (err) {
    // One line a person can act on, never a stack (pg's messages name host and user, never the password).
    const message = err instanceof StoreUnavailableError ? OUT.storeUnavailable : err instanceof Error ? err.message : String(err);
    io.stderr.write(OUT.failed(message) + '\n');
    return EXIT.notFound;
  } finally {
    await store?.close();
  }
}

interface Context {
  store: Store;
  config: Config;
  io: AdminIo;
  write: (text: string) => Promise<void>;
  pageSize: number;
}

/** Writes with backpressure: a million audit rows piped to a slow consumer stay out of memory. */
function writer(stream: NodeJS.WritableStream): (text: string) => Promise<void> {
  return async (text) => {
    if (!stream.write(text)) await once(stream, 'drain');
  };
}

/**
 * `policy test`: the decision the configured policy makes for one described call, and its rule;
 * nothing is called and the database is not read.
 */
async function policyTest(
  command: Extract<AdminCommand, { kind: 'policy test' }>,
  config: Config,
  write: (text: string) => Promise<void>,
): Promise<number> {
  const { policy } = config;
  if (!policy) {
    await write(command.json ? `${JSON.stringify({ effect: 'allow', rule: null, policy: false })}\n` : `${OUT.noPolicy}\n`);
    return EXIT.ok;
  }
  const upstream = config.upstreams.find((u) => command.tool.startsWith(u.toolPrefix) && command.tool.length > u.toolPrefix.length);
  const upstreamProvider =
    upstream && (upstream.auth.kind === 'provider' ? upstream.auth.provider : upstream.auth.kind === 'mcp' ? upstream.id : '');
  const provider = command.provider ?? upstreamProvider ?? (command.tool ? builtinToolProvider(command.tool, command.args) : '');
  const decision = policy.decide({
    principal: { iss: command.as.issuer, sub: command.as.subject, claims: command.claims },
    client: { id: command.client, name: command.client },
    tool: { name: command.tool, upstream: upstream?.id ?? '', annotations: command.annotations },
    args: command.args,
    provider,
    account: { login: command.account, scopes: [] },
    service: { id: command.service },
    now: new Date(),
  });
  const out = {
    effect: decision.effect,
    rule: decision.ruleId ?? null,
    ...(decision.effect === 'deny' ? { reason: decision.reason } : {}),
    ...('unevaluated' in decision && decision.unevaluated ? { unevaluated: true } : {}),
    ...(decision.effect === 'approve'
      ? {
          approval: {
            quorum: decision.approval.quorum,
            selfApproval: decision.approval.selfApproval,
            ttlSeconds: decision.approval.ttlSeconds,
            reuse: decision.approval.reuse,
          },
        }
      : {}),
    policyVersion: policy.version,
  };
  if (command.json) {
    await write(`${JSON.stringify(out)}\n`);
    return EXIT.ok;
  }
  const lines = [`decision: ${out.effect}`, `rule: ${out.rule ?? '(none matched; the default)'}`];
  if (out.reason !== undefined) lines.push(`reason: ${out.reason}`);
  if (out.approval)
    lines.push(
      `approval: quorum ${out.approval.quorum}, self-approval ${out.approval.selfApproval ? 'yes' : 'no'}, valid ${out.approval.ttlSeconds} s, reuse ${out.approval.reuse ? 'yes' : 'no'}`,
    );
  lines.push(`policy version: ${policy.version}`);
  await write(lines.join('\n') + '\n');
  return EXIT.ok;
}

async function execute(command: Exclude<AdminCommand, { kind: 'help' | 'policy test' }>, ctx: Context): Promise<number> {
  const { store, write } = ctx;
  switch (command.kind) {
    case 'connections list': {
      const filter = {
        ...(command.owner ? { owner: command.owner } : {}),
        ...(command.provider ? { provider: command.provider } : {}),
        ...(command.status ? { status: command.status } : {}),
      };
      const table = command.json ? undefined : connectionsTable();
      let after = 0;
      let n = 0;
      if (command.json) await write('[');
      for (;;) {
        const page = await store.admin.connections(filter, after, ctx.pageSize);
        for (const row of page) {
          await write(command.json ? `${n === 0 ? '\n' : ',\n'}  ${JSON.stringify(connectionJson(row))}` : table!.rows([row]));
          n++;
        }
        if (page.length < ctx.pageSize) break;
        after = page[page.length - 1]!.seq;
      }
      if (command.json) await write(n === 0 ? ']\n' : '\n]\n');
      else if (n === 0) await write(OUT.noConnections + '\n');
      return EXIT.ok;
    }
    case 'connections revoke':
      return revoke(command, ctx);
    case 'audit export': {
      const filter = {
        ...(command.owner ? { owner: command.owner } : {}),
        ...(command.since !== undefined ? { since: command.since } : {}),
      };
      let after: AuditCursor | undefined;
      for (;;) {
        const page = await store.admin.audit(filter, after, ctx.pageSize);
        if (page.length > 0) await write(page.map((row) => auditLine(row) + '\n').join(''));
        if (page.length < ctx.pageSize) break;
        const last = page[page.length - 1]!;
        after = { at: last.at, id: last.id };
      }
      return EXIT.ok;
    }
    case 'audit prune': {
      const days = command.olderThanDays ?? ctx.config.auditRetentionDays;
      if (days === 0) {
        ctx.io.stderr.write(`admin: ${USAGE.keepForever} (${USAGE.seeHelp})\n`);
        return EXIT.usage;
      }
      const deleted = await pruneAuditTrail(store.audit, retentionCutoff(days));
      await write(command.json ? JSON.stringify({ deleted }) + '\n' : OUT.auditPruned(deleted, days) + '\n');
      return EXIT.ok;
    }
    case 'audit verify': {
      let heads: LoggedHead[] = [];
      if (command.heads !== undefined) {
        try {
          heads = headsFromLog(await readFile(command.heads, 'utf8'));
        } catch (err) {
          ctx.io.stderr.write(OUT.failed(OUT.headsUnreadable(command.heads, (err as NodeJS.ErrnoException).code ?? String(err))) + '\n');
          return EXIT.notFound;
        }
      }
      const report = await verifyAuditChain(store.audit, chainKeys(ctx.config, ctx.io.env ?? process.env), { heads });
      if (command.json) {
        await write(JSON.stringify(report) + '\n');
        return report.ok ? EXIT.ok : EXIT.notFound;
      }
      if (report.broken) {
        await write(OUT.chainBroken(report.broken.problem, report.broken.message) + '\n');
        return EXIT.notFound;
      }
      const lines = [OUT.chainOk(report.rows, report.streams.length, report.anchors, report.voids)];
      if (command.heads !== undefined) lines.push(OUT.chainHeads(heads.length));
      if (report.unchainedHistory > 0) lines.push(OUT.chainHistory(report.unchainedHistory));
      if (report.belowAnchors > 0) lines.push(OUT.chainBelowAnchors(report.belowAnchors));
      for (const s of report.streams)
        lines.push(OUT.chainStream(s.stream, s.rows, s.lastSeq, s.lastAt === null ? '' : new Date(s.lastAt).toISOString(), s.from));
      await write(lines.join('\n') + '\n');
      return EXIT.ok;
    }
    case 'pending prune': {
      const n = await store.pending.prune();
      await write(command.json ? JSON.stringify({ pruned: n }) + '\n' : OUT.pruned(n) + '\n');
      return EXIT.ok;
    }
    case 'upstreams reset-registration': {
      const upstream = ctx.config.upstreams.find((u) => u.id === command.upstream && u.auth.kind === 'mcp');
      if (!upstream) {
        ctx.io.stderr.write(OUT.notMcpUpstream(command.upstream) + '\n');
        return EXIT.notFound;
      }
      // Registrations are kept per issuer and callback; the callback is this upstream's alone.
      const forgotten = await store.upstreamClients.deleteForClientKey(upstreamCallback(ctx.config, upstream.id));
      await write(
        command.json ? JSON.stringify({ upstream: upstream.id, forgotten }) + '\n' : OUT.registrationReset(upstream.id, forgotten) + '\n',
      );
      return EXIT.ok;
    }
    case 'stats': {
      const stats = await store.admin.stats(Date.now() - DAY_MS);
      const webhooks = await store.webhooks.stats();
      await write(command.json ? JSON.stringify(statsJson(stats, webhooks), null, 2) + '\n' : statsText(stats, webhooks));
      return EXIT.ok;
    }
  }
}

async function revoke(command: Extract<AdminCommand, { kind: 'connections revoke' }>, ctx: Context): Promise<number> {
  const { store, config, io } = ctx;
  const { owner, provider: providerId } = command;
  const existing = await store.connections.find(owner, providerId);
  if (!existing) {
    io.stderr.write(OUT.notFound(owner.issuer, owner.subject, providerId) + '\n');
    return EXIT.notFound;
  }
  const log = stderrLogger(io.stderr);
  const sealer = new Sealer(config.tokenKeys);
  // The broker's own provider set, `auth: mcp` upstreams included (their authorization server is discovered on use).
  const provider = buildProviders(config, { store, sealer, log }).providers.get(providerId);
  if (!provider) {
    io.stderr.write(OUT.providerNotConfigured(providerId) + '\n');
    return EXIT.notFound;
  }
  const connections = new ConnectionService(store, sealer, log, {
    providerTimeoutMs: config.providerTimeoutMs,
    // The revocation's webhook goes into the outbox here; the running brokers send it (never this command).
    events: io.events ?? createWebhooks(store, config.webhooks, log).events,
  });
  // The identity is the one the store holds for this row, which the IdP vouched for when it was connected.
  const principal = principalFromVerifiedClaims(existing.issuer, existing.subject);
  const outcome = await connections.disconnect(principal, provider, { kind: 'admin', actor: actorName(config) });
  await connections.drain();
  if (!outcome.deleted) {
    io.stderr.write(OUT.notFound(owner.issuer, owner.subject, providerId) + '\n');
    return EXIT.notFound;
  }
  const who = `${owner.issuer} ${owner.subject}`;
  await ctx.write(
    command.json
      ? JSON.stringify({
          issuer: owner.issuer,
          subject: owner.subject,
          provider: providerId,
          login: existing.account_login,
          deleted: true,
          revokedUpstream: outcome.revoked,
          ...(outcome.revokeError ? { revokeError: outcome.revokeError } : {}),
        }) + '\n'
      : (outcome.revoked
          ? OUT.revoked(who, provider.displayName, existing.account_login)
          : OUT.deletedOnly(who, provider.displayName, existing.account_login, outcome.revokeError ?? OUT.unreadableTokens)) + '\n',
  );
  return EXIT.ok;
}

/** The chain's keys: BROKER_SECRET's, and BROKER_PREVIOUS_SECRET's for the rows MACed before it changed. */
function chainKeys(config: Config, env: NodeJS.ProcessEnv): AuditChainKey[] {
  const previous = env.BROKER_PREVIOUS_SECRET;
  return [auditChainKey(config.brokerSecret), ...(previous ? [auditChainKey(Buffer.from(previous, 'utf8'))] : [])];
}

/** ADMIN_ACTOR, else the OS user running the command: who the audit trail names. */
function actorName(config: Config): string {
  if (config.adminActor) return config.adminActor;
  try {
    const name = userInfo()
      .username.replace(/[^\p{L}\p{N}\p{P}\p{S} ]/gu, '')
      .slice(0, 64);
    return name ? `os:${name}` : 'os:unknown';
  } catch {
    return 'os:unknown'; // a uid without a passwd entry (some containers)
  }
}

/** The service's log events (a failed upstream revocation…) as JSON lines on stderr, warnings and up. */
function stderrLogger(stderr: NodeJS.WritableStream): Logger {
  const line = (level: string) => (event: string, fields?: Record<string, unknown>) =>
    void stderr.write(JSON.stringify({ time: new Date().toISOString(), level, event, ...fields }) + '\n');
  return { debug: () => {}, info: () => {}, warn: line('warn'), error: line('error') };
}
