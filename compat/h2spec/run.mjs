#!/usr/bin/env node
// h2spec (the HTTP/2 conformance tester, pinned in go.mod here) against the gRPC port of a real
// visionserve process on its default transport, in plaintext (h2c) and over TLS (ALPN h2, a
// self-signed certificate made with openssl): every generic, HTTP/2 and HPACK case, strict
// ones included, must pass. One case, http2/4.2/3 (a HEADERS frame over SETTINGS_MAX_FRAME_SIZE),
// is built by h2spec for the 16 KiB default; this server advertises 1 MiB, so the case is run
// again on its own with headers large enough to exceed that, and must pass there.
//
// h2spec is built from the Go module proxy into .cache/ (like deploy/validate): the first run
// downloads a few MB and compiles in about 10 s. Part of `npm test` (scripts/run-tests.mjs);
// needs the built CLI (`npm run build`). Usage: node compat/h2spec/run.mjs [serve flags]
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..', '..');
const cache = process.env.VISIONSERVE_GO_CACHE ?? join(root, '.cache', 'go');
const binary = join(root, '.cache', 'h2spec', 'h2spec');
/** The case h2spec builds for a 16 KiB SETTINGS_MAX_FRAME_SIZE, and the header length that exceeds our 1 MiB. */
const FRAME_SIZE_CASE = 'http2/4.2/3';
const FRAME_SIZE_CASE_NAME =
  'http2/4.2: Sends a large size HEADERS frame that exceeds the SETTINGS_MAX_FRAME_SIZE';
const FRAME_SIZE_HEADER_LENGTH = '240000';

function build() {
  const stale = !existsSync(binary) || statSync(binary).mtimeMs < statSync(join(here, 'go.sum')).mtimeMs;
  if (!stale) return;
  mkdirSync(dirname(binary), { recursive: true });
  const env = {
    ...process.env,
    GOMODCACHE: join(cache, 'mod'),
    GOCACHE: join(cache, 'build'),
    GOFLAGS: `${process.env.GOFLAGS ? `${process.env.GOFLAGS} ` : ''}-modcacherw`,
    GOTOOLCHAIN: process.env.GOTOOLCHAIN ?? 'local',
  };
  const go = spawnSync('go', ['build', '-o', binary, 'github.com/summerwind/h2spec/cmd/h2spec'], {
    cwd: here,
    env,
    stdio: 'inherit',
  });
  if (go.error !== undefined || go.status !== 0) {
    throw new Error(
      `building h2spec failed (Go on PATH is required): ${go.error?.message ?? `exit ${go.status}`}`,
    );
  }
}

