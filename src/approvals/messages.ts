/** Every sentence the approval pages show a person, in one place for review. */
export const M = {
  unknownApproval:
    'There is no approval request at this address, or it is not yours to see. Check that you opened the whole link, and that you are signed in as the right person.',
  stale:
    'This request no longer applies: the policy changed since it was made, or its rule was removed. Nothing was approved. Ask the assistant to make the call again if it is still needed.',
  alreadyDecided: 'You already decided this request. Each approver decides once.',
  closed: 'This request was already decided, used or has expired, so it cannot be decided any more.',
  chooseVerdict: 'Choose Approve or Deny.',
  reasonTooLong: (max: number) => `The reason may be at most ${max} characters long.`,
};
