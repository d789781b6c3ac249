/** What the upstream asked for, in words, when the broker never offered it. */
const NOT_OFFERED = {
  sampling: 'a completion from your model (sampling)',
  roots: 'your client’s roots',
  url: 'a link to open (your client declared no URL elicitation)',
  form: 'a form to fill in (your client declared no form elicitation)',
  other: 'a kind of input this broker does not relay',
};

/** Every sentence the gateway's relay says to a person (through the assistant), in one place for review. */
export const M = {
  upstreamStateTooLarge: (upstream: string, bytes: number, max: number) =>
    `${upstream} asked for input with a request state of ${bytes} bytes, more than the ${max} this server carries, so the call was not continued.`,
  upstreamStateMalformed: (upstream: string) =>
    `${upstream} asked for input with a request state that is not a string, so the call was not continued.`,
  upstreamAskedNothing: (upstream: string) => `${upstream} asked for input but sent no input requests, so the call was not continued.`,
  insufficientScopeNamedNothing: (upstream: string) =>
    `${upstream} refused the call with insufficient_scope but named no scope the connection lacks, so nothing was done.`,
  /** Leads every question an upstream asks through the broker: who is asking. */
  asks: (name: string, message: string) => `${name} asks: ${message}`,
  inputNotOffered: (upstream: string, input: 'sampling' | 'roots' | 'url' | 'form' | 'other') =>
    `The upstream MCP server "${upstream}" asked for ${NOT_OFFERED[input]}, which this broker never offered it, so the call was stopped and nothing was shown to you.`,
  foreignLink: (upstream: string) =>
    `The upstream MCP server "${upstream}" asked you to open a link outside its own site and the sites allowed for it, so the call was stopped and the link was not shown.`,
  inputMalformed: (upstream: string) =>
    `The upstream MCP server "${upstream}" asked for input in a form this broker cannot read, so the call was stopped.`,
  legacyClientCannotAnswer: (upstream: string) =>
    `The upstream MCP server "${upstream}" asks for input for this tool (a confirmation, a form or a link), which this client cannot answer through the broker: it speaks MCP 2025-11-25, and relayed questions need a 2026-07-28 client. Nothing was done.`,
};
