/**
 * Live: the browser's camera (getUserMedia) or a chosen video file, sent frame by frame over
 * the model's WebSocket frame stream (`/v2/models/{m}/stream?policy=latest`, docs/video.md),
 * with the answers drawn over the video: boxes and labels for detectors, the top classes for
 * classifiers; frames/s answered, latency and frames dropped by the server.
 */
import { models, servingVersion } from './api.js';
import { type LabelledBox, drawBoxes } from './boxes.js';
import { formatMs, h } from './dom.js';

/**
 * Frames sent and neither answered nor dropped at most (one running, one waiting on the server);
 * a frame the server dropped is never answered, so this counts from the last answered index.
 */
const OUTSTANDING = 2;
const MIN_SCORE = 0.3;

interface Answer {
  readonly frame: number;
  readonly result?: { predictions: unknown[] };
  readonly dropped?: number;
  readonly error?: { code: string; message: string };
}

let stopCurrent: (() => void) | undefined;

/** Stops the running stream and camera, if any (leaving the view). */
export function stopLive(): void {
  stopCurrent?.();
  stopCurrent = undefined;
}

export async function renderLive(view: HTMLElement): Promise<void> {
  stopLive();
  const available = (await models()).filter((m) => servingVersion(m) !== undefined);
  const modelSelect = h(
    'select',
    { id: 'live-model', name: 'model' },
    ...available.map((m) => h('option', { value: m.name }, m.name)),
  );
  const camera = h('button', { type: 'button', id: 'live-camera' }, 'Start camera');
  const fileInput = h('input', { type: 'file', id: 'live-file', accept: 'video/*' });
  const stop = h('button', { type: 'button', id: 'live-stop' }, 'Stop');
  const video = h('video', { muted: '', playsinline: '', hidden: '' });
  video.muted = true;
  const canvas = h('canvas', {
    id: 'live-canvas',
    'data-testid': 'live-canvas',
    'aria-label': 'Live video with results',
  });
  const stats = h(
    'p',
    { id: 'live-stats', 'data-testid': 'live-stats', 'aria-live': 'polite' },
    'Not running.',
  );
  const labels = h('ul', { id: 'live-labels', 'data-testid': 'live-labels' });
  const start = (source: MediaStream | string): void => {
    stopLive();
    stopCurrent = runLive(modelSelect.value, source, video, canvas, stats, labels);
  };
  camera.addEventListener('click', () => {
    navigator.mediaDevices
      .getUserMedia({ video: true, audio: false })
      .then(start)
      .catch((error: unknown) => {
        stats.textContent = `Camera unavailable: ${String(error)}`;
      });
  });
  fileInput.addEventListener('change', () => {
    const file = fileInput.files?.[0];
    if (file !== undefined) start(URL.createObjectURL(file));
  });
  stop.addEventListener('click', stopLive);
  view.replaceChildren(
    h('h2', {}, 'Live'),
    h(
      'p',
      {},
      'Frames go to the model over its WebSocket frame stream (policy latest); answers are drawn as they come.',
    ),
    h(
      'div',
      { class: 'row' },
      h('label', {}, 'Model ', modelSelect),
      camera,
      h('label', {}, 'Video file ', fileInput),
      stop,
    ),
    stats,
    canvas,
    labels,
    video,
  );
}