function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.on('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

/**
 * Waits for the server's "visionserve ready" line. Not for the port to accept: the server checks
 * at start that its ports are free by listening on them for an instant (checkPortsFree), so a
 * port poll can succeed then and h2spec's first connection be refused before the real listener
 * opens (seen once in CI).
 */
async function waitForReady(logs, child, ms) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`the server exited (${child.exitCode}) before it was ready`);
    if (logs.join('').includes('"visionserve ready"')) return;
    if (Date.now() > deadline) throw new Error(`the server was not ready after ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Runs h2spec; returns the failed or errored cases as "package: description" from its JUnit report. */
function h2spec(port, args, report) {
  const run = spawnSync(
    binary,
    ['-h', '127.0.0.1', '-p', String(port), '-o', '3', '-S', '-j', report, ...args],
    {
      encoding: 'utf8',
    },
  );
  if (run.error !== undefined) throw run.error;
  if (!existsSync(report)) throw new Error(`h2spec wrote no report:\n${run.stdout}\n${run.stderr}`);
  const xml = readFileSync(report, 'utf8');
  const failed = [];
  let cases = 0;
  for (const m of xml.matchAll(
    /<testcase package="([^"]*)" classname="([^"]*)"[^>]*>([\s\S]*?)<\/testcase>/g,
  )) {
    cases++;
    if (/<(failure|error)/.test(m[3])) failed.push(`${m[1]}: ${m[2]}`);
  }
  const skipped = [...xml.matchAll(/<skipped/g)].length;
  return { cases, failed, skipped, output: run.stdout };
}

/** Starts `visionserve serve` with the gRPC port only, runs h2spec against it; returns 0 when all is as expected. */
async function check(label, serveArgs, h2specArgs) {
  const port = await freePort();
  const logs = [];
  const server = spawn(
    process.execPath,
    [
      join(root, 'packages', 'cli', 'bin', 'visionserve.js'),
      'serve',
      '--host=127.0.0.1',
      `--port=${port}`,
      '--rest_api_port=-1',
      '--sagemaker_port=-1',
      '--log_level=info', // for the ready line
      ...serveArgs,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  server.stderr.on('data', (chunk) => logs.push(String(chunk)));
  let status = 0;
  try {
    await waitForReady(logs, server, 30_000);
    const all = h2spec(port, h2specArgs, join(work, `${label}-all.xml`));
    const unexpected = all.failed.filter((name) => name !== FRAME_SIZE_CASE_NAME);
    const frameSize = h2spec(
      port,
      [...h2specArgs, '--max-header-length', FRAME_SIZE_HEADER_LENGTH, FRAME_SIZE_CASE],
      join(work, `${label}-frame-size.xml`),
    );
    console.log(
      `h2spec (${label}): ${all.cases} cases, ${all.failed.length} failed (${all.skipped} skipped); ` +
        `${FRAME_SIZE_CASE} with headers over 1 MiB: ${frameSize.failed.length === 0 && frameSize.cases === 1 ? 'passed' : 'FAILED'}`,
    );
    if (unexpected.length > 0 || all.skipped > 0 || all.cases < 140) {
      status = 1;
      console.error(all.output);
      console.error(`h2spec (${label}): unexpected failures or skips:\n  ${unexpected.join('\n  ')}`);
    }
    if (frameSize.cases !== 1 || frameSize.failed.length > 0) {
      status = 1;
      console.error(frameSize.output);
    }
    if (server.exitCode !== null) {
      status = 1;
      console.error(`the server exited during h2spec (${server.exitCode})`);
    }
    const errors = logs
      .join('')
      .split('\n')
      .filter((line) => /"level":"(error|fatal)"/.test(line));
    if (errors.length > 0) {
      status = 1;
      console.error(`server logged errors:\n${errors.join('\n')}`);
    }
  } catch (error) {
    status = 1;
    console.error(error instanceof Error ? error.message : error);
    console.error(logs.join(''));
  } finally {
    server.kill('SIGTERM');
  }
  return status;
}

/** A self-signed certificate (openssl) in a TF Serving SSLConfig file; undefined without openssl. */
function sslConfig() {
  const made = spawnSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'rsa:2048',
      '-nodes',
      '-keyout',
      'key.pem',
      '-out',
      'cert.pem',
      '-days',
      '2',
      '-subj',
      '/CN=127.0.0.1',
    ],
    { cwd: work, stdio: 'ignore' },
  );
  if (made.error !== undefined || made.status !== 0) return undefined;
  const key = readFileSync(join(work, 'key.pem'), 'utf8');
  const cert = readFileSync(join(work, 'cert.pem'), 'utf8');
  const file = join(work, 'ssl.pbtxt');
  writeFileSync(
    file,
    `server_key: ${JSON.stringify(key)}\nserver_cert: ${JSON.stringify(cert)}\nclient_verify: false\n`,
  );
  return file;
}

build();
const work = mkdtempSync(join(tmpdir(), 'visionserve-h2spec-'));
// Extra serve flags from the command line, e.g. --grpc_transport=node to see how node:http2 fares.
const extra = process.argv.slice(2);
let status = await check('h2c', extra, []);
const ssl = sslConfig();
if (ssl === undefined) {
  console.error('h2spec (TLS): openssl is required to make a test certificate');
  status = 1;
} else {
  status |= await check('TLS', [...extra, `--ssl_config_file=${ssl}`], ['-t', '-k']);
}
rmSync(work, { recursive: true, force: true });
process.exit(status);
