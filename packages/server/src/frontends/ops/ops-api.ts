import type { HttpApi, HttpRoute } from '../http/http-api.js';
import { sendBody, sendJson } from '../http/send.js';

/** Why the server is not ready, or undefined when it is. */
export type ReadinessCheck = () => { ready: true } | { ready: false; reason: string; models?: unknown };

export interface OpsApiOptions {
  /** Readiness: every configured model has an AVAILABLE version and the server is not draining. */
  readonly readiness: ReadinessCheck;
  /** Prometheus metrics page; absent: no metrics route on this listener. */
  readonly metrics?:
    | { readonly path: string; readonly contentType: string; readonly render: () => Promise<string> }
    | undefined;
}

/**
 * Health probes and the metrics page, mounted first on every HTTP listener:
 * `GET /healthz` (liveness: 200 whenever the event loop answers), `GET /readyz` (200 when
 * ready, else 503 with the reason) and, when metrics are on, the Prometheus text page.
 * The API is named "ops" (access logs skip it).
 */
export function createOpsApi(options: OpsApiOptions): HttpApi {
  const routes: HttpRoute[] = [
    {
      name: 'healthz',
      methods: ['GET', 'HEAD'],
      path: '/healthz',
      handle: ({ res }) => {
        sendJson(res, 200, '{"status":"alive"}');
      },
    },
    {
      name: 'readyz',
      methods: ['GET', 'HEAD'],
      path: '/readyz',
      handle: ({ res }) => {
        const check = options.readiness();
        if (check.ready) sendJson(res, 200, '{"status":"ready"}');
        else
          sendJson(
            res,
            503,
            JSON.stringify({
              status: 'not ready',
              reason: check.reason,
              ...(check.models ? { models: check.models } : {}),
            }),
          );
      },
    },
  ];
  const metrics = options.metrics;
  if (metrics !== undefined) {
    routes.push({
      name: 'metrics',
      methods: ['GET'],
      path: metrics.path,
      handle: async ({ res }) => {
        sendBody(res, 200, Buffer.from(await metrics.render()), metrics.contentType);
      },
    });
  }
  return { name: 'ops', routes, requestTimeoutMs: 10_000, bodyLimitBytes: 0 };
}
