/**
 * A unary gRPC channel over gRPC-web, on `fetch`: runs in browsers, Deno, workers and
 * Node 18+, with no node: module. Binary mode (`application/grpc-web+proto`) by default;
 * text mode (`application/grpc-web-text+proto`, base64) for environments that cannot
 * read binary response bodies.
 */
import { Code, ServingError, codeFromNumber } from '@visionserve/protocol';
import { abortReason } from './call-options.js';
import type { GrpcChannel, UnaryCallOptions } from './grpc-channel-types.js';
import { codeOfHttpStatus, unaryOutcome } from './grpc-status.js';

export interface GrpcWebChannelOptions {
  /** Base URL of the server's REST port, e.g. "http://127.0.0.1:8501" or "" (same origin); a path prefix is kept. */
  readonly baseUrl: string;
  /** Framing: "binary" or "text" (base64). Default "binary". */
  readonly mode?: 'binary' | 'text';
  /** The fetch to use. Default: globalThis.fetch. */
  readonly fetch?: typeof fetch;
  /** Largest accepted response message in bytes. Default 2 GiB - 1. */
  readonly maxReceiveBytes?: number;
}

/** Wire sizes of the last call made on a channel (request and response HTTP bodies, in bytes). */
export interface GrpcWebWireSizes {
  readonly requestBodyBytes: number;
  readonly responseBodyBytes: number;
}

export interface GrpcWebChannel extends GrpcChannel {
  /** Body sizes of the most recent completed call (what the network carried). */
  readonly lastWire: GrpcWebWireSizes | undefined;
}

function decodeMessage(raw: string | null): string {
  if (raw === null) return '';
  try {
    return decodeURIComponent(raw);
  } catch {
    return raw;
  }
}

function toBase64(bytes: Uint8Array): string {
  let binary = '';
  for (let i = 0; i < bytes.byteLength; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary);
}

function fromBase64(text: string): Uint8Array {
  // Several padded chunks may follow each other.
  const pieces = text.replace(/\s/g, '').split(/(?<==)(?=[^=])/);
  const parts: Uint8Array[] = [];
  let total = 0;
  for (const piece of pieces) {
    let binary: string;
    try {
      binary = atob(piece);
    } catch {
      throw new ServingError(Code.INTERNAL, 'Malformed grpc-web-text response: not base64');
    }
    const part = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) part[i] = binary.charCodeAt(i);
    parts.push(part);
    total += part.byteLength;
  }
  if (parts.length === 1) return parts[0]!;
  const out = new Uint8Array(total);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

/** The status of a trailer frame's header lines. */
function parseTrailer(bytes: Uint8Array): { code: Code; message: string } {
  const text = new TextDecoder().decode(bytes);
  let code: Code | undefined;
  let message = '';
  for (const line of text.split('\r\n')) {
    const colon = line.indexOf(':');
    if (colon < 0) continue;
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === 'grpc-status') code = codeFromNumber(Number(value));
    else if (name === 'grpc-message') message = decodeMessage(value);
  }
  if (code === undefined) throw new ServingError(Code.INTERNAL, 'Trailer frame without grpc-status');
  return { code, message };
}

/** The response message of a gRPC-web body (frames), or the call's error status. */
export function parseGrpcWebResponse(body: Uint8Array, maxReceiveBytes: number): Uint8Array {
  let message: Uint8Array | undefined;
  let status: { code: Code; message: string } | undefined;
  let at = 0;
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  while (at < body.byteLength) {
    if (at + 5 > body.byteLength) throw new ServingError(Code.INTERNAL, 'Truncated gRPC-web frame');
    const flag = body[at]!;
    const length = view.getUint32(at + 1);
    if (at + 5 + length > body.byteLength) throw new ServingError(Code.INTERNAL, 'Truncated gRPC-web frame');
    const payload = body.subarray(at + 5, at + 5 + length);
    at += 5 + length;
    if ((flag & 0x80) !== 0) {
      status = parseTrailer(payload);
      break;
    }
    if ((flag & 0x01) !== 0)
      throw new ServingError(Code.UNIMPLEMENTED, 'Compressed responses are not supported');
    if (message !== undefined) throw new ServingError(Code.INTERNAL, 'More than one response message');
    if (length > maxReceiveBytes) {
      throw new ServingError(
        Code.RESOURCE_EXHAUSTED,
        `Received message larger than max (${maxReceiveBytes})`,
      );
    }
    message = payload;
  }
  const outcome = unaryOutcome(status, () =>
    message === undefined ? new ServingError(Code.INTERNAL, 'Response carried no message') : message,
  );
  if (outcome instanceof ServingError) throw outcome;
  return outcome;
}

