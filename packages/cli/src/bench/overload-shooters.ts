/**
 * The overload test's load generators: one request per `fire` with a body encoded once,
 * the answer classified (OK, shed, deadline, timeout, other) and otherwise discarded, so
 * that the generator spends as little CPU per request as possible (it shares the machine
 * with the server). gRPC speaks node:http2 directly (no grpc-js, no message decoding)
 * and tells a status the server sent from a stream that died in transport; REST uses a
 * keep-alive node:http Agent with as many sockets as requests are outstanding.
 */
import http from 'node:http';
import http2 from 'node:http2';
import type { ClientHttp2Session, IncomingHttpHeaders } from 'node:http2';
import { GRPC_RECEIVE_WINDOW_BYTES } from '@visionserve/client';
import { Code } from '@visionserve/protocol';

/**
 * How a request ended. `shed`: refused by admission control in the agreed way (gRPC
 * UNAVAILABLE or RESOURCE_EXHAUSTED, HTTP 503); `shed-429`: HTTP 429, a refusal the targets
 * do not count as the agreed one; `deadline`: the server answered DEADLINE_EXCEEDED (gRPC)
 * or 504 / 408; `timeout`: no answer within the generator's timeout; `error`: anything
 * else (another status, a reset stream or connection).
 */
export type ShotOutcome = 'ok' | 'shed' | 'shed-429' | 'deadline' | 'timeout' | 'error';

export interface ShotResult {
  readonly outcome: ShotOutcome;
  /** What exactly: `OK`, `UNAVAILABLE`, `HTTP 503`, `transport: ECONNRESET`, `timeout`... */
  readonly label: string;
  /** Response bytes received (the body, without framing). */
  readonly responseBytes: number;
  /** What a refusal or error said (grpc-message, or the start of the HTTP body). */
  readonly message?: string;
}

/** Longest message kept per answer. */
const MESSAGE_CHARS = 200;

export interface Shooter {
  /** Sends one request; `done` is called exactly once, when the answer (or its failure) is known. */
  fire(done: (result: ShotResult) => void): void;
  /** Requests sent and not yet settled. */
  readonly outstanding: number;
  /** Connections opened so far. */
  readonly connections: number;
  close(): void;
}

const CODE_NAMES: Readonly<Record<number, string>> = Object.fromEntries(
  Object.entries(Code)
    .filter(([, v]) => typeof v === 'number')
    .map(([k, v]) => [v as number, k]),
);

/** The outcome of a gRPC status code the server sent. */
export function grpcOutcome(code: number): ShotOutcome {
  if (code === 0) return 'ok';
  if (code === 14 || code === 8) return 'shed'; // UNAVAILABLE, RESOURCE_EXHAUSTED
  if (code === 4) return 'deadline';
  return 'error';
}

/** The outcome of an HTTP status. */
export function httpOutcome(status: number): ShotOutcome {
  if (status >= 200 && status < 300) return 'ok';
  if (status === 503) return 'shed';
  if (status === 429) return 'shed-429';
  if (status === 504 || status === 408) return 'deadline';
  return 'error';
}

export interface GrpcShooterOptions {
  /** "host:port". */
  readonly address: string;
  /** Method path, e.g. `/tensorflow.serving.PredictionService/Predict`. */
  readonly path: string;
  /** The serialized request message (without the 5-byte gRPC prefix). */
  readonly message: Uint8Array;
  /** Sent as `grpc-timeout` and enforced here (plus one second for the server's answer to arrive). */
  readonly timeoutMs: number;
  /** HTTP/2 connections the requests are spread over (round robin). Default 1, as a gRPC channel. */
  readonly connections?: number;
}

/** The gRPC generator's node:http2 maxSessionMemory, MB: never the limit (see createGrpcShooter). */
export const GENERATOR_SESSION_MEMORY_MB = 1_000_000;

