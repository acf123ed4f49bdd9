/**
 * Where `visionserve video` sends its frames: the server's /invocations logic in this process,
 * a transform's invoke function, or a running server's WebSocket frame stream
 * (`/v2/models/{model}[/versions/{v}]/stream`).
 */
import { Code, toServingError } from '@visionserve/protocol';
import type { RunningVisionServer } from '@visionserve/server';
import WebSocket from 'ws';
import type { TransformInvoke } from '../transform/transform-job.js';
import type { FrameAnswer, FrameInfer } from './video-pipeline.js';

function errorAnswer(code: string, message: string): FrameAnswer {
  return { error: { code, message } };
}

/** Frames answered by an in-process server, exactly as its /invocations route answers JPEG bodies. */
export function inProcessFrameInfer(server: RunningVisionServer, customAttributes: string): FrameInfer {
  return async (jpeg) => {
    try {
      const answer = await server.invoke(
        { body: jpeg, contentType: 'image/jpeg', accept: 'application/json', customAttributes },
        { signal: new AbortController().signal },
      );
      return { result: JSON.parse(Buffer.from(answer.body).toString('utf8')) as unknown };
    } catch (error) {
      const e = toServingError(error);
      return errorAnswer(Code[e.code], e.message);
    }
  };
}

/** Frames answered by any /invocations-like call that returns the body bytes or an HTTP-style failure. */
export function invokeFrameInfer(invoke: TransformInvoke): FrameInfer {
  return async (jpeg) => {
    const answer = await invoke(jpeg, 'image/jpeg', 'application/json');
    if (!answer.ok) return errorAnswer(`HTTP ${answer.status}`, answer.error);
    return { result: JSON.parse(Buffer.from(answer.body).toString('utf8')) as unknown };
  };
}

export interface StreamTarget {
  /** http(s)://host:port of the server's REST port. */
  readonly endpoint: string;
  readonly model: string;
  readonly version?: number | undefined;
  readonly policy: 'latest' | 'all';
}

/** The frame stream's URL for a REST endpoint. */
export function frameStreamUrl(target: StreamTarget): string {
  const base = target.endpoint.replace(/\/+$/, '').replace(/^http/i, 'ws');
  const version = target.version === undefined ? '' : `/versions/${target.version}`;
  return `${base}/v2/models/${encodeURIComponent(target.model)}${version}/stream?policy=${target.policy}`;
}

interface StreamAnswer {
  readonly frame: number;
  readonly model_version?: string;
  readonly result?: unknown;
  readonly error?: { code: string; message: string };
}

export interface FrameStreamClient {
  readonly infer: FrameInfer;
  close(): Promise<void>;
}

/**
 * One WebSocket frame stream: each frame is one binary message; the server answers each
 * processed frame with one JSON text, in frame order, so an answer for message k also says
 * that the unanswered messages before k were dropped (policy `latest`).
 */
export async function openFrameStream(target: StreamTarget): Promise<FrameStreamClient> {
  const url = frameStreamUrl(target);
  const socket = new WebSocket(url, { maxPayload: 64 * 1024 * 1024 });
  await new Promise<void>((resolve, reject) => {
    socket.once('open', resolve);
    socket.once('unexpected-response', (_req, res) => {
      reject(new Error(`${url}: the server answered HTTP ${res.statusCode} (does it serve frame streams?)`));
    });
    socket.once('error', (e) => {
      reject(new Error(`cannot open ${url}: ${e.message}`));
    });
  });
  const pending = new Map<number, (answer: FrameAnswer) => void>();
  let sent = 0;
  let closedWith: Error | undefined;
  const failAll = (error: Error): void => {
    closedWith ??= error;
    for (const [, resolve] of pending) resolve(errorAnswer('UNAVAILABLE', error.message));
    pending.clear();
  };
  socket.on('message', (data, isBinary) => {
    if (isBinary) return;
    let answer: StreamAnswer;
    try {
      answer = JSON.parse((data as Buffer).toString('utf8')) as StreamAnswer;
    } catch {
      return;
    }
    for (const [k, resolve] of pending) {
      if (k > answer.frame) break;
      pending.delete(k);
      if (k < answer.frame) resolve({ dropped: true });
      else if (answer.error !== undefined) resolve(errorAnswer(answer.error.code, answer.error.message));
      else resolve({ result: answer.result, modelVersion: answer.model_version });
    }
  });
  socket.on('close', (code, reason) => {
    failAll(new Error(`the frame stream closed (${code}${reason.length > 0 ? ` ${String(reason)}` : ''})`));
  });
  socket.on('error', (e) => {
    failAll(e);
  });
  const infer: FrameInfer = (jpeg) =>
    new Promise<FrameAnswer>((resolve) => {
      if (closedWith !== undefined) {
        resolve(errorAnswer('UNAVAILABLE', closedWith.message));
        return;
      }
      pending.set(sent++, resolve);
      socket.send(jpeg, { binary: true });
    });
  return {
    infer,
    close: () =>
      new Promise<void>((resolve) => {
        if (socket.readyState === WebSocket.CLOSED) {
          resolve();
          return;
        }
        socket.once('close', () => {
          resolve();
        });
        socket.close(1000);
      }),
  };
}
