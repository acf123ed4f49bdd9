import type { ServableAssets } from '../../contracts/servable-assets.js';
import type { HttpContext, HttpRoute } from '../http/http-api.js';
import { sendBody } from '../http/send.js';
import { tensorRoute } from '../http/tensor-route.js';
import { CUSTOM_ATTRIBUTES_HEADER } from './custom-attributes.js';
import type { SageMakerInvoker } from './sagemaker-invoker.js';
import {
  type DecodedJson,
  type InvocationHead,
  type InvocationPlan,
  decodeInvocationJson,
} from './serve-invocation.js';

/** The head of an invocation from the HTTP request; `model`: the model the path names. */
function invocationHead(ctx: HttpContext, model: string | undefined): InvocationHead {
  const { req } = ctx;
  const raw = req.headers[CUSTOM_ATTRIBUTES_HEADER];
  return {
    contentType: req.headers['content-type'],
    accept: req.headers.accept,
    customAttributes: Array.isArray(raw) ? raw.join(',') : (raw ?? ''),
    model,
  };
}

/**
 * `POST /invocations` (and multi-model `POST /models/{m}/invoke`, whose model `pathModel`
 * names and checks): the HTTP side of the invoker, a tensor route of the edge. The checks
 * that need no body (routing, media types, admission) come before the body is read, and
 * the answer is the one the in-process invoker gives (serveInvocation).
 */
export function invocationsRoute(
  invoker: SageMakerInvoker,
  route: { readonly name: string; readonly path: string | RegExp },
  pathModel?: (ctx: HttpContext) => string,
): HttpRoute {
  const { jsonDecode } = invoker;
  return tensorRoute<ServableAssets, { plan: InvocationPlan; decoded: DecodedJson | undefined }>(
    {
      ...route,
      methods: ['POST'],
      pin: (ctx, fn, call) => invoker.withServable(invocationHead(ctx, pathModel?.(ctx)), fn, call),
      reading: (ctx, servable) => {
        const plan = invoker.plan(servable, invocationHead(ctx, pathModel?.(ctx)));
        const decoder = plan.decodeThread ? jsonDecode : undefined;
        return {
          decodeThread: decoder !== undefined,
          decode: async (body, ticket) => ({
            plan,
            decoded: decoder === undefined ? undefined : await decodeInvocationJson(decoder, body, ticket),
          }),
        };
      },
      handle: async ({ ctx, decoded: { plan, decoded }, body, call }) => {
        const result = await plan.answer(body, decoded, call);
        sendBody(ctx.res, 200, result.body, result.contentType);
      },
    },
    jsonDecode,
  );
}
