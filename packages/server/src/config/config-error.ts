/** Thrown for invalid flags, environment values or settings; the CLI prints it and exits 2. */
export class ConfigError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}
