/**
 * What the latency suite talks to: the servers it starts (child processes on loopback: one
 * with typed gRPC responses, one with --enable_serialization_as_tensor_content, one with that
 * and TLS on every listener, and the in-process probe) or the running servers it is pointed
 * at, with one client per path. `runnerFor` turns an endpoint and a case into the path's runner.
 */
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  createInvocationsClient,
  createKServeGrpcClient,
  createKServeHttpClient,
  createTfsGrpcClient,
  createTfsRestClient,
  type InvocationsClient,
  type KServeGrpcClient,
  type KServeHttpClient,
  type TfsGrpcClient,
  type TfsRestClient,
} from '@visionserve/client';
import type { BenchCase } from './bench-cases.js';
import type { PathId } from './bench-paths.js';
import type { GcTotals } from './server-gc.js';
import type { ExitCleanup } from './exit-cleanup.js';
import { createGrpcRunner } from './grpc-runner.js';
import { type InProcessProbe, startInProcessProbe } from './in-process-probe.js';
import { createInProcessRunner } from './in-process-runner.js';
import { createInvocationsRunner } from './invocations-runner.js';
import { createKServeRunner } from './kserve-runner.js';
import type { PathRunner, Unavailable } from './path-runner.js';
import { createRestJsonRunner } from './rest-json-runner.js';
import { createRestB64Runner } from './rest-b64-runner.js';
import { cachedTwinName } from './bench-cases.js';
import { type ServerProcess, startServerProcess } from './server-process.js';
import { type TestCerts, makeTestCerts } from '../tools/test-certs.js';

export interface BenchTargets {
  /** gRPC address of a running server (typed responses). */
  readonly grpc?: string;
  /** gRPC address of a running server started with --enable_serialization_as_tensor_content. */
  readonly grpcTensorContent?: string;
  /** REST base URL of a running server (also its KServe v2 HTTP API, /v2). */
  readonly rest?: string;
  /** /invocations base URL of a running server. */
  readonly invocations?: string;
  /** PID of the running server, for server CPU time (same machine only). */
  readonly serverPid?: number;
}

interface Endpoint<C> {
  readonly client: C;
  /** Server process, for server CPU; undefined when unknown. */
  readonly pid: number | undefined;
  /** The server's GC totals (servers started here); undefined when unknown. */
  readonly gc?: (() => GcTotals) | undefined;
}

export interface LatencyEndpoints {
  readonly grpcTyped: Endpoint<TfsGrpcClient> | undefined;
  readonly grpcTensorContent: Endpoint<TfsGrpcClient> | undefined;
  readonly rest: Endpoint<TfsRestClient> | undefined;
  /** KServe v2 HTTP with binary tensor data, on the REST port. */
  readonly kserveHttp: Endpoint<KServeHttpClient> | undefined;
  /** KServe v2 HTTP with JSON `data` both ways, on the REST port. */
  readonly kserveJson: Endpoint<KServeHttpClient> | undefined;
  /** KServe v2 gRPC, on the gRPC port (the typed-response server: KServe ignores that flag). */
  readonly kserveGrpc: Endpoint<KServeGrpcClient> | undefined;
  readonly invocations: Endpoint<InvocationsClient> | undefined;
  /** gRPC tensor_content over TLS, to the TLS server. */
  readonly grpcTls: Endpoint<TfsGrpcClient> | undefined;
  /** KServe v2 HTTP binary over TLS, to the TLS server. */
  readonly kserveHttps: Endpoint<KServeHttpClient> | undefined;
  /** Why there is no TLS server, where the TLS paths were asked for. */
  readonly noTls: string;
  readonly probe: InProcessProbe | undefined;
  /** Closes the clients, stops the servers and the probe this module started. */
  close(): Promise<void>;
}

export interface LatencyEndpointOptions {
  /** The paths that will run (servers are started only for these). */
  readonly paths: readonly PathId[];
  /** Running servers to measure; undefined: start our own. */
  readonly targets: BenchTargets | undefined;
  /** `visionserve serve` flags for the started servers and the probe (model config file included). */
  readonly serverFlags: readonly string[];
  /** Sockets per HTTP client (the closed loop's concurrency). */
  readonly concurrency: number;
  /** Per-request deadline, ms. */
  readonly timeoutMs: number;
  /** A folder of the run's own (the TLS server's certificates go below it). */
  readonly workDir: string;
  /** Children are killed here if the process is interrupted. */
  readonly cleanup: ExitCleanup;
  readonly log: (line: string) => void;
}

