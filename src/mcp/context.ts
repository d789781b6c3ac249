import type { McpServer, Server, ServerContext } from '@modelcontextprotocol/server';
import type { CompletionWatcher, ConnectionRead, ConnectionService, ConnectLinks } from '../connections/index.js';
import type { Logger } from '../log.js';
import type { ApprovalGate, Policy } from '../policy/index.js';
import type { GitHubApi } from '../providers/github/api.js';
import type { Provider } from '../providers/provider.js';
import type { Store } from '../store/index.js';
import type { McpCall } from './call.js';
import type { BuiltinState, StateSigner } from './request-state.js';

/** Everything a tool may use. Tools never see the store's tokens except through `connections`. */
export interface ToolDeps {
  publicUrl: URL;
  repeatHoldMs: number;
  store: Store;
  links: ConnectLinks;
  connections: ConnectionService;
  watcher: CompletionWatcher;
  codec: StateSigner<BuiltinState>;
  /**
   * The McpServer's `requestState.verify` hook; `codec.verify` when absent. The broker passes one
   * that also opens the state a request router sealed inside ours.
   */
  verifyRequestState?: (state: string, ctx: ServerContext) => Promise<unknown>;
  log: Logger;
  /** GitHub's connection side (any Provider) and the REST calls our GitHub tools make. */
  github: { provider: Provider; api: GitHubApi };
  providers: ReadonlyMap<string, Provider>;
  /** Built-in tools switched off (PROVIDERS_FILE `builtinTools:`). */
  disabledTools?: ReadonlySet<string>;
  /** Who may call what (PROVIDERS_FILE `policy:`); undefined: every call is allowed. */
  policy?: Policy;
  /** Holds calls an `approve` rule names until people agree (src/approvals/); without it such calls are refused. */
  approvals?: ApprovalGate;
  /**
   * This call's connection row as the policy already read it (its `account` input), so that the
   * tool's first look at the connection is no second store read (src/mcp/policy.ts).
   */
  connectionRead?: ConnectionRead;
  /** Serves the requests the built-in tools do not (the broker passes its gateway). */
  router?: RequestRouter;
}

/**
 * Another server for a request, when the built-in tools are not the ones to answer it (a tools/list
 * that lists more tools, a tools/call of a tool that is not built in); undefined: the built-ins answer.
 */
export interface RequestRouter {
  serverFor(call: McpCall, deps: ToolDeps, builtinServer: () => McpServer): McpServer | Server | undefined;
}
