/** Thrown when the environment cannot describe a working service; the message names the variable. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}
