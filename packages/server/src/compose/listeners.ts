/**
 * The listeners: the REST port (TF Serving REST, KServe v2 HTTP, ops, console, gRPC-web), the
 * gRPC port (and --grpc_socket_path), the SageMaker port, each with its API list; the order in
 * which they open against the initial load; and their shared drain on shutdown.
 */
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer as createNetServer } from 'node:net';
import { dirname, join } from 'node:path';
import { APPLIED_GRPC_ARGUMENTS, parseGrpcChannelArguments } from '../config/grpc-channel-arguments.js';
import { type ServerConfig } from '../config/server-config.js';
import type { HttpApi } from '../frontends/http/http-api.js';
import { createHttpEdge } from '../frontends/http/http-edge.js';
import { type StartedHttpServer, startHttpServer } from '../frontends/http/start-http-server.js';
import { createTfsRestApi } from '../frontends/tfs-rest/index.js';
import { type RunningGrpcServer, startGrpcServer } from '../frontends/grpc/index.js';
import { createTfsGrpcServices } from '../frontends/tfs-grpc/index.js';
import { createGrpcWebApi } from '../frontends/grpc-web/grpc-web-api.js';
import { createConsoleApi } from '../frontends/console/console-api.js';
import { openApiDocument } from '../frontends/console/openapi-document.js';
import { createTrafficSampler } from '../observability/traffic-sampler.js';
import {
  type SageMakerInvoker,
  createSageMakerApi,
  createSageMakerInvoker,
} from '../frontends/sagemaker/index.js';
import {
  type KServeService,
  createKServeGrpcService,
  createKServeHttpApi,
  createKServeService,
} from '../frontends/kserve/index.js';
import type { GrpcService } from '../frontends/grpc/index.js';
import { type FrameStreams, createFrameStreams } from '../frontends/stream/frame-stream.js';
import type { FrameStreamCounts } from '../frontends/stream/frame-stream-counts.js';
import { createGrpcFrameStreamService } from '../frontends/stream/grpc-frame-streams.js';
import { createWebSocketStreams } from '../frontends/stream/websocket-streams.js';
import type { ConcurrencyLimit } from '../frontends/shared/concurrency-limit.js';
import { modelConfigsFromMessage } from '../repository/model-config-file.js';
import { findModelDirectory, listModelDirectories } from '../repository/model-roots.js';
import { createHandlerHost } from '../runtime/handler-host.js';
import { ConfigError } from '../config/config-error.js';
import type { Logger } from '../util/logger.js';
import { createOpsApi } from '../frontends/ops/ops-api.js';
import type { ModelCatalog } from './model-catalog.js';
import { type Operations, metricsOf } from './operations.js';
import { grpcServerSettings, httpServerSettings } from './config-settings.js';
import type { Readiness } from './readiness.js';
import type { GrpcConnectionCounts, ListenerConnectionCounts, ServingCore } from './serving-core.js';

/** What the listeners mount. */
export interface ListenerDeps {
  readonly config: ServerConfig;
  readonly logger: Logger;
  readonly ops: Operations;
  readonly core: ServingCore;
  readonly readiness: Readiness;
  readonly catalog: ModelCatalog;
  readonly imageDecodes: ConcurrencyLimit;
  /** The batching max_batch_size; undefined when batching is off. */
  readonly maxBatchSize: number | undefined;
}

export interface Listeners {
  readonly ports: { readonly grpc?: number; readonly rest?: number; readonly sagemaker?: number };
  /** Open gRPC connections and their limit closes (metrics); undefined before the port opens. */
  grpcConnections(): GrpcConnectionCounts | undefined;
  /** Each open listener's connections and connection-guard closes (metrics). */
  listenerConnections(): ListenerConnectionCounts[];
  /** Frame streams open per transport and frames per model by outcome (metrics). */
  frameStreams(): FrameStreamCounts;
  /** Opens every enabled listener; resolves with the SageMaker invoker (in-process /invocations too). */
  open(): Promise<SageMakerInvoker>;
  /** Drains every listener together within graceMs, then the handler host. */
  close(graceMs: number): Promise<void>;
}

