/** What a `visionserve serve` command line asks for before any serving (no imports: the bin reads it first). */

/** TF Serving's `--version`: print the version and exit 0 instead of serving. */
export function isVersionRequest(argv: readonly string[]): boolean {
  return argv.some((a) => a === '--version' || a === '--version=true' || a === '--version=1');
}

/** `--help` or `-h`: print the help instead of serving. */
export function isHelpRequest(argv: readonly string[]): boolean {
  return argv.some((a) => a === '--help' || a === '-h');
}

/** Whether the command line serves (not a help or version request). */
export function serves(argv: readonly string[]): boolean {
  return !isVersionRequest(argv) && !isHelpRequest(argv);
}