export function createGrpcWebChannel(options: GrpcWebChannelOptions): GrpcWebChannel {
  const base = options.baseUrl.replace(/\/+$/, '');
  const text = options.mode === 'text';
  const contentType = text ? 'application/grpc-web-text+proto' : 'application/grpc-web+proto';
  const maxReceive = options.maxReceiveBytes ?? 2 ** 31 - 1;
  let lastWire: GrpcWebWireSizes | undefined;

  const unary = async (
    path: string,
    request: Uint8Array | readonly Uint8Array[],
    callOptions: UnaryCallOptions = {},
  ): Promise<Uint8Array> => {
    const doFetch = options.fetch ?? globalThis.fetch;
    const parts = request instanceof Uint8Array ? [request] : request;
    let length = 0;
    for (const part of parts) length += part.byteLength;
    const frame = new Uint8Array(5 + length);
    new DataView(frame.buffer).setUint32(1, length);
    let at = 5;
    for (const part of parts) {
      frame.set(part, at);
      at += part.byteLength;
    }
    const body = text ? new TextEncoder().encode(toBase64(frame)) : frame;
    const headers: Record<string, string> = {
      'content-type': contentType,
      accept: contentType,
      'x-grpc-web': '1',
      ...callOptions.metadata,
    };
    if (callOptions.timeoutMs !== undefined) {
      headers['grpc-timeout'] = `${Math.max(1, Math.ceil(callOptions.timeoutMs))}m`;
    }
    const controller = new AbortController();
    const outer = callOptions.signal;
    if (outer?.aborted) throw abortReason(outer);
    const onAbort = (): void => {
      controller.abort(abortReason(outer!));
    };
    outer?.addEventListener('abort', onAbort, { once: true });
    const timeoutMs = callOptions.timeoutMs;
    const timer =
      timeoutMs === undefined
        ? undefined
        : setTimeout(() => {
            controller.abort(
              new ServingError(Code.DEADLINE_EXCEEDED, `Deadline of ${timeoutMs} ms exceeded`),
            );
          }, timeoutMs);
    try {
      let response: Response;
      let bytes: Uint8Array;
      try {
        response = await doFetch(`${base}${path}`, {
          method: 'POST',
          headers,
          body,
          signal: controller.signal,
        });
        bytes = new Uint8Array(await response.arrayBuffer());
      } catch (error) {
        if (controller.signal.aborted) throw abortReason(controller.signal);
        throw new ServingError(Code.UNAVAILABLE, `gRPC-web request failed: ${String(error)}`);
      }
      lastWire = { requestBodyBytes: body.byteLength, responseBodyBytes: bytes.byteLength };
      if (response.status !== 200) {
        const snippet = new TextDecoder().decode(bytes.subarray(0, 200));
        throw new ServingError(
          codeOfHttpStatus(response.status),
          `HTTP status ${response.status} from gRPC-web endpoint${snippet === '' ? '' : `: ${snippet}`}`,
        );
      }
      const headerStatus = response.headers.get('grpc-status');
      if (headerStatus !== null) {
        const code = codeFromNumber(Number(headerStatus));
        if (code !== Code.OK || bytes.byteLength === 0) {
          throw new ServingError(code, decodeMessage(response.headers.get('grpc-message')));
        }
      }
      const frames = text ? fromBase64(new TextDecoder('latin1').decode(bytes)) : bytes;
      return parseGrpcWebResponse(frames, maxReceive);
    } finally {
      if (timer !== undefined) clearTimeout(timer);
      outer?.removeEventListener('abort', onAbort);
    }
  };

  return {
    unary,
    get lastWire() {
      return lastWire;
    },
    close() {
      // Nothing held: fetch owns its connections.
    },
  };
}
