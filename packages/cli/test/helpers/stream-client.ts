import { WebSocket } from 'ws';

/** One answer of a frame stream, as the server sends it. */
export interface StreamAnswer {
  readonly frame: number;
  readonly model_version?: string;
  readonly result?: unknown;
  readonly timings?: { readonly queue_ms: number; readonly inference_ms: number; readonly total_ms: number };
  readonly dropped?: number;
  readonly error?: { readonly code: string; readonly message: string };
}

/** A WebSocket frame stream under test: answers as they arrive, with their arrival times. */
export interface TestStream {
  readonly ws: WebSocket;
  readonly answers: StreamAnswer[];
  /** performance.now() when each answer arrived (same order as answers). */
  readonly arrivals: number[];
  /** Close code and reason once closed. */
  readonly closed: Promise<{ code: number; reason: string }>;
  /** Resolves once an answer for `frame` (or a later one) has arrived. */
  until(frame: number, timeoutMs?: number): Promise<void>;
}

/** Opens `ws://<rest>/v2/models/<path>/stream<query>`; resolves once open (or closed right away). */
export async function openStream(restUrl: string, pathAndQuery: string): Promise<TestStream> {
  const ws = new WebSocket(`${restUrl.replace(/^http/, 'ws')}/v2/models/${pathAndQuery}`);
  const answers: StreamAnswer[] = [];
  const arrivals: number[] = [];
  const waiters: { frame: number; resolve: () => void }[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    ws.on('close', (code, reason) => {
      resolve({ code, reason: reason.toString('utf8') });
      for (const w of waiters.splice(0)) w.resolve();
    });
  });
  ws.on('error', () => undefined);
  ws.on('message', (data, isBinary) => {
    if (isBinary) throw new Error('binary answer');
    const answer = JSON.parse((data as Buffer).toString('utf8')) as StreamAnswer;
    answers.push(answer);
    arrivals.push(performance.now());
    for (let i = waiters.length - 1; i >= 0; i--) {
      if (answer.frame >= waiters[i]!.frame) waiters.splice(i, 1)[0]!.resolve();
    }
  });
  await new Promise<void>((resolve) => {
    ws.once('open', () => {
      resolve();
    });
    ws.once('close', () => {
      resolve();
    });
  });
  return {
    ws,
    answers,
    arrivals,
    closed,
    until(frame, timeoutMs = 60_000) {
      if (answers.some((a) => a.frame >= frame) || ws.readyState === ws.CLOSED) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          reject(new Error(`no answer for frame ${frame} within ${timeoutMs} ms`));
        }, timeoutMs);
        waiters.push({
          frame,
          resolve: () => {
            clearTimeout(timer);
            resolve();
          },
        });
      });
    },
  };
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
