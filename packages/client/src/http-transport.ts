/**
 * The HTTP/1.1 client transport of the REST, KServe HTTP and /invocations clients, with
 * keep-alive, for http:// and https:// (http1-transport.ts: large bodies are read straight
 * into place). Non-2xx answers become ServingErrors (see errorFromHttp).
 */
import { ServingError, codeForHttpStatus } from '@visionserve/protocol';
import type { HttpResult, HttpTransport, HttpTransportOptions } from './http-call.js';
import { createHttp1Transport } from './http1-transport.js';
import { serverUrl } from './client-tls.js';

export {
  DEFAULT_IDLE_SOCKET_TIMEOUT_MS,
  type HttpCall,
  type HttpResult,
  type HttpTransport,
  type HttpTransportOptions,
  idleSocketTimeout,
} from './http-call.js';

export function createHttpTransport(options: HttpTransportOptions): HttpTransport {
  return createHttp1Transport(serverUrl(options.baseUrl, options.tls, 'base URL'), options);
}

/**
 * The ServingError for a non-2xx answer: the code from the HTTP status (codeForHttpStatus,
 * the inverse of TF Serving's table) and the message of a `{"error": "..."}` body, else
 * the start of the body.
 */
export function errorFromHttp(result: HttpResult): ServingError {
  const text = result.body.toString('utf8');
  let message = text.slice(0, 1024);
  try {
    const json = JSON.parse(text) as unknown;
    if (
      typeof json === 'object' &&
      json !== null &&
      typeof (json as { error?: unknown }).error === 'string'
    ) {
      message = (json as { error: string }).error;
    }
  } catch {
    // not JSON: keep the text
  }
  if (message === '') message = `HTTP ${result.status}`;
  return new ServingError(codeForHttpStatus(result.status), message);
}