/** Streams `source` to `model` until the returned stop is called. */
function runLive(
  model: string,
  source: MediaStream | string,
  video: HTMLVideoElement,
  canvas: HTMLCanvasElement,
  stats: HTMLElement,
  labels: HTMLElement,
): () => void {
  if (typeof source === 'string') {
    video.src = source;
    video.loop = true;
  } else video.srcObject = source;
  void video.play();
  const scheme = location.protocol === 'https:' ? 'wss:' : 'ws:';
  const ws = new WebSocket(
    `${scheme}//${location.host}/v2/models/${encodeURIComponent(model)}/stream?policy=latest`,
  );
  const sentAt: number[] = [];
  const answeredAt: number[] = [];
  let latest: Answer | undefined;
  let latencyMs = 0;
  let running = true;
  const grab = document.createElement('canvas');
  let lastFrame = -1;
  let encoding = false;
  // Each video frame is sent once: a 10 frames/s camera on a faster model sends 10 frames/s.
  const watchable = 'requestVideoFrameCallback' in HTMLVideoElement.prototype;
  let fresh = true;
  const watch = (): void => {
    video.requestVideoFrameCallback(() => {
      fresh = true;
      if (running) watch();
    });
  };
  if (watchable) watch();
  const send = (): void => {
    if (!running || encoding || !fresh || ws.readyState !== WebSocket.OPEN || video.videoWidth === 0) return;
    if (sentAt.length - (lastFrame + 1) >= OUTSTANDING) return;
    grab.width = video.videoWidth;
    grab.height = video.videoHeight;
    grab.getContext('2d')!.drawImage(video, 0, 0);
    encoding = true;
    fresh = !watchable;
    grab.toBlob(
      (blob) => {
        encoding = false;
        if (blob === null || !running || ws.readyState !== WebSocket.OPEN) return;
        sentAt.push(performance.now());
        ws.send(blob);
      },
      'image/jpeg',
      0.85,
    );
  };
  ws.addEventListener('message', (event: MessageEvent<string>) => {
    const answer = JSON.parse(event.data) as Answer;
    const now = performance.now();
    answeredAt.push(now);
    lastFrame = Math.max(lastFrame, answer.frame);
    latencyMs = now - (sentAt[answer.frame] ?? now);
    latest = answer;
    showLabels(labels, answer);
  });
  ws.addEventListener('close', (event) => {
    if (running)
      stats.textContent = `Stream closed (${event.code}${event.reason ? `: ${event.reason}` : ''}).`;
    running = false;
  });
  const draw = (): void => {
    if (!running) return;
    if (video.videoWidth > 0) {
      canvas.width = video.videoWidth;
      canvas.height = video.videoHeight;
      const ctx = canvas.getContext('2d')!;
      ctx.drawImage(video, 0, 0);
      const detections = detectionsOf(latest);
      canvas.dataset['boxes'] = String(detections.filter((d) => d.score >= MIN_SCORE).length);
      drawBoxes(ctx, canvas.width, canvas.height, detections, MIN_SCORE);
    }
    const recent = answeredAt.filter((t) => t > performance.now() - 2000).length / 2;
    stats.textContent = `${recent.toFixed(1)} frames/s · latency ${formatMs(latencyMs)} · ${latest?.dropped ?? 0} dropped · ${answeredAt.length} answered`;
    send();
    requestAnimationFrame(draw);
  };
  requestAnimationFrame(draw);
  return () => {
    running = false;
    ws.close(1000);
    video.pause();
    if (typeof source === 'string') URL.revokeObjectURL(source);
    else for (const track of source.getTracks()) track.stop();
    stats.textContent = 'Stopped.';
  };
}

/** The boxes of a detector's answer (none for other answers). */
function detectionsOf(answer: Answer | undefined): readonly LabelledBox[] {
  const first = answer?.result?.predictions[0] as { detections?: LabelledBox[] } | undefined;
  return first?.detections ?? [];
}

/** The answer as a list: detections' labels, or a classifier's top classes, or its error. */
function showLabels(list: HTMLElement, answer: Answer): void {
  if (answer.error !== undefined) {
    list.replaceChildren(h('li', { class: 'error' }, `${answer.error.code}: ${answer.error.message}`));
    return;
  }
  const detections = detectionsOf(answer);
  const first = answer.result?.predictions[0];
  const items: { label?: string; class_id: number; score: number }[] =
    detections.length > 0
      ? detections.filter((d) => d.score >= MIN_SCORE)
      : Array.isArray(first)
        ? (first as { label?: string; class_id: number; score: number }[]).slice(0, 5)
        : [];
  list.replaceChildren(
    ...items.map((d) => h('li', {}, `${d.label ?? d.class_id} ${(d.score * 100).toFixed(0)}%`)),
  );
}
