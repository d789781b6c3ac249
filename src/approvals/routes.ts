import { Router, type Request, type RequestHandler, type Response } from 'express';
import type { Principal } from '../auth/principal.js';
import type { BrowserSession } from '../auth/sessions.js';
import { BrokerError } from '../http/errors.js';
import { renderPage, type PageContext } from '../http/render.js';
import { allowScriptNonce } from '../http/security-headers.js';
import type { Logger } from '../log.js';
import type { PolicyPerson } from '../policy/types.js';
import type { ApprovalRequestRow } from '../store/index.js';
import { MAX_REASON_LENGTH, type ApprovalGates, type ApprovalView } from './gate.js';
import { M } from './messages.js';

export interface ApprovalRouteDeps {
  gates: ApprovalGates;
  /** The signed-in person's verified ID-token claims (src/auth/sessions.ts `verifiedClaims`). */
  claims: (session: BrowserSession) => Promise<Record<string, unknown>>;
  page: PageContext;
  log: Logger;
  requireCsrf: (req: Request, res: Response) => void;
  /** The approval pages' rate limit. */
  rateLimit: RequestHandler;
}

/** A form or path value that must appear exactly once; duplicates and arrays are refused. */
function single(value: unknown, max = 4096): string | undefined {
  return typeof value === 'string' && value.length <= max ? value : undefined;
}

function unknownApproval(): BrokerError {
  return new BrokerError(404, 'unknown_approval', M.unknownApproval, { heading: 'Approval request not found' });
}

/** A request as a list shows it: no arguments, only what identifies the call. */
function summary(row: ApprovalRequestRow, status: string) {
  return {
    id: row.id,
    href: `/approvals/${encodeURIComponent(row.id)}`,
    tool: row.tool,
    upstream: row.upstream,
    clientName: row.client_name,
    requester: row.subject,
    account: row.account,
    provider: row.provider,
    status,
    createdAt: new Date(row.created_at).toISOString(),
  };
}

/**
 * The approval pages, behind the same sign-in as /connect: `/approvals` lists what the signed-in
 * person may decide and their own requests; `/approvals/:id` shows one request to its requester
 * (the status) and to an approver the rule admits (the exact call, Approve / Deny). Anyone else
 * gets the page of a missing id. Deciding is a POST with the session's CSRF token; GETs change nothing.
 */
export function approvalRoutes(deps: ApprovalRouteDeps): Router {
  const { gates, page, log } = deps;
  const router = Router({ caseSensitive: true, strict: true });

  /** The signed-in person, or a redirect to sign in (and back to `returnTo`). */
  async function person(res: Response, returnTo: string): Promise<(PolicyPerson & { principal: Principal }) | undefined> {
    const session = res.locals.session;
    const principal = session?.principal;
    if (!session || !principal) {
      res.redirect(303, `/auth/login?returnTo=${encodeURIComponent(returnTo)}`);
      return undefined;
    }
    return { iss: principal.issuer, sub: principal.subject, claims: await deps.claims(session), principal };
  }

  router.get('/approvals', deps.rateLimit, async (_req, res) => {
    const viewer = await person(res, '/approvals');
    if (!viewer) return;
    const { toDecide, mine } = await gates.list(viewer);
    renderPage(res, page, 'approvals', {
      title: 'Approvals',
      scriptNonce: allowScriptNonce(res),
      toDecide: toDecide.map((r) => summary(r, gates.statusOf(r))),
      mine: mine.map((r) => summary(r, gates.statusOf(r))),
    });
  });

  function renderRequest(res: Response, view: ApprovalView, status = 200): void {
    const { request, call } = view;
    renderPage(
      res,
      page,
      'approval',
      {
        title: view.isRequester && !view.canDecide ? 'Your call waiting for approval' : 'Approve a call?',
        scriptNonce: allowScriptNonce(res),
        id: request.id,
        formAction: `/approvals/${encodeURIComponent(request.id)}`,
        status: view.status,
        reason: request.reason,
        applies: view.applies,
        isRequester: view.isRequester,
        canDecide: view.canDecide && call !== undefined,
        quorum: view.quorum,
        approvals: view.decisions.filter((d) => d.verdict === 'approve').length,
        tool: request.tool,
        upstream: request.upstream,
        clientName: request.client_name,
        provider: request.provider,
        account: request.account,
        rule: request.rule_id,
        service: request.service_id,
        requester: {
          issuer: request.issuer,
          subject: request.subject,
          name: call?.requester.name ?? call?.requester.username,
          email: call?.requester.email,
        },
        // In full, pretty, escaped by the view; wrapped by the stylesheet, never cut.
        args: call ? JSON.stringify(call.args, null, 2) : undefined,
        createdAt: new Date(request.created_at).toISOString(),
        expiresAt: new Date(request.expires_at).toISOString(),
        decisions: view.decisions.map((d) => ({
          name: d.name,
          subject: d.subject,
          verdict: d.verdict,
          reason: d.reason,
          at: new Date(d.at).toISOString(),
        })),
        maxReason: MAX_REASON_LENGTH,
      },
      status,
    );
  }

  router.get('/approvals/:id', deps.rateLimit, async (req, res) => {
    const id = String(req.params.id);
    const viewer = await person(res, `/approvals/${encodeURIComponent(id)}`);
    if (!viewer) return;
    const view = await gates.view(id, viewer);
    if (!view) throw unknownApproval();
    renderRequest(res, view);
  });

  router.post('/approvals/:id', deps.rateLimit, async (req, res) => {
    deps.requireCsrf(req, res);
    const id = String(req.params.id);
    const viewer = await person(res, `/approvals/${encodeURIComponent(id)}`);
    if (!viewer) return;
    const verdict = single(req.body?.decision);
    if (verdict !== 'approve' && verdict !== 'deny') throw new BrokerError(400, 'invalid_request', M.chooseVerdict);
    const reason = req.body?.reason === undefined ? '' : single(req.body.reason, MAX_REASON_LENGTH);
    if (reason === undefined) throw new BrokerError(400, 'invalid_request', M.reasonTooLong(MAX_REASON_LENGTH));
    const outcome = await gates.decide(id, { ...viewer, name: viewer.principal.name }, verdict, reason.trim() || undefined);
    switch (outcome.kind) {
      case 'not_found':
        throw unknownApproval();
      case 'stale':
        throw new BrokerError(410, 'approval_stale', M.stale, { heading: 'This request no longer applies' });
      case 'already_decided':
        throw new BrokerError(409, 'approval_closed', M.alreadyDecided, {
          heading: 'Already decided',
          action: { href: `/approvals/${encodeURIComponent(id)}`, label: 'See the request' },
        });
      case 'closed':
        throw new BrokerError(409, 'approval_closed', M.closed, {
          heading: 'This request is closed',
          action: { href: `/approvals/${encodeURIComponent(id)}`, label: 'See the request' },
        });
      case 'recorded':
        log.info('approval_decided', { request: id, verdict, status: outcome.request.status });
        res.redirect(303, `/approvals/${encodeURIComponent(id)}`);
    }
  });

  return router;
}