export function createGrpcShooter(options: GrpcShooterOptions): Shooter {
  const authority = `http://${options.address}`;
  const frame = Buffer.allocUnsafe(5 + options.message.byteLength);
  frame[0] = 0;
  frame.writeUInt32BE(options.message.byteLength, 1);
  frame.set(options.message, 5);
  const headers = {
    ':method': 'POST',
    ':path': options.path,
    'content-type': 'application/grpc',
    te: 'trailers',
    'grpc-timeout': `${Math.max(1, Math.ceil(options.timeoutMs))}m`,
  };
  const sessions: (ClientHttp2Session | undefined)[] = Array.from(
    { length: Math.max(1, options.connections ?? 1) },
    () => undefined,
  );
  let next = 0;
  let outstanding = 0;
  let connections = 0;
  let closed = false;

  const session = (): ClientHttp2Session => {
    const i = next;
    next = (next + 1) % sessions.length;
    const s = sessions[i];
    if (s && !s.closed && !s.destroyed) return s;
    const fresh = http2.connect(authority, {
      // node:http2 counts every request's unsent DATA against this (MB), though all streams
      // share the one request buffer; past it, it resets each stream whose answer arrives with
      // ENHANCE_YOUR_CALM (RST_STREAM 11, no status). At 3× capacity the open loop queues
      // thousands of 600 KB requests on the connection (1800 are 1 GiB): with 1024 the
      // generator itself failed almost every call (docs/overload.md, "Queue as TF Serving").
      maxSessionMemory: GENERATOR_SESSION_MEMORY_MB,
      // Peers may keep many streams open; the server's SETTINGS decide.
      peerMaxConcurrentStreams: 100_000,
      // As @visionserve/client's channel: a receive window below the
      // kernel socket buffers, so that a Node server's writes always complete and it keeps
      // reading our requests (two Node peers with large windows can stall each other).
      settings: { initialWindowSize: GRPC_RECEIVE_WINDOW_BYTES },
    });
    fresh.on('error', () => {
      // Reported per stream.
    });
    fresh.on('connect', () => {
      fresh.setLocalWindowSize(GRPC_RECEIVE_WINDOW_BYTES);
    });
    connections++;
    sessions[i] = fresh;
    return fresh;
  };

  return {
    fire(done) {
      outstanding++;
      let settled = false;
      let bytes = 0;
      let status: number | undefined;
      let message: string | undefined;
      const finish = (outcome: ShotOutcome, label: string): void => {
        if (settled) return;
        settled = true;
        outstanding--;
        clearTimeout(timer);
        done({
          outcome,
          label,
          responseBytes: Math.max(0, bytes - 5),
          ...(outcome !== 'ok' && message !== undefined ? { message } : {}),
        });
      };
      let stream: http2.ClientHttp2Stream;
      try {
        stream = session().request(headers);
      } catch (error) {
        settled = true;
        outstanding--;
        done({
          outcome: 'error',
          label: `transport: ${(error as NodeJS.ErrnoException).code ?? String(error)}`,
          responseBytes: 0,
        });
        return;
      }
      const timer = setTimeout(() => {
        stream.close(http2.constants.NGHTTP2_CANCEL);
        finish('timeout', 'timeout');
      }, options.timeoutMs + 1000);
      const onStatus = (h: IncomingHttpHeaders): void => {
        const raw = h['grpc-status'];
        if (raw !== undefined) status = Number(raw);
        const text = h['grpc-message'];
        if (typeof text === 'string' && text !== '') message = decodeMessage(text).slice(0, MESSAGE_CHARS);
      };
      stream.on('response', (h) => {
        if (h[':status'] !== 200) {
          finish('error', `HTTP ${String(h[':status'])}`);
          stream.close(http2.constants.NGHTTP2_CANCEL);
          return;
        }
        onStatus(h);
      });
      stream.on('trailers', onStatus);
      stream.on('data', (chunk: Buffer) => {
        bytes += chunk.byteLength;
      });
      stream.on('error', () => {
        // The close handler reports it.
      });
      stream.on('close', () => {
        if (status !== undefined) {
          finish(grpcOutcome(status), CODE_NAMES[status] ?? `status ${status}`);
          return;
        }
        const rst = stream.rstCode;
        finish(
          'error',
          rst !== undefined && rst !== http2.constants.NGHTTP2_NO_ERROR
            ? `transport: RST_STREAM ${rst}`
            : 'transport: stream closed without a status',
        );
      });
      stream.end(frame);
    },
    get outstanding() {
      return outstanding;
    },
    get connections() {
      return connections;
    },
    close() {
      if (closed) return;
      closed = true;
      for (const s of sessions) s?.destroy();
    },
  };
}

