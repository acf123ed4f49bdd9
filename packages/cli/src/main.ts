/**
 * CLI entry: dispatches to a command module, loaded on demand so that light commands
 * (predict, inspect) start without loading the server.
 */
import { type Command, UsageError } from './cli-args.js';

export const HELP = `visionserve: TF Serving compatible model server for ONNX vision models

Usage: visionserve <command> [options]

Commands:
  serve                 start the server (gRPC :8500, REST :8501, SageMaker-style :8080)
  predict <input>       send an image or tensor file to a server; print classes or detections
  inspect <model>       show a model's signature (.onnx file, repository or running server)
  transform             SageMaker Batch Transform on local files or s3:// (in-process or --endpoint)
  video <source>        run a model on a video file or stream (ffmpeg): JSON lines, annotated video
  convert <dir>         convert a TensorFlow SavedModel to ONNX ahead of time; --setup installs the converter
  bench                 latency/throughput benchmark: raw onnxruntime vs in-process vs gRPC vs REST vs /invocations
  generate-demo <dir>   write the demo model repository (half_plus_two) into <dir>
  help [command]        show help ("visionserve help predict", or "visionserve <command> --help")

Exit codes: 0 ok, 1 runtime failure, 2 usage error.
`;

const COMMANDS: Readonly<Record<string, () => Promise<Command>>> = {
  serve: async () => (await import('./serve-command.js')).serve,
  predict: async () => (await import('./predict-command.js')).predict,
  inspect: async () => (await import('./inspect-command.js')).inspect,
  bench: async () => (await import('./bench-command.js')).bench,
  transform: async () => (await import('./transform-command.js')).transform,
  video: async () => (await import('./video-command.js')).video,
  convert: async () => (await import('./convert-command.js')).convert,
  'generate-demo': async () => (await import('./generate-demo-command.js')).generateDemo,
};

/** CLI entry; returns the process exit code (0 ok, 1 failure, 2 usage error). */
export async function main(argv: readonly string[], env: NodeJS.ProcessEnv): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    const topic = rest[0];
    const load = topic === undefined ? undefined : COMMANDS[topic];
    console.log(load ? (await load()).help : HELP);
    return 0;
  }
  const load = COMMANDS[name];
  if (load === undefined) {
    console.error(`visionserve: unknown command "${name}"\n\n${HELP}`);
    return 2;
  }
  const command = await load();
  if (rest.includes('--help') || rest.includes('-h')) {
    console.log(command.help);
    return 0;
  }
  try {
    return await command.run(rest, env);
  } catch (error) {
    if (error instanceof UsageError) {
      console.error(`visionserve ${name}: ${error.message}\n\n${command.help}`);
      return 2;
    }
    console.error(`visionserve ${name}: ${error instanceof Error ? error.message : String(error)}`);
    return 1;
  }
}
