export {
  ApprovalGates,
  APPROVAL_PRUNE_GRACE_MS,
  bindingDigest,
  MAX_OPEN_PER_REQUESTER,
  MAX_REASON_LENGTH,
  mayDecide,
  type ApprovalGatesOptions,
  type ApprovalView,
  type Approver,
  type DecideOutcome,
  type SealedCall,
} from './gate.js';
export { ApprovalWatcher, type ApprovalWaitOutcome } from './watcher.js';
export { approvalRoutes, type ApprovalRouteDeps } from './routes.js';
