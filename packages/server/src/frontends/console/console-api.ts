/**
 * The web console, the OpenAPI document and its docs UI on the REST port:
 *
 * - `GET /openapi.json`, `GET /docs/` (the docs UI, a static bundle);
 * - `GET <console>/` and its assets (a static single-page app built at `npm run build`);
 * - `GET <console>/api/models`: every model, version and state with load errors, timestamps,
 *   signature, assets and batching settings;
 * - `GET <console>/api/labels/{model}/{version}`: the label names of a version;
 * - `POST <console>/api/try/{model}[/versions/{v}]`: an image in, top-k or detections out
 *   with the timing breakdown (the version's visionserve.json image settings);
 * - `GET <console>/api/traffic`: server-sent events, one sample a second while connected.
 *
 * Model management from the console goes through gRPC-web HandleReloadConfigRequest, so the
 * management guard applies unchanged.
 */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { extname, join, normalize, sep } from 'node:path';
import type { ServerResponse } from 'node:http';
import { Code, ServingError, invalidArgument, notFound } from '@visionserve/protocol';
import type { InferenceService } from '../../core/inference-service.js';
import type { ModelConfig } from '../../core/model-config.js';
import type { ServableAssets } from '../../contracts/servable-assets.js';
import type { Logger } from '../../util/logger.js';
import type { HttpApi, HttpContext, HttpRoute } from '../http/http-api.js';
import { sendJson } from '../http/send.js';
import { createConcurrencyLimit } from '../shared/concurrency-limit.js';
import type { ManagementCredentials, ManagementGuard } from '../shared/management-guard.js';
import { predictImage } from '../shared/image-predict.js';
import type { TrafficSource } from '../shared/traffic-source.js';

/** When a version last changed state and how long its load took (kept by the composition root). */
export interface VersionTimes {
  /** Epoch ms of the last state change seen. */
  readonly since: number;
  /** Load time (warmup included), in ms, once loaded. */
  readonly loadMs?: number | undefined;
}

/** Batching as configured for the server (per-model files may refine it). */
export interface BatchingView {
  readonly enabled: boolean;
  readonly maxBatchSize?: number | undefined;
  readonly instances: number;
}

export interface ConsoleApiOptions {
  /** The one inference API (status, signatures, assets, predictions). */
  readonly service: InferenceService<ServableAssets>;
  /** The configured model of a name (base path, labels, policy). */
  readonly modelConfig: (name: string) => ModelConfig | undefined;
  /** Timestamps of a version's state; undefined when none was recorded. */
  readonly versionTimes: (model: string, version: number) => VersionTimes | undefined;
  readonly batching: BatchingView;
  /** The OpenAPI document, or undefined to serve neither it nor the docs UI. */
  readonly openApi: Record<string, unknown> | undefined;
  /** Directory of the built console (index.html, assets, docs/), or undefined when it is not installed. */
  readonly staticDir: string | undefined;
  /** URL path of the console, e.g. "/console", or undefined to serve no console. */
  readonly consolePath: string | undefined;
  /** Live traffic (from the metrics), or undefined when metrics are off. */
  readonly traffic: TrafficSource | undefined;
  /** Sample interval of the traffic stream in ms. Default 1000. */
  readonly trafficIntervalMs?: number | undefined;
  /** Largest image "Try it" accepts, in bytes. Default 20 MiB. */
  readonly maxImageBytes?: number | undefined;
  /** Deadline of one API request in ms (--rest_api_timeout_in_ms). */
  readonly requestTimeoutMs: number;
  readonly logger: Logger;
  /**
   * Who may see the models' base paths (absolute paths of the host): callers the management
   * guard lets manage models. Default: nobody.
   */
  readonly guard?: ManagementGuard | undefined;
}

const TYPES: Readonly<Record<string, string>> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json',
  '.map': 'application/json',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
  '.ico': 'image/x-icon',
  '.txt': 'text/plain; charset=utf-8',
};

/** Headers of every console page: no framing by other sites, no sniffing, assets from here only. */
const PAGE_HEADERS: Readonly<Record<string, string>> = {
  'X-Content-Type-Options': 'nosniff',
  'X-Frame-Options': 'DENY',
  'Content-Security-Policy':
    "default-src 'self'; img-src 'self' blob: data:; media-src 'self' blob:; style-src 'self' 'unsafe-inline'; connect-src 'self'",
  'Cache-Control': 'no-cache',
};

