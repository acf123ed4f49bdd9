/**
 * Client for the SageMaker-style endpoint (`POST /invocations`, `GET /ping`), following the
 * SageMaker TF Serving container contract: the model, version and method travel in
 * `X-Amzn-SageMaker-Custom-Attributes` (`tfs-model-name=...,tfs-model-version=...,tfs-method=...`).
 */
import { Code, ServingError } from '@visionserve/protocol';
import type { ClientTlsOptions } from './client-tls.js';
import { type CallOptions, withCallScope } from './call-options.js';
import { type HttpTransport, createHttpTransport, errorFromHttp } from './http-transport.js';
import type { WireBytes } from './results.js';

export interface InvocationsClientOptions {
  /** Base URL of the endpoint, e.g. "http://127.0.0.1:8080". */
  readonly baseUrl: string;
  /** TLS settings for an https:// base URL: a private CA, a client certificate (ClientTlsOptions). */
  readonly tls?: ClientTlsOptions;
  /** Deadline applied to calls that set no `timeoutMs`, in ms. Default none. */
  readonly defaultTimeoutMs?: number;
  /** Keep-alive sockets (and requests in flight). Default 16. */
  readonly maxSockets?: number;
  /** Headers sent with every request. */
  readonly headers?: Readonly<Record<string, string>>;
}

export interface InvokeOptions extends CallOptions {
  /**
   * Request Content-Type. Default: `application/x-image` for bytes (an encoded image),
   * `application/json` for strings and objects.
   */
  readonly contentType?: string;
  /** Accept header. Default `application/json`. */
  readonly accept?: string;
  /** `tfs-model-name`: which model answers (the server's default model when omitted). */
  readonly model?: string;
  /** `tfs-model-version`. */
  readonly version?: number;
  /** `tfs-method` (predict, classify, regress). */
  readonly method?: string;
  /** More custom attributes: a raw header value, or key -> value pairs appended to the ones above. */
  readonly customAttributes?: string | Readonly<Record<string, string>>;
}

export interface InvocationResult {
  /** HTTP status (2xx; other statuses reject). */
  readonly status: number;
  readonly contentType: string;
  readonly body: Uint8Array;
  /** The body parsed as JSON (INTERNAL when it is not JSON). */
  json(): unknown;
  readonly wire: WireBytes;
}

export interface InvocationsClient {
  /**
   * POST /invocations. `body` is sent as is (bytes or a string) or as JSON (any other
   * value). Rejects with a ServingError for non-2xx answers (code from the HTTP status,
   * message from `{"error": ...}`).
   */
  invoke(body: Uint8Array | string | object, options?: InvokeOptions): Promise<InvocationResult>;
  /** GET /ping: true on 200, false on any other status; rejects on transport errors. */
  ping(options?: CallOptions): Promise<boolean>;
  close(): void;
}

/** The `X-Amzn-SageMaker-Custom-Attributes` value for the options (undefined when empty). */
export function customAttributesHeader(options: InvokeOptions): string | undefined {
  const pairs: string[] = [];
  if (options.model !== undefined) pairs.push(`tfs-model-name=${options.model}`);
  if (options.version !== undefined) pairs.push(`tfs-model-version=${options.version}`);
  if (options.method !== undefined) pairs.push(`tfs-method=${options.method}`);
  const extra = options.customAttributes;
  if (typeof extra === 'string') {
    if (extra !== '') pairs.push(extra);
  } else if (extra !== undefined) {
    for (const [k, v] of Object.entries(extra)) pairs.push(`${k}=${v}`);
  }
  for (const pair of pairs) {
    if (/[\r\n]/.test(pair))
      throw new ServingError(Code.INVALID_ARGUMENT, 'Custom attributes may not contain line breaks');
  }
  return pairs.length > 0 ? pairs.join(',') : undefined;
}

export function createInvocationsClient(options: InvocationsClientOptions): InvocationsClient {
  const transport: HttpTransport = createHttpTransport({
    baseUrl: options.baseUrl,
    ...(options.tls !== undefined ? { tls: options.tls } : {}),
    ...(options.maxSockets !== undefined ? { maxSockets: options.maxSockets } : {}),
    ...(options.headers !== undefined ? { headers: options.headers } : {}),
  });
  return {
    invoke(body, invokeOptions = {}) {
      let bytes: Uint8Array;
      let defaultType: string;
      if (body instanceof Uint8Array) {
        bytes = body;
        defaultType = 'application/x-image';
      } else if (typeof body === 'string') {
        bytes = Buffer.from(body, 'utf8');
        defaultType = 'application/json';
      } else {
        bytes = Buffer.from(JSON.stringify(body), 'utf8');
        defaultType = 'application/json';
      }
      const headers: Record<string, string> = {
        'content-type': invokeOptions.contentType ?? defaultType,
        accept: invokeOptions.accept ?? 'application/json',
      };
      const attributes = customAttributesHeader(invokeOptions);
      if (attributes !== undefined) headers['x-amzn-sagemaker-custom-attributes'] = attributes;
      return withCallScope(invokeOptions, options.defaultTimeoutMs, async (scope) => {
        const res = await transport.request({
          method: 'POST',
          path: '/invocations',
          headers,
          body: bytes,
          signal: scope.signal,
          // An inference: sending it twice has no effect beyond its answer.
          idempotent: true,
        });
        if (res.status < 200 || res.status > 299) throw errorFromHttp(res);
        const responseBody = res.body;
        return {
          status: res.status,
          contentType: res.headers['content-type'] ?? '',
          body: responseBody,
          json() {
            try {
              return JSON.parse(responseBody.toString('utf8')) as unknown;
            } catch {
              throw new ServingError(Code.INTERNAL, 'The /invocations response is not JSON');
            }
          },
          wire: { requestBytes: bytes.byteLength, responseBytes: responseBody.byteLength },
        };
      });
    },
    ping(callOptions) {
      return withCallScope(callOptions, options.defaultTimeoutMs, async (scope) => {
        const res = await transport.request({ method: 'GET', path: '/ping', signal: scope.signal });
        return res.status === 200;
      });
    },
    close() {
      transport.close();
    },
  };
}