const NO_INVOCATIONS =
  'server has no /invocations listener (started with --sagemaker_port=-1, or an external server without --invocations)';

/** The TLS server's endpoints, as the clients reach them. */
interface SecureServer {
  readonly grpc: string;
  readonly rest: string;
  /** PEM of the throwaway CA that signed its certificate. */
  readonly ca: string;
  readonly pid: number;
  readonly gc: () => GcTotals;
}

/**
 * Starts the server of the TLS paths (--enable_serialization_as_tensor_content, TLS on every
 * listener with a throwaway CA made by openssl under the run's folder), or says why it cannot.
 */
async function startTlsServer(
  o: LatencyEndpointOptions,
  startServer: (flags: readonly string[]) => Promise<ServerProcess>,
): Promise<SecureServer | string> {
  const dir = join(o.workDir, 'tls');
  await mkdir(dir);
  let certs: TestCerts;
  try {
    certs = await makeTestCerts(dir);
  } catch (error) {
    return `cannot make a test certificate with openssl: ${error instanceof Error ? error.message : String(error)}`;
  }
  const config = join(dir, 'ssl.config');
  await writeFile(
    config,
    `server_key: ${JSON.stringify(certs.serverKey)}\nserver_cert: ${JSON.stringify(certs.serverCert)}\nclient_verify: false\n`,
  );
  o.log('starting server (TLS, --enable_serialization_as_tensor_content)...');
  const server = await startServer([
    ...o.serverFlags,
    '--enable_serialization_as_tensor_content',
    `--ssl_config_file=${config}`,
  ]);
  return {
    grpc: `https://127.0.0.1:${server.grpcPort}`,
    rest: `https://127.0.0.1:${server.restPort}`,
    ca: await readFile(certs.ca, 'utf8'),
    pid: server.pid,
    gc: server.gc,
  };
}

/** Where the paths' servers listen (started here, or the targets given), and their processes. */
interface ServedAt {
  grpcAddress?: string | undefined;
  grpcTcAddress?: string | undefined;
  restUrl?: string | undefined;
  invocationsUrl?: string | undefined;
  mainPid?: number | undefined;
  tcPid?: number | undefined;
  mainGc?: (() => GcTotals) | undefined;
  tcGc?: (() => GcTotals) | undefined;
  secure?: SecureServer | undefined;
  noTls: string;
}

type StartServer = (flags: readonly string[]) => Promise<ServerProcess>;

/** Starts the servers the wanted paths need (typed, tensor_content, TLS), or takes the targets. */
async function startServers(o: LatencyEndpointOptions, startServer: StartServer): Promise<ServedAt> {
  const wants = (p: PathId): boolean => o.paths.includes(p);
  const at: ServedAt = {
    noTls: 'the TLS paths need a server started by the benchmark (not --grpc/--rest targets)',
  };
  if (o.targets) {
    at.grpcAddress = o.targets.grpc;
    at.grpcTcAddress = o.targets.grpcTensorContent;
    at.restUrl = o.targets.rest;
    at.invocationsUrl = o.targets.invocations;
    at.mainPid = at.tcPid = o.targets.serverPid;
    return at;
  }
  const mainPaths: PathId[] = [
    'grpc-typed',
    'rest-json',
    'invocations',
    'kserve-http',
    'kserve-json',
    'kserve-grpc',
    'rest-b64',
    'rest-b64-cached',
  ];
  if (mainPaths.some(wants)) {
    o.log('starting server (typed gRPC responses)...');
    // Only the cached twins opt in to the response cache; the other paths never hit it.
    const cache = wants('rest-b64-cached') ? ['--response_cache_bytes=67108864'] : [];
    const main = await startServer([...o.serverFlags, ...cache]);
    at.grpcAddress = `127.0.0.1:${main.grpcPort}`;
    at.restUrl = `http://127.0.0.1:${main.restPort}`;
    if (main.sagemakerPort !== undefined) at.invocationsUrl = `http://127.0.0.1:${main.sagemakerPort}`;
    at.mainPid = main.pid;
    at.mainGc = main.gc;
  }
  if (wants('grpc-tensor-content')) {
    o.log('starting server (--enable_serialization_as_tensor_content)...');
    const tc = await startServer([...o.serverFlags, '--enable_serialization_as_tensor_content']);
    at.grpcTcAddress = `127.0.0.1:${tc.grpcPort}`;
    at.tcPid = tc.pid;
    at.tcGc = tc.gc;
  }
  if (wants('grpc-tls') || wants('kserve-https')) {
    const started = await startTlsServer(o, startServer);
    if (typeof started === 'string') at.noTls = started;
    else at.secure = started;
  }
  return at;
}

