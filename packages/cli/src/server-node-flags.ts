/**
 * V8 flags every launcher of `visionserve serve` passes to node: the bin's shebang, `npm
 * start`, the Containerfile's ENTRYPOINT, the benchmarks (packages/cli/test/cli.test.ts checks
 * that they agree). V8 reads heap sizes only when an isolate is created, so a running
 * process cannot set them for itself.
 *
 * `--initial-old-space-size=64` (MiB): the main isolate's old generation holds ~11 MiB, so
 * V8's default allocation limit stays small, while every request allocates megabytes of
 * short-lived body chunks (node:http and node:http2 copy each one). Measured on the 2-core
 * AVX2 box: refusing 600 REST requests of 2.9 MB caused 67–77 Mark-Compacts without the flag
 * and 3–4 with it (server CPU per refusal 6.2 → 3.6 ms); REST JSON predict went from 23 to
 * 3 ms of GC per request. It sets where the limit starts, not memory committed: idle and
 * peak RSS did not change.
 */
export const SERVER_NODE_FLAGS: readonly string[] = ['--initial-old-space-size=64'];

/** The flags of SERVER_NODE_FLAGS this process was started without. */
export function missingServerNodeFlags(execArgv: readonly string[] = process.execArgv): string[] {
  return SERVER_NODE_FLAGS.filter((flag) => !execArgv.includes(flag));
}