/** Serves `file` (inside `root`) or answers 404; refuses paths that leave the root. */
async function sendStatic(res: ServerResponse, root: string, relative: string, head: boolean): Promise<void> {
  let decoded: string;
  try {
    decoded = decodeURIComponent(relative);
  } catch {
    throw notFound('Not Found');
  }
  if (decoded.includes('\0')) throw notFound('Not Found');
  const file = normalize(join(root, decoded));
  if (file !== root && !file.startsWith(root.endsWith(sep) ? root : root + sep)) throw notFound('Not Found');
  let size: number;
  try {
    const info = await stat(file);
    if (!info.isFile()) throw new Error('not a file');
    size = info.size;
  } catch {
    throw notFound('Not Found');
  }
  res.writeHead(200, {
    ...PAGE_HEADERS,
    'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream',
    'Content-Length': String(size),
  });
  if (head) {
    res.end();
    return;
  }
  await new Promise<void>((resolve) => {
    const stream = createReadStream(file);
    stream.on('error', () => {
      res.destroy();
      resolve();
    });
    stream.on('end', resolve);
    stream.pipe(res);
  });
}

function redirect(res: ServerResponse, location: string): void {
  res.writeHead(302, { Location: location, 'Content-Length': '0' }).end();
}

/** The docs page: Swagger UI from the bundle beside it, reading /openapi.json. */
const DOCS_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>visionserve API docs</title>
<link rel="stylesheet" href="swagger-ui.css">
</head>
<body>
<main id="swagger-ui"></main>
<script src="swagger-ui-bundle.js"></script>
<script src="docs-init.js"></script>
</body>
</html>
`;

/** `/openapi.json` and the docs UI under `/docs/`. */
function docsRoutes(options: ConsoleApiOptions, openApi: Record<string, unknown>): HttpRoute[] {
  const body = Buffer.from(JSON.stringify(openApi));
  const docsDir = options.staticDir === undefined ? undefined : join(options.staticDir, 'docs');
  return [
    {
      name: 'openapi',
      methods: ['GET', 'HEAD'],
      path: '/openapi.json',
      handle: ({ res }) => {
        sendJson(res, 200, body, { 'Access-Control-Allow-Origin': '*' });
      },
    },
    {
      name: 'docs',
      methods: ['GET', 'HEAD'],
      path: /^\/docs(\/.*)?$/,
      handle: async ({ res, params, method }) => {
        const rest = params?.[1];
        if (rest === undefined) {
          redirect(res, '/docs/');
          return;
        }
        if (rest === '/' || rest === '/index.html') {
          const html = Buffer.from(DOCS_HTML);
          res.writeHead(200, {
            ...PAGE_HEADERS,
            'Content-Type': 'text/html; charset=utf-8',
            'Content-Length': String(html.byteLength),
          });
          res.end(method === 'HEAD' ? undefined : html);
          return;
        }
        if (docsDir === undefined) throw notFound('The docs UI is not installed (@visionserve/console)');
        await sendStatic(res, docsDir, rest.slice(1), method === 'HEAD');
      },
    },
  ];
}

/** The labels of a model version, by class id (the console's Try page). */
async function sendLabels(
  service: ConsoleApiOptions['service'],
  { res, params }: HttpContext,
): Promise<void> {
  const name = modelName(params![1]!);
  const version = Number(params![2]);
  const labels = await service.withServable({ name, version }, (s) =>
    Promise.resolve(s.assets.vision.labels),
  );
  const out: string[] = [];
  if (labels !== undefined) for (const [id, label] of labels) out[id] = label;
  sendJson(res, 200, JSON.stringify({ labels: Array.from(out, (l) => l ?? '') }));
}

/** The console's static single-page app under `base`. */
function consolePageRoute(options: ConsoleApiOptions, base: string, escaped: string): HttpRoute {
  const dir = options.staticDir;
  return {
    name: 'console',
    methods: ['GET', 'HEAD'],
    path: new RegExp(`^${escaped}(/.*)?$`),
    handle: async ({ res, params, method }) => {
      const rest = params?.[1];
      if (rest === undefined) {
        redirect(res, `${base}/`);
        return;
      }
      if (dir === undefined) {
        throw new ServingError(
          Code.NOT_FOUND,
          'The console is not installed: build it with `npm run build` (packages/console)',
        );
      }
      if (rest.startsWith('/api/')) throw notFound('Not Found');
      await sendStatic(res, dir, rest === '/' ? 'index.html' : rest.slice(1), method === 'HEAD');
    },
  };
}

type TryImage = (ctx: HttpContext) => Promise<void>;

/** The console's JSON API and its page, under `base`. */
function consoleRoutes(
  options: ConsoleApiOptions,
  base: string,
  tryImage: TryImage,
  streamTraffic: (ctx: HttpContext) => void,
): HttpRoute[] {
  const escaped = base.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  return [
    {
      name: 'console-models',
      methods: ['GET'],
      path: `${base}/api/models`,
      handle: async (ctx) => {
        const paths = mayManage(options.guard, ctx.credentials());
        sendJson(ctx.res, 200, JSON.stringify({ models: await describeModels(options, paths) }));
      },
    },
    {
      name: 'console-labels',
      methods: ['GET'],
      path: new RegExp(`^${escaped}/api/labels/([^/]+)/([0-9]+)$`),
      handle: (ctx) => sendLabels(options.service, ctx),
    },
    {
      name: 'console-try',
      methods: ['POST'],
      path: new RegExp(`^${escaped}/api/try/([^/]+)(?:/versions/([0-9]+))?$`),
      handle: (ctx) => tryImage(ctx),
    },
    {
      name: 'console-traffic',
      methods: ['GET'],
      path: `${base}/api/traffic`,
      handle: (ctx) => {
        streamTraffic(ctx);
      },
    },
    consolePageRoute(options, base, escaped),
  ];
}

type TryResult = Awaited<ReturnType<typeof predictImage>> & { model: string; version: number };

/** The Try page's answer: the prediction, or the head of each raw output. */
function tryAnswer(result: TryResult, started: number): string {
  const { prediction } = result;
  return JSON.stringify({
    model: result.model,
    version: result.version,
    width: result.originalWidth,
    height: result.originalHeight,
    kind: prediction.kind,
    predictions: prediction.kind === 'raw' ? undefined : prediction.predictions[0],
    outputs:
      prediction.kind === 'raw'
        ? Object.fromEntries(
            Object.entries(prediction.outputs).map(([k, t]) => [
              k,
              {
                dtype: t.dtype,
                shape: t.shape,
                head: Array.from(t.data as ArrayLike<unknown>).slice(0, 16),
              },
            ]),
          )
        : undefined,
    timings: { ...result.timings, totalMs: performance.now() - started },
  });
}

/** The Try page: an uploaded image through the model's own preprocessing and postprocessing. */
function imageTrial(options: ConsoleApiOptions, maxImageBytes: number): TryImage {
  const decodes = createConcurrencyLimit(2);
  return async (ctx) => {
    const name = modelName(ctx.params![1]!);
    const version = ctx.params![2] === undefined ? undefined : Number(ctx.params![2]);
    const started = performance.now();
    const body = await ctx.readBody(maxImageBytes);
    const call = { signal: ctx.signal, deadline: ctx.deadline };
    const result = await options.service.withServable(
      { name, version },
      async (servable) => {
        const image = servable.assets.vision.config?.image;
        if (image === undefined) {
          throw new ServingError(
            Code.FAILED_PRECONDITION,
            `Model "${name}" has no image settings (visionserve.json "image"): send tensors instead`,
          );
        }
        const out = await predictImage(servable, image, body, call, decodes);
        return { ...out, model: servable.name, version: servable.version };
      },
      call,
    );
    sendJson(ctx.res, 200, tryAnswer(result, started));
  };
}

/** Server-sent traffic samples: one sampling loop for every connected client, only while one is. */
function trafficStream(options: ConsoleApiOptions): (ctx: HttpContext) => void {
  const { logger } = options;
  const clients = new Set<ServerResponse>();
  let loop: NodeJS.Timeout | undefined;
  const intervalMs = options.trafficIntervalMs ?? 1000;
  const startLoop = (): void => {
    const stream = options.traffic!.open();
    let busy = false;
    const tick = (): void => {
      if (busy) return;
      busy = true;
      stream
        .next()
        .then((sample) => {
          const frame = `event: sample\ndata: ${JSON.stringify(sample)}\n\n`;
          for (const res of clients) res.write(frame);
        })
        .catch((error: unknown) => {
          logger.warn('traffic sample failed', { error });
        })
        .finally(() => {
          busy = false;
        });
    };
    tick();
    loop = setInterval(tick, intervalMs);
    loop.unref();
  };
  return ({ res, req }) => {
    res.writeHead(200, {
      'Content-Type': 'text/event-stream',
      'Cache-Control': 'no-cache',
      'X-Content-Type-Options': 'nosniff',
    });
    res.flushHeaders();
    // The edge's deadline must not end a stream: keep the socket open until the client leaves.
    req.socket.setTimeout(0);
    if (options.traffic === undefined) {
      res.end(
        `event: unavailable\ndata: ${JSON.stringify({ reason: 'metrics are off: start with --monitoring_config_file (prometheus_config { enable: true })' })}\n\n`,
      );
      return;
    }
    res.write(`retry: 2000\n\n`);
    clients.add(res);
    if (loop === undefined) startLoop();
    res.once('close', () => {
      clients.delete(res);
      if (clients.size === 0 && loop !== undefined) {
        clearInterval(loop);
        loop = undefined;
      }
    });
  };
}

export function createConsoleApi(options: ConsoleApiOptions): HttpApi {
  const maxImageBytes = options.maxImageBytes ?? 20 * 1024 * 1024;
  const routes: HttpRoute[] = [];
  if (options.openApi !== undefined) routes.push(...docsRoutes(options, options.openApi));
  const base = options.consolePath;
  if (base !== undefined) {
    routes.push(...consoleRoutes(options, base, imageTrial(options, maxImageBytes), trafficStream(options)));
  }
  return {
    name: 'console',
    routes,
    requestTimeoutMs: options.requestTimeoutMs,
    bodyLimitBytes: maxImageBytes,
  };
}

/** Everything the Models page shows, read now. */
/** A model name from its URL segment; 400 for a malformed percent-encoding (`%ZZ`). */
function modelName(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    throw invalidArgument(`Malformed percent-encoding in the model name: ${segment.slice(0, 64)}`);
  }
}

/** Whether the guard lets these credentials manage models (and so see base paths). */
function mayManage(guard: ManagementGuard | undefined, credentials: ManagementCredentials): boolean {
  if (guard === undefined) return false;
  try {
    guard.check(credentials, 'see model base paths');
    return true;
  } catch {
    return false;
  }
}

/** The models as the console shows them; `basePath` null unless `paths` (mayManage). */
async function describeModels(options: ConsoleApiOptions, paths: boolean): Promise<unknown[]> {
  const { service } = options;
  const out: unknown[] = [];
  for (const name of service.modelNames()) {
    const config = options.modelConfig(name);
    let statuses: ReturnType<typeof service.status> = [];
    try {
      statuses = service.status({ name });
    } catch {
      // No version known yet.
    }
    const versions: unknown[] = [];
    for (const s of statuses) {
      let details: Record<string, unknown> = {};
      if (s.state === 'AVAILABLE') {
        try {
          details = await service.withServable({ name, version: s.version }, (servable) =>
            Promise.resolve({
              signatures: servable.signatures,
              assets: {
                image: servable.assets.vision.config?.image ?? null,
                postprocess: servable.assets.vision.config?.postprocess ?? null,
                handler: servable.assets.handlerModulePath === undefined ? null : 'code/inference.(m)js',
              },
              labels: servable.assets.vision.labels?.size ?? null,
            }),
          );
        } catch {
          // Unloaded in between.
        }
      }
      const times = options.versionTimes(name, s.version);
      versions.push({
        version: s.version,
        state: s.state,
        error: s.error === undefined ? null : { code: Code[s.error.code], message: s.error.message },
        since: times === undefined ? null : new Date(times.since).toISOString(),
        ...(times?.loadMs === undefined ? {} : { loadMs: Math.round(times.loadMs) }),
        ...details,
      });
    }
    out.push({
      name,
      basePath: paths ? (config?.basePath ?? '') : null,
      versionPolicy: config?.versionPolicy ?? null,
      versionLabels: config?.versionLabels ?? {},
      batching: options.batching,
      versions,
    });
  }
  return out;
}