type Clients = Omit<LatencyEndpoints, 'noTls' | 'probe' | 'close'>;

/** One client per path that has a server; each closes with the endpoints. */
function openClients(
  o: LatencyEndpointOptions,
  at: ServedAt,
  closers: (() => Promise<void> | void)[],
): Clients {
  // VISIONSERVE_BENCH_GRPC_CLIENT=node runs the gRPC paths on node:http2 (A/B against the default, lean).
  const transport = process.env['VISIONSERVE_BENCH_GRPC_CLIENT'] === 'node' ? ('node' as const) : undefined;
  const clientOptions = { defaultTimeoutMs: o.timeoutMs, ...(transport ? { transport } : {}) };
  const closing = <C extends { close(): void }>(
    client: C,
    pid: number | undefined,
    gc: (() => GcTotals) | undefined,
  ): Endpoint<C> => {
    closers.push(() => {
      client.close();
    });
    return { client, pid, gc };
  };
  const { grpcAddress, grpcTcAddress, restUrl, invocationsUrl, mainPid, mainGc, secure } = at;
  const main = <C extends { close(): void }>(client: C): Endpoint<C> => closing(client, mainPid, mainGc);
  const sockets = { maxSockets: o.concurrency, ...clientOptions };
  return {
    grpcTyped: grpcAddress
      ? main(createTfsGrpcClient({ address: grpcAddress, encoding: 'typed', ...clientOptions }))
      : undefined,
    grpcTensorContent: grpcTcAddress
      ? closing(
          createTfsGrpcClient({ address: grpcTcAddress, encoding: 'tensor_content', ...clientOptions }),
          at.tcPid,
          at.tcGc,
        )
      : undefined,
    rest: restUrl ? main(createTfsRestClient({ baseUrl: restUrl, ...sockets })) : undefined,
    kserveHttp: restUrl ? main(createKServeHttpClient({ baseUrl: restUrl, ...sockets })) : undefined,
    kserveJson: restUrl
      ? main(createKServeHttpClient({ baseUrl: restUrl, ...sockets, binary: false }))
      : undefined,
    kserveGrpc: grpcAddress
      ? main(createKServeGrpcClient({ address: grpcAddress, ...clientOptions }))
      : undefined,
    invocations: invocationsUrl
      ? main(createInvocationsClient({ baseUrl: invocationsUrl, ...sockets }))
      : undefined,
    grpcTls: secure
      ? closing(
          createTfsGrpcClient({
            address: secure.grpc,
            tls: { ca: secure.ca },
            encoding: 'tensor_content',
            ...clientOptions,
          }),
          secure.pid,
          secure.gc,
        )
      : undefined,
    kserveHttps: secure
      ? closing(
          createKServeHttpClient({ baseUrl: secure.rest, tls: { ca: secure.ca }, ...sockets }),
          secure.pid,
          secure.gc,
        )
      : undefined,
  };
}