/** The server package's version (KServe server metadata). */
function serverVersion(): string {
  try {
    const pkg = createRequire(import.meta.url)('../../package.json') as { version?: unknown };
    return typeof pkg.version === 'string' ? pkg.version : 'unknown';
  } catch {
    return 'unknown';
  }
}

/** The built console (@visionserve/console's dist/), or undefined when it is not installed or built. */
function consoleStaticDir(): string | undefined {
  try {
    const pkg = createRequire(import.meta.url).resolve('@visionserve/console/package.json');
    const dir = join(dirname(pkg), 'dist');
    return existsSync(join(dir, 'index.html')) ? dir : undefined;
  } catch {
    return undefined;
  }
}

/** max_batch_size reported for batching models when server-side batching is off: no limit. */
const NO_BATCH_LIMIT = 2 ** 31 - 1;

/** The loopback address matching a bind address, for URLs handed to user code. */
function loopbackFor(host: string): string {
  if (host === '' || host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '[::1]';
  return host.includes(':') ? `[${host}]` : host;
}
/** A listener that cannot bind is a configuration problem: say which flag sets that port. */
async function listen<T>(flag: string, port: number, start: () => Promise<T>): Promise<T> {
  try {
    return await start();
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EADDRINUSE') throw new ConfigError(`${flag}=${port}: the port is already in use`);
    if (code === 'EACCES') throw new ConfigError(`${flag}=${port}: no permission to bind this port`);
    if (code === 'EADDRNOTAVAIL')
      throw new ConfigError(`--host: the address is not available on this machine`);
    throw error;
  }
}

/**
 * Fails at once with listen()'s message when a fixed port (not 0, not disabled) is taken,
 * before a load that may take minutes: the listeners themselves bind only after it.
 * A port taken in between still fails at bind time.
 */
export async function checkPortsFree(config: ServerConfig): Promise<void> {
  const ports: [string, number][] = [
    ['--rest_api_port', config.restPort],
    ['--port', config.grpcPort],
    ['--sagemaker_port', config.sagemakerPort],
  ];
  for (const [flag, port] of ports) {
    if (port <= 0) continue;
    await listen(flag, port, async () => {
      const probe = createNetServer();
      await new Promise<void>((resolve, reject) => {
        probe.once('error', reject);
        probe.listen({ port, host: config.host.replace(/^\[|\]$/g, ''), exclusive: true }, resolve);
      });
      await new Promise<void>((resolve) =>
        probe.close(() => {
          resolve();
        }),
      );
    });
  }
}

/**
 * TF Serving's order by default: the initial models load first and the ports open once
 * they are in, so that no client of a configured model sees NOT_FOUND while it loads
 * (a fixed port that is taken still fails before the load, `checkPorts`). With
 * `portsFirst` (--open_ports_before_models_load) the listeners open first: /healthz,
 * metrics and SageMaker /ping answer during a long load, /readyz answers 503 until it
 * settled, and model requests get NOT_FOUND meanwhile.
 */
export async function startInOrder<T>(
  portsFirst: boolean,
  openListeners: () => Promise<T>,
  loadModels: () => Promise<void>,
  checkPorts: () => Promise<void>,
): Promise<T> {
  if (portsFirst) {
    const opened = await openListeners();
    await loadModels();
    return opened;
  }
  await checkPorts();
  await loadModels();
  return openListeners();
}

export function createListeners(deps: ListenerDeps): Listeners {
  const { config, ops, core } = deps;
  const kserve = createKServe(deps);
  // Live video: frame streams (WebSocket on the REST port, a gRPC method), one core for every transport.
  const frameStreams = createFrameStreams({
    service: core.service,
    imageDecodes: deps.imageDecodes,
    logger: deps.logger.child({ component: 'stream' }),
    observer: core.requestObserver,
    limits: {
      maxOpen: config.streamMaxOpen,
      maxFrameBytes: config.streamMaxFrameBytes,
      queueFrames: config.streamQueueFrames,
      inflightFrames: config.streamInflightFrames,
      unsentAnswers: config.streamUnsentAnswers,
      frameTimeoutMs: config.restTimeoutMs,
    },
  });
  // One set of TF Serving gRPC services: the HTTP/2 server and gRPC-web on the REST port share it.
  const tfsGrpcServices = createTfsGrpcServices({
    service: core.service,
    imageDecodes: deps.imageDecodes,
    logger: deps.logger.child({ component: 'grpc' }),
    serializeAsTensorContent: config.serializeAsTensorContent,
    readModelServerConfig: (message) => modelConfigsFromMessage(message),
    managementGuard: ops.guard,
  });
  let rest: StartedHttpServer | undefined;
  let grpc: RunningGrpcServer | undefined;
  let sagemaker: StartedHttpServer | undefined;
  return {
    get ports() {
      return {
        ...(grpc ? { grpc: grpc.port } : {}),
        ...(rest ? { rest: rest.port } : {}),
        ...(sagemaker ? { sagemaker: sagemaker.port } : {}),
      };
    },
    grpcConnections: () =>
      grpc === undefined ? undefined : { open: grpc.connections, limitCloses: grpc.limitCloses },
    frameStreams: () => frameStreams.counts(),
    listenerConnections: () =>
      (
        [
          ['rest', rest],
          ['sagemaker', sagemaker],
          ['grpc', grpc],
        ] as const
      ).flatMap(([listener, server]) =>
        server === undefined ? [] : [{ listener, open: server.connections, guardCloses: server.guardCloses }],
      ),
    async open() {
      if (config.restPort >= 0) rest = await openRest(deps, kserve, tfsGrpcServices, frameStreams);
      if (config.grpcPort >= 0)
        grpc = await openGrpc(deps, kserve, [...tfsGrpcServices, createGrpcFrameStreamService(frameStreams)]);
      const invoker = createInvoker(deps, rest?.port, grpc?.port);
      if (config.sagemakerPort >= 0)
        sagemaker = await openSageMaker(deps, kserve, invoker, rest?.port, grpc?.port);
      return invoker;
    },
    async close(graceMs) {
      // Frame streams never end on their own: they are closed (WebSocket 1001, gRPC UNAVAILABLE) first.
      frameStreams.closeAll();
      // Listeners drain together: no new connections, keep-alive clients told to go, in-flight requests finish.
      await Promise.all([rest?.close(graceMs), grpc?.close(graceMs), sagemaker?.close(graceMs)]);
      await core.handlerHost?.close();
    },
  };
}

function createKServe(deps: ListenerDeps): KServeService {
  const { config, core } = deps;
  return createKServeService({
    service: core.service,
    registry: core.manager,
    statistics: core.statistics,
    roots: {
      list: () => listModelDirectories(config.modelRoots),
      resolve: (name) => findModelDirectory(config.modelRoots, name),
    },
    modelControl: config.kserveModelControlMode,
    rescan: () => core.manager.poll(),
    serverVersion: serverVersion(),
    maxBatchSize: deps.maxBatchSize ?? NO_BATCH_LIMIT,
    instanceCount: config.instances,
    dynamicBatching: config.enableBatching,
    logger: deps.logger.child({ component: 'kserve' }),
  });
}

function kserveApi(
  deps: ListenerDeps,
  kserve: KServeService,
  bodyLimitBytes: number,
  requestTimeoutMs: number,
): HttpApi {
  return createKServeHttpApi({
    kserve,
    bodyLimitBytes,
    requestTimeoutMs,
    managementGuard: deps.ops.guard,
    jsonDecode: deps.core.jsonDecode,
  });
}

function opsApi(deps: ListenerDeps): HttpApi {
  const { ops } = deps;
  return createOpsApi({
    readiness: deps.readiness.check,
    metrics:
      ops.metrics === undefined
        ? undefined
        : {
            path: ops.metricsPath,
            contentType: ops.metrics.contentType,
            render: () => metricsOf(ops).render(),
          },
  });
}

function httpOptions(deps: ListenerDeps, port: number) {
  return { ...httpServerSettings(deps.config), port, tls: deps.ops.tls?.listener };
}

/** The window over which `--min_request_body_bytes_per_s` is measured, in ms. */
const UPLOAD_RATE_WINDOW_MS = 5000;

function edgeOptions(deps: ListenerDeps) {
  const { config, core } = deps;
  return {
    observer: core.requestObserver,
    cors: config.enableCors,
    budget: core.budget,
    uploadRate: { minBytesPerSecond: config.minRequestBodyBytesPerS, windowMs: UPLOAD_RATE_WINDOW_MS },
  };
}

/** The REST listener: TF Serving REST, KServe v2 HTTP, ops, console, gRPC-web. */
function openRest(
  deps: ListenerDeps,
  kserve: KServeService,
  tfsGrpcServices: GrpcService[],
  frameStreams: FrameStreams,
): Promise<StartedHttpServer> {
  const { config, core, logger } = deps;
  const apis = [
    opsApi(deps),
    createTfsRestApi({
      service: core.service,
      imageDecodes: deps.imageDecodes,
      bodyLimitBytes: config.restMaxBodyBytes,
      requestTimeoutMs: config.restTimeoutMs,
      jsonDecode: core.jsonDecode,
    }),
    ...(config.kserveRest ? [kserveApi(deps, kserve, config.restMaxBodyBytes, config.restTimeoutMs)] : []),
    ...(config.enableConsole || config.enableOpenapi ? [consoleApi(deps)] : []),
    ...(config.enableGrpcWeb ? [grpcWebApi(deps, tfsGrpcServices)] : []),
  ];
  return listen('--rest_api_port', config.restPort, () =>
    startHttpServer({
      ...httpOptions(deps, config.restPort),
      upgrade: createWebSocketStreams(frameStreams, { idleTimeoutMs: config.requestBodyTimeoutMs }),
      edge: createHttpEdge({
        ...edgeOptions(deps),
        apis,
        logger: logger.child({ component: 'rest' }),
        notFoundMessage: (method, path) => `No handler for ${method} ${path}`,
      }),
    }),
  );
}

function consoleApi(deps: ListenerDeps): HttpApi {
  const { config, core, ops } = deps;
  return createConsoleApi({
    service: core.service,
    guard: ops.guard,
    modelConfig: (name) => core.manager.modelConfig(name),
    versionTimes: (model, version) => core.versionTimes(model, version),
    batching: {
      enabled: config.enableBatching,
      maxBatchSize: deps.maxBatchSize,
      instances: config.instances,
    },
    openApi: config.enableOpenapi
      ? openApiDocument({
          version: serverVersion(),
          metricsPath: ops.metrics === undefined ? undefined : ops.metricsPath,
          consolePath: config.consolePath,
        })
      : undefined,
    staticDir: consoleStaticDir(),
    consolePath: config.enableConsole ? config.consolePath : undefined,
    traffic:
      ops.metrics === undefined ? undefined : createTrafficSampler({ read: () => metricsOf(ops).values() }),
    requestTimeoutMs: config.restTimeoutMs,
    logger: deps.logger.child({ component: 'console' }),
  });
}

function grpcWebApi(deps: ListenerDeps, services: GrpcService[]): HttpApi {
  const { config } = deps;
  const anyOrigin = config.enableCors ? ['*'] : [];
  return createGrpcWebApi({
    services,
    logger: deps.logger.child({ component: 'grpc-web' }),
    maxMessageBytes: config.restMaxBodyBytes,
    requestTimeoutMs: config.restTimeoutMs,
    corsOrigins: config.grpcWebCorsOrigins.length > 0 ? config.grpcWebCorsOrigins : anyOrigin,
  });
}

/** The gRPC listener (TCP port and --grpc_socket_path): TF Serving, frame streams and KServe gRPC. */
function openGrpc(
  deps: ListenerDeps,
  kserve: KServeService,
  services: GrpcService[],
): Promise<RunningGrpcServer> {
  const { config, ops, logger } = deps;
  const channelArguments = parseGrpcChannelArguments(config.grpcChannelArguments);
  if (channelArguments.ignored.length > 0) {
    logger.warn('--grpc_channel_arguments: not applied by this server, ignored', {
      ignored: channelArguments.ignored,
      applied: APPLIED_GRPC_ARGUMENTS,
    });
  }
  const grpcArgs = channelArguments.applied;
  return listen('--port', config.grpcPort, () =>
    startGrpcServer({
      ...grpcServerSettings(config),
      port: config.grpcPort,
      socketPath: config.grpcSocketPath,
      logger: logger.child({ component: 'grpc' }),
      budget: deps.core.budget,
      connectionLimits: {
        maxAgeMs: grpcArgs.maxConnectionAgeMs,
        maxAgeGraceMs: grpcArgs.maxConnectionAgeGraceMs,
        maxIdleMs: grpcArgs.maxConnectionIdleMs,
        keepaliveTimeMs: grpcArgs.keepaliveTimeMs,
        keepaliveTimeoutMs: grpcArgs.keepaliveTimeoutMs,
      },
      maxConcurrentStreams: grpcArgs.maxConcurrentStreams,
      ...(grpcArgs.maxReceiveMessageBytes === undefined || grpcArgs.maxReceiveMessageBytes < 0
        ? {}
        : { maxMessageBytes: grpcArgs.maxReceiveMessageBytes }),
      observer: deps.core.requestObserver,
      tls: ops.tls?.listener,
      services: [
        ...services,
        ...(config.kserveGrpc
          ? [
              createKServeGrpcService({
                kserve,
                managementGuard: ops.guard,
                logger: logger.child({ component: 'kserve-grpc' }),
              }),
            ]
          : []),
      ],
    }),
  );
}

/** The SageMaker invoker: /invocations in-process and on the SageMaker port; its handler host starts on first use. */
function createInvoker(
  deps: ListenerDeps,
  restPort: number | undefined,
  grpcPort: number | undefined,
): SageMakerInvoker {
  const { config, core, ops, logger } = deps;
  const host = createHandlerHost({
    workers: config.sagemakerHandlerWorkers,
    logger: logger.child({ component: 'handler-host' }),
  });
  core.handlerHost = host;
  const scheme = ops.tls === undefined ? 'http' : 'https';
  return createSageMakerInvoker({
    service: core.service,
    logger: logger.child({ component: 'sagemaker' }),
    handlerHost: host,
    imageDecodes: deps.imageDecodes,
    defaultModelName: config.sagemakerDefaultModelName,
    jsonDecode: core.jsonDecode,
    restBaseUrl: restPort === undefined ? undefined : `${scheme}://${loopbackFor(config.host)}:${restPort}`,
    grpcPort,
    executionParameters: {
      MaxConcurrentTransforms:
        config.sagemakerMaxConcurrentTransforms > 0
          ? config.sagemakerMaxConcurrentTransforms
          : 2 * config.instances,
      BatchStrategy: 'MULTI_RECORD',
      MaxPayloadInMB: config.sagemakerMaxPayloadMb,
    },
  });
}

function openSageMaker(
  deps: ListenerDeps,
  kserve: KServeService,
  invoker: SageMakerInvoker,
  restPort: number | undefined,
  grpcPort: number | undefined,
): Promise<StartedHttpServer> {
  const { config, core, ops, logger } = deps;
  const api = createSageMakerApi({
    service: core.service,
    invoker,
    registry: core.manager,
    logger: logger.child({ component: 'sagemaker' }),
    resolveModelLocation: (url) => deps.catalog.resolveSageMakerLocation(url),
    multiModel: config.sagemakerMultiModel,
    maxModels: config.sagemakerMaxModels,
    memoryLimitBytes: config.sagemakerMemoryLimitBytes,
    modelLoadTimeoutMs: config.sagemakerModelLoadTimeoutMs,
    bodyLimitBytes: config.sagemakerMaxBodyBytes,
    requestTimeoutMs: config.sagemakerRequestTimeoutMs,
    grpcPort,
    restPort,
    managementGuard: ops.guard,
  });
  const kserveHere = config.kserveSagemakerPort
    ? [kserveApi(deps, kserve, config.sagemakerMaxBodyBytes, config.sagemakerRequestTimeoutMs)]
    : [];
  return listen('--sagemaker_port', config.sagemakerPort, () =>
    startHttpServer({
      ...httpOptions(deps, config.sagemakerPort),
      edge: createHttpEdge({
        ...edgeOptions(deps),
        apis: [opsApi(deps), api, ...kserveHere],
        logger: logger.child({ component: 'sagemaker' }),
        notFoundMessage: () => 'Not Found',
      }),
    }),
  );
}