export interface RestShooterOptions {
  /** "host:port". */
  readonly address: string;
  /** Request path, e.g. `/v1/models/mobilenet:predict`. */
  readonly path: string;
  /** The JSON body, encoded once. */
  readonly body: Uint8Array;
  /** A request without an answer this long is destroyed and counted as a timeout, in ms. */
  readonly timeoutMs: number;
  /** Sockets at most (requests beyond wait in the agent). Default 4096. */
  readonly maxSockets?: number;
  /**
   * Send `Expect: 100-continue` and the body only on `100 Continue` (curl's way for bodies over
   * 1 MB); a request answered without it sends no body. Default false.
   */
  readonly expectContinue?: boolean | undefined;
}

export function createRestShooter(options: RestShooterOptions): Shooter {
  const [host, portText] = splitAddress(options.address);
  const port = Number(portText);
  const agent = new http.Agent({
    keepAlive: true,
    maxSockets: options.maxSockets ?? 4096,
    maxFreeSockets: options.maxSockets ?? 4096,
  });
  let connections = 0;
  const body = Buffer.from(options.body.buffer, options.body.byteOffset, options.body.byteLength);
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'content-length': String(body.byteLength),
    ...(options.expectContinue === true ? { expect: '100-continue' } : {}),
  };
  let outstanding = 0;
  return {
    fire(done) {
      outstanding++;
      let settled = false;
      let bytes = 0;
      let head = '';
      const finish = (outcome: ShotOutcome, label: string): void => {
        if (settled) return;
        settled = true;
        outstanding--;
        clearTimeout(timer);
        done({ outcome, label, responseBytes: bytes, ...(head !== '' ? { message: head } : {}) });
      };
      const req = http.request({ agent, host, port, method: 'POST', path: options.path, headers });
      const timer = setTimeout(() => {
        finish('timeout', 'timeout');
        req.destroy();
      }, options.timeoutMs);
      req.on('socket', () => {
        if (!req.reusedSocket) connections++;
      });
      req.on('response', (res) => {
        const status = res.statusCode ?? 0;
        const outcome = httpOutcome(status);
        const label = `HTTP ${status}`;
        // A refusal is known with its status line (its short body, the message, usually
        // comes in the same packet); an answer once its body is in.
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.byteLength;
          if (outcome !== 'ok' && head.length < MESSAGE_CHARS)
            head += chunk.toString('utf8', 0, Math.min(chunk.byteLength, MESSAGE_CHARS - head.length));
        });
        res.on('end', () => {
          finish(outcome, label);
          // Answered without being asked for its body (Expect: 100-continue, a refusal): the
          // body is never sent, and the request (whose socket the server closes) is let go.
          if (!req.writableEnded) req.destroy();
        });
        res.on('error', () => {
          if (outcome !== 'ok') finish(outcome, label);
          else finish('error', 'transport: response aborted');
        });
        res.on('close', () => {
          if (outcome !== 'ok') finish(outcome, label);
        });
      });
      req.on('error', (error: NodeJS.ErrnoException) => {
        finish('error', `transport: ${error.code ?? error.message}`);
      });
      if (options.expectContinue !== true) {
        req.end(body);
        return;
      }
      req.on('continue', () => {
        req.end(body);
      });
    },
    get outstanding() {
      return outstanding;
    },
    get connections() {
      return connections;
    },
    close() {
      agent.destroy();
    },
  };
}

function decodeMessage(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function splitAddress(address: string): [string, string] {
  const at = address.lastIndexOf(':');
  return [address.slice(0, at).replace(/^\[|\]$/g, ''), address.slice(at + 1)];
}
