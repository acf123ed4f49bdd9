import type { ServerResponse } from 'node:http';
import type { InferenceService } from '../../core/inference-service.js';
import { sendJson, sendJsonError } from '../http/send.js';

/**
 * `GET /ping`: 200 when the default model has an AVAILABLE version (multi-model: 200
 * while the server is up), else 503 `{"error": ...}`. The container answers 502 here
 * (its nginx fronts TF Serving); 503 says that this server itself is not ready yet, and
 * SageMaker only looks for 200.
 */
export function ping(
  res: ServerResponse,
  service: InferenceService,
  defaultModel: string | undefined,
  multiModel: boolean,
): void {
  if (multiModel) {
    sendJson(res, 200, '{"status":"healthy"}');
    return;
  }
  if (defaultModel === undefined) {
    sendJsonError(res, 503, 'No model is configured');
    return;
  }
  let available: number | undefined;
  try {
    available = service.status({ name: defaultModel }).find((s) => s.state === 'AVAILABLE')?.version;
  } catch {
    // Unknown model: not ready.
  }
  if (available === undefined) {
    sendJsonError(res, 503, `Model ${defaultModel} has no AVAILABLE version`);
    return;
  }
  sendJson(
    res,
    200,
    JSON.stringify({ status: 'AVAILABLE', model: defaultModel, version: String(available) }),
  );
}
