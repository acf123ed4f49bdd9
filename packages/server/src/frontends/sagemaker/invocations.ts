import type { HttpContext } from '../http/http-api.js';
import { sendBody } from '../http/send.js';
import { CUSTOM_ATTRIBUTES_HEADER } from './custom-attributes.js';
import type { SageMakerInvoker } from './sagemaker-invoker.js';

/**
 * `POST /invocations` (and multi-model `POST /models/{m}/invoke`): the HTTP side of
 * the invoker (serveInvocation). The body is read only once the request has passed the checks that
 * need none.
 */
export async function invoke(ctx: HttpContext, invoker: SageMakerInvoker, pathModel?: string): Promise<void> {
  const { req, res, signal } = ctx;
  const raw = req.headers[CUSTOM_ATTRIBUTES_HEADER];
  const result = await invoker.invoke(
    {
      body: () => ctx.readBody(),
      bodyLength:
        req.headers['content-length'] === undefined ? undefined : Number(req.headers['content-length']),
      contentType: req.headers['content-type'],
      accept: req.headers.accept,
      customAttributes: Array.isArray(raw) ? raw.join(',') : (raw ?? ''),
      model: pathModel,
    },
    { signal, deadline: ctx.deadline },
  );
  sendBody(res, 200, result.body, result.contentType);
}
