// Tool input schemas, built once per process. The tools are registered on a new server for every
// request; a schema built there is a new zod object each time, which the SDK's validation then
// compiles afresh (zod's fast path): by the c=64 profile ~120 µs of CPU per `list_connections`
// (bench/README.md).
import { z } from 'zod';

/** The input of a tool that takes no arguments. */
export const NO_INPUT = z.object({});

const build = (ids: [string, ...string[]], description: string) => z.object({ provider: z.enum(ids).describe(description) });
type ProviderInput = ReturnType<typeof build>;

const built = new WeakMap<ReadonlyMap<string, unknown>, Map<string, ProviderInput>>();

/**
 * The input of a tool that takes one configured provider by id (`connect_account`,
 * `disconnect_account`), built once per provider catalog and description (the ids never change
 * while the broker runs).
 */
export function providerInput(providers: ReadonlyMap<string, unknown>, description: string): ProviderInput {
  let byDescription = built.get(providers);
  if (!byDescription) built.set(providers, (byDescription = new Map()));
  let schema = byDescription.get(description);
  if (!schema) byDescription.set(description, (schema = build([...providers.keys()] as [string, ...string[]], description)));
  return schema;
}