export async function openLatencyEndpoints(o: LatencyEndpointOptions): Promise<LatencyEndpoints> {
  const closers: (() => Promise<void> | void)[] = [];
  const close = async (): Promise<void> => {
    for (const c of closers.splice(0).reverse()) {
      try {
        await c();
      } catch {
        // Best effort: the others still close.
      }
    }
  };
  const startServer: StartServer = async (flags) => {
    const server = await startServerProcess(flags, { cleanup: o.cleanup });
    closers.push(() => server.stop());
    return server;
  };
  try {
    const at = await startServers(o, startServer);
    const clients = openClients(o, at, closers);
    let probe: InProcessProbe | undefined;
    if (o.paths.includes('in-process')) {
      o.log('starting in-process probe...');
      const started = await startInProcessProbe(o.serverFlags, o.cleanup);
      closers.push(() => started.close());
      probe = started;
    }
    return { ...clients, noTls: at.noTls, probe, close };
  } catch (error) {
    await close();
    throw error;
  }
}

/** The runner of a served path for one case, or why it cannot run. */
export function runnerFor(path: PathId, benchCase: BenchCase, e: LatencyEndpoints): PathRunner | Unavailable {
  const pid = (endpoint: Endpoint<unknown>) => ({
    ...(endpoint.pid !== undefined ? { serverPid: endpoint.pid } : {}),
    ...(endpoint.gc !== undefined ? { serverGc: endpoint.gc } : {}),
  });
  switch (path) {
    case 'in-process':
      return e.probe
        ? createInProcessRunner(e.probe, benchCase)
        : { unavailable: 'in-process probe not started' };
    case 'grpc-tensor-content':
      return e.grpcTensorContent
        ? createGrpcRunner({
            client: e.grpcTensorContent.client,
            benchCase,
            encoding: 'tensor_content',
            ...pid(e.grpcTensorContent),
          })
        : {
            unavailable:
              'no gRPC server with --enable_serialization_as_tensor_content (pass --grpc-tensor-content)',
          };
    case 'grpc-typed':
      return e.grpcTyped
        ? createGrpcRunner({ client: e.grpcTyped.client, benchCase, encoding: 'typed', ...pid(e.grpcTyped) })
        : { unavailable: 'no gRPC server (pass --grpc)' };
    case 'kserve-http':
      return e.kserveHttp
        ? createKServeRunner({ client: e.kserveHttp.client, benchCase, ...pid(e.kserveHttp) })
        : { unavailable: 'no REST server (pass --rest)' };
    case 'kserve-json':
      return e.kserveJson
        ? createKServeRunner({ client: e.kserveJson.client, benchCase, ...pid(e.kserveJson) })
        : { unavailable: 'no REST server (pass --rest)' };
    case 'kserve-grpc':
      return e.kserveGrpc
        ? createKServeRunner({ client: e.kserveGrpc.client, benchCase, ...pid(e.kserveGrpc) })
        : { unavailable: 'no gRPC server (pass --grpc)' };
    case 'grpc-tls':
      return e.grpcTls
        ? createGrpcRunner({
            client: e.grpcTls.client,
            benchCase,
            encoding: 'tensor_content',
            ...pid(e.grpcTls),
          })
        : { unavailable: e.noTls };
    case 'kserve-https':
      return e.kserveHttps
        ? createKServeRunner({ client: e.kserveHttps.client, benchCase, ...pid(e.kserveHttps) })
        : { unavailable: e.noTls };
    case 'rest-json':
      return e.rest
        ? createRestJsonRunner({ client: e.rest.client, benchCase, ...pid(e.rest) })
        : { unavailable: 'no REST server (pass --rest)' };
    case 'invocations':
      if (benchCase.image === undefined) return { unavailable: benchCase.noImageReason ?? 'no image input' };
      return e.invocations
        ? createInvocationsRunner({
            client: e.invocations.client,
            model: benchCase.model,
            image: benchCase.image,
            ...pid(e.invocations),
          })
        : { unavailable: NO_INVOCATIONS };
    case 'rest-b64':
    case 'rest-b64-cached':
      if (benchCase.image === undefined) return { unavailable: benchCase.noImageReason ?? 'no image input' };
      return e.rest
        ? createRestB64Runner({
            client: e.rest.client,
            model: path === 'rest-b64' ? benchCase.model : cachedTwinName(benchCase.model),
            benchCase,
            image: benchCase.image,
            ...pid(e.rest),
          })
        : { unavailable: 'no REST server (pass --rest)' };
    case 'floor':
    case 'image-floor':
      return { unavailable: 'floors are measured by the suite' };
  }
}
