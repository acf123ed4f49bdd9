/**
 * Frame streams as WebSockets on the REST port: `GET /v2/models/{model}[/versions/{v}]/stream
 * ?policy=latest|all` upgraded to a WebSocket; one binary message per encoded frame in, one
 * text message (JSON) per processed frame out. Per-frame errors are answers; fatal ones close
 * the socket with a WebSocket close code and a reason.
 */
import type { IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Socket } from 'node:net';
import { Code, ServingError, toServingError } from '@visionserve/protocol';
import { WebSocketServer, type WebSocket } from 'ws';
import type { UpgradeHandler } from '../http/start-http-server.js';
import { FRAME_POLICIES, type FrameAnswer, type FramePolicy, type FrameStreams } from './frame-stream.js';

const STREAM_PATH = /^\/v2\/models\/([^/]+)(?:\/versions\/([^/]+))?\/stream$/;

/** WebSocket close codes (RFC 6455 §7.4.1). */
export const CLOSE = {
  goingAway: 1001,
  policyViolation: 1008,
  messageTooBig: 1009,
  internalError: 1011,
  tryAgainLater: 1013,
} as const;

/** How long an idle stream that was sent a close frame has to answer it before its socket is destroyed. */
const CLOSE_GRACE_MS = 1000;

export interface WebSocketStreamOptions {
  /** A stream that neither receives nor sends anything this long is closed (half messages, stalled clients). */
  readonly idleTimeoutMs: number;
}

export function createWebSocketStreams(
  streams: FrameStreams,
  options: WebSocketStreamOptions,
): UpgradeHandler {
  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: streams.limits.maxFrameBytes,
    perMessageDeflate: false,
  });
  let draining = false;
  return {
    handle(req, socket, head) {
      const url = new URL(req.url ?? '/', 'http://localhost');
      const match = STREAM_PATH.exec(url.pathname);
      if (match === null || draining || (req.headers.upgrade ?? '').toLowerCase() !== 'websocket') {
        refuseUpgrade(socket, draining ? 503 : 404, draining ? 'Server is shutting down' : 'Not Found');
        return;
      }
      wss.handleUpgrade(req, socket, head, (ws) => {
        serveSocket(streams, ws, req, url, match, options);
      });
    },
    drain() {
      draining = true;
      streams.closeAll();
    },
  };
}

/** Answers an upgrade that is not a stream with a plain HTTP error and closes the socket. */
function refuseUpgrade(socket: Duplex, status: number, message: string): void {
  const body = JSON.stringify({ error: message });
  socket.end(
    `HTTP/1.1 ${status} ${status === 404 ? 'Not Found' : 'Service Unavailable'}\r\nConnection: close\r\n` +
      `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
  );
}

/** The policy and model a stream URL names, or INVALID_ARGUMENT. */
function parseStreamUrl(
  url: URL,
  match: RegExpExecArray,
): { name: string; version?: number; policy: FramePolicy } {
  const policy = url.searchParams.get('policy') ?? 'latest';
  if (!(FRAME_POLICIES as readonly string[]).includes(policy)) {
    throw new ServingError(Code.INVALID_ARGUMENT, `policy must be latest or all, got "${policy}"`);
  }
  const name = decodeURIComponent(match[1]!);
  if (match[2] === undefined) return { name, policy: policy as FramePolicy };
  if (!/^\d+$/.test(match[2])) throw new ServingError(Code.INVALID_ARGUMENT, `Invalid version "${match[2]}"`);
  return { name, version: Number(match[2]), policy: policy as FramePolicy };
}

function serveSocket(
  streams: FrameStreams,
  ws: WebSocket,
  req: IncomingMessage,
  url: URL,
  match: RegExpExecArray,
  options: WebSocketStreamOptions,
): void {
  let stream;
  try {
    const { name, version, policy } = parseStreamUrl(url, match);
    stream = streams.open(
      { model: { name, version }, policy, headers: req.headers, transport: 'http' },
      {
        send: (answer, written) => {
          ws.send(answerText(answer), { binary: false }, written);
        },
        pause: () => {
          ws.pause();
        },
        resume: () => {
          ws.resume();
        },
        fail: (error) => {
          closeWith(ws, error);
        },
      },
    );
  } catch (error) {
    closeWith(ws, toServingError(error));
    return;
  }
  const opened = stream;
  const socket = (req.socket as Socket | undefined) ?? undefined;
  if (options.idleTimeoutMs > 0) {
    socket?.setTimeout(options.idleTimeoutMs, () => {
      opened.fail(new ServingError(Code.DEADLINE_EXCEEDED, `Stream idle for ${options.idleTimeoutMs} ms`));
      // A client stuck in half a message never answers the close: do not wait ws's 30 s for it.
      setTimeout(() => {
        ws.terminate();
      }, CLOSE_GRACE_MS).unref();
    });
  }
  ws.on('message', (data: Buffer) => {
    opened.push(data);
  });
  ws.on('close', () => {
    opened.close();
  });
  // Protocol errors (a message over --stream_max_frame_bytes: 1009, bad framing: 1002) are
  // closed by ws itself with their code; the stream ends with the socket.
  ws.on('error', () => {
    opened.close();
  });
}

/** Closes a socket for a fatal error: the code by kind, the reason its message (at most 123 bytes). */
export function closeWith(ws: WebSocket, error: ServingError): void {
  const code =
    error.reason === 'body-too-large'
      ? CLOSE.messageTooBig
      : error.code === Code.RESOURCE_EXHAUSTED
        ? CLOSE.tryAgainLater
        : error.code === Code.UNAVAILABLE
          ? CLOSE.goingAway
          : error.code === Code.INTERNAL || error.code === Code.UNKNOWN
            ? CLOSE.internalError
            : CLOSE.policyViolation;
  let reason = `${Code[error.code]}: ${error.message}`;
  while (Buffer.byteLength(reason) > 123) reason = reason.slice(0, -1);
  if (ws.readyState === ws.OPEN) ws.close(code, reason);
}

const ms = (value: number): number => Math.round(value * 1000) / 1000;

/** The JSON text of one answer (the result is the /invocations answer's JSON, inserted as it is). */
export function answerText(answer: FrameAnswer): string {
  if ('error' in answer) {
    return JSON.stringify({
      frame: answer.frame,
      error: { code: Code[answer.error.code], message: answer.error.message },
    });
  }
  const { timings } = answer;
  return (
    `{"frame":${answer.frame},"model_version":"${answer.modelVersion}","result":${answer.resultJson},` +
    `"timings":{"queue_ms":${ms(timings.queueMs)},"inference_ms":${ms(timings.inferenceMs)},"total_ms":${ms(timings.totalMs)}},` +
    `"dropped":${answer.dropped}}`
  );
}
