/**
 * A real S3-compatible server for tests: moto's standalone server from the project's venv
 * (scripts/s3/setup-moto.sh creates it on first use), with signature checks on.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../../../../', import.meta.url));

export interface S3Server {
  readonly endpoint: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  /** Environment for the SDK's default chain pointed at this server. */
  readonly env: Record<string, string>;
  stop(): Promise<void>;
}

export async function startS3Server(): Promise<S3Server> {
  execFileSync('bash', [join(ROOT, 'scripts/s3/setup-moto.sh')], { stdio: 'inherit' });
  const python =
    process.env['MOTO_VENV'] !== undefined
      ? join(process.env['MOTO_VENV'], 'bin/python')
      : join(ROOT, '.venv-moto/bin/python');
  const child: ChildProcess = spawn(python, [join(ROOT, 'scripts/s3/start-moto.py')], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    const rl = createInterface({ input: child.stdout! });
    rl.once('line', resolve);
    child.once('exit', (code) => {
      reject(new Error(`moto exited (${code})`));
    });
  });
  const info = JSON.parse(line) as { endpoint: string; accessKeyId: string; secretAccessKey: string };
  return {
    ...info,
    env: {
      AWS_ENDPOINT_URL_S3: info.endpoint,
      AWS_ACCESS_KEY_ID: info.accessKeyId,
      AWS_SECRET_ACCESS_KEY: info.secretAccessKey,
      AWS_REGION: 'us-east-1',
    },
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) {
          resolve();
          return;
        }
        child.once('exit', () => {
          resolve();
        });
        child.stdin!.end();
        child.kill('SIGTERM');
      }),
  };
}
