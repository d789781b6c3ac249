/** Every sentence the gateway's relay says to a person (through the assistant), in one place for review. */
export const M = {
  upstreamStateTooLarge: (upstream: string, bytes: number, max: number) =>
    `${upstream} asked for input with a request state of ${bytes} bytes, more than the ${max} this server carries, so the call was not continued.`,
  upstreamStateMalformed: (upstream: string) =>
    `${upstream} asked for input with a request state that is not a string, so the call was not continued.`,
  upstreamAskedNothing: (upstream: string) => `${upstream} asked for input but sent no input requests, so the call was not continued.`,
  insufficientScopeNamedNothing: (upstream: string) =>
    `${upstream} refused the call with insufficient_scope but named no scope the connection lacks, so nothing was done.`,
};
