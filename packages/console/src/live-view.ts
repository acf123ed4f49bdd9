/**
 * Live: the browser's camera or a chosen video file, sent frame by frame over the WebSocket frame
 * stream (`/v2/models/{model}[/versions/{v}]/stream?policy=latest`, docs/video.md), with the
 * answers drawn over the picture. A frame is encoded (canvas.toBlob, JPEG) only when at most one
 * sent frame is unanswered: one runs on the server, one waits there, none piles up in between.
 */
import { models, servingVersion } from './api.js';
import { formatMs, h } from './dom.js';

interface Box {
  readonly ymin: number;
  readonly xmin: number;
  readonly ymax: number;
  readonly xmax: number;
}
interface Labelled {
  readonly class_id: number;
  readonly label?: string;
  readonly score: number;
  readonly box?: Box;
  readonly track_id?: number;
}
/** One text message of the stream: a processed frame or a frame's error. */
interface FrameAnswer {
  readonly frame: number;
  readonly model_version?: string;
  readonly result?: { predictions?: unknown[] };
  readonly timings?: { queue_ms: number; inference_ms: number; total_ms: number };
  readonly dropped?: number;
  readonly error?: { code: string; message: string };
}

/** Frames sent and not yet answered (or dropped) at most: one running, one waiting on the server. */
const MAX_UNANSWERED = 2;
const JPEG_QUALITY = 0.8;
/** Frames wider than this are scaled down before encoding (the models take 224-640 pixels). */
const MAX_SEND_WIDTH = 640;
const MIN_SCORE = 0.3;
const COLORS = ['#d62728', '#1f77b4', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf'];

/** What the overlay shows: boxes of a detector, or the top classes of a classifier. */
interface Overlay {
  readonly boxes: Labelled[];
  readonly classes: Labelled[];
}

function overlayOf(answer: FrameAnswer): Overlay {
  const first = answer.result?.predictions?.[0];
  if (Array.isArray(first)) return { boxes: [], classes: (first as Labelled[]).slice(0, 3) };
  const detections = (first as { detections?: Labelled[] } | undefined)?.detections ?? [];
  return { boxes: detections.filter((d) => d.box !== undefined && d.score >= MIN_SCORE), classes: [] };
}

function labelOf(d: Labelled): string {
  const track = d.track_id === undefined ? '' : ` #${d.track_id}`;
  return `${d.label ?? `class ${d.class_id}`}${track} ${(d.score * 100).toFixed(0)}%`;
}

function drawLabel(ctx: CanvasRenderingContext2D, text: string, x: number, y: number, color: string): void {
  const size = parseInt(ctx.font, 10);
  const w = ctx.measureText(text).width + 6;
  ctx.fillStyle = color;
  ctx.fillRect(x, y, w, size + 4);
  ctx.fillStyle = '#ffffff';
  ctx.fillText(text, x + 3, y + size);
}

/** The picture, then the last answer's boxes and labels (or top classes) over it. */
function drawFrame(canvas: HTMLCanvasElement, video: HTMLVideoElement, overlay: Overlay | undefined): void {
  const width = video.videoWidth;
  const height = video.videoHeight;
  if (width === 0 || height === 0) return;
  if (canvas.width !== width || canvas.height !== height) {
    canvas.width = width;
    canvas.height = height;
  }
  const ctx = canvas.getContext('2d')!;
  ctx.drawImage(video, 0, 0, width, height);
  if (overlay === undefined) return;
  ctx.lineWidth = Math.max(2, width / 300);
  ctx.font = `${Math.max(14, Math.round(width / 45))}px sans-serif`;
  const size = parseInt(ctx.font, 10) + 4;
  overlay.boxes.forEach((d, i) => {
    const color = COLORS[(d.track_id ?? i) % COLORS.length]!;
    const b = d.box!;
    const x = b.xmin * width;
    const y = b.ymin * height;
    ctx.strokeStyle = color;
    ctx.strokeRect(x, y, (b.xmax - b.xmin) * width, (b.ymax - b.ymin) * height);
    drawLabel(ctx, labelOf(d), x, Math.max(0, y - size), color);
  });
  overlay.classes.forEach((c, i) => {
    drawLabel(ctx, labelOf(c), 8, 8 + i * (size + 2), COLORS[i % COLORS.length]!);
  });
}

/** Answers per second over the last two seconds, and the latency of the last answers. */
function createStats() {
  const answeredAt: number[] = [];
  let latencyMs = NaN;
  let serverMs = NaN;
  let dropped = 0;
  let answers = 0;
  return {
    answered(now: number, roundTripMs: number, answer: FrameAnswer): void {
      answers += 1;
      answeredAt.push(now);
      while (answeredAt.length > 0 && answeredAt[0]! < now - 2000) answeredAt.shift();
      latencyMs = roundTripMs;
      serverMs = answer.timings?.total_ms ?? NaN;
      dropped = answer.dropped ?? dropped;
    },
    snapshot(now: number) {
      const recent = answeredAt.filter((t) => t >= now - 2000);
      const span = recent.length > 1 ? (recent[recent.length - 1]! - recent[0]!) / 1000 : 0;
      return { answers, fps: span > 0 ? (recent.length - 1) / span : 0, latencyMs, serverMs, dropped };
    },
  };
}

/** The stream's URL on this origin (ws: or wss: as the page is served). */
function streamUrl(model: string, version: string): string {
  const path = `/v2/models/${encodeURIComponent(model)}${version === '' ? '' : `/versions/${version}`}/stream`;
  const url = new URL(path, location.href);
  url.protocol = location.protocol === 'https:' ? 'wss:' : 'ws:';
  url.searchParams.set('policy', 'latest');
  return url.toString();
}

interface LiveSession {
  stop(): void;
}

interface LiveElements {
  readonly video: HTMLVideoElement;
  readonly canvas: HTMLCanvasElement;
  readonly status: HTMLElement;
  readonly last: HTMLElement;
  readonly error: HTMLElement;
}

/** One stream: sends frames while fewer than MAX_UNANSWERED are unanswered, draws at display rate. */
function startSession(url: string, els: LiveElements, onEnd: () => void): LiveSession {
  const socket = new WebSocket(url);
  const encoder = document.createElement('canvas');
  const stats = createStats();
  const sentAt = new Map<number, number>();
  let sent = 0;
  let lastFrame = -1;
  let encoding = false;
  let overlay: Overlay | undefined;
  let stopped = false;
  let raf = 0;
  // A frame is sent once: a source slower than the model (a 10 frames/s camera) is not resent.
  let fresh = true;
  const watchFrames = (): void => {
    els.video.requestVideoFrameCallback(() => {
      fresh = true;
      if (!stopped) watchFrames();
    });
  };
  const canWatch = 'requestVideoFrameCallback' in HTMLVideoElement.prototype;
  if (canWatch) watchFrames();

  const sendFrame = (): void => {
    const { video } = els;
    if (encoding || !fresh || socket.readyState !== WebSocket.OPEN || video.videoWidth === 0) return;
    if (sent - (lastFrame + 1) >= MAX_UNANSWERED || video.paused || video.ended) return;
    const scale = Math.min(1, MAX_SEND_WIDTH / video.videoWidth);
    encoder.width = Math.round(video.videoWidth * scale);
    encoder.height = Math.round(video.videoHeight * scale);
    encoder.getContext('2d')!.drawImage(video, 0, 0, encoder.width, encoder.height);
    encoding = true;
    fresh = !canWatch;
    encoder.toBlob(
      (blob) => {
        encoding = false;
        if (blob === null || stopped || socket.readyState !== WebSocket.OPEN) return;
        sentAt.set(sent, performance.now());
        sent += 1;
        socket.send(blob);
      },
      'image/jpeg',
      JPEG_QUALITY,
    );
  };

  const showStatus = (): void => {
    const s = stats.snapshot(performance.now());
    els.status.dataset['answers'] = String(s.answers);
    els.status.dataset['sent'] = String(sent);
    els.status.dataset['dropped'] = String(s.dropped);
    els.status.dataset['fps'] = s.fps.toFixed(2);
    els.status.dataset['latencyMs'] = s.latencyMs.toFixed(1);
    els.status.textContent =
      `${s.fps.toFixed(1)} frames/s · latency ${formatMs(s.latencyMs)} (server ${formatMs(s.serverMs)})` +
      ` · sent ${sent} · answered ${s.answers} · dropped ${s.dropped}`;
  };

  const tick = (): void => {
    if (stopped) return;
    drawFrame(els.canvas, els.video, overlay);
    els.canvas.dataset['boxes'] = String(overlay?.boxes.length ?? 0);
    sendFrame();
    showStatus();
    raf = requestAnimationFrame(tick);
  };

  socket.addEventListener('message', (event: MessageEvent<unknown>) => {
    if (typeof event.data !== 'string') return;
    const answer = JSON.parse(event.data) as FrameAnswer;
    const now = performance.now();
    const started = sentAt.get(answer.frame) ?? now;
    lastFrame = Math.max(lastFrame, answer.frame);
    for (const key of sentAt.keys()) if (key <= answer.frame) sentAt.delete(key);
    if (answer.error !== undefined) {
      els.error.textContent = `frame ${answer.frame}: ${answer.error.code}: ${answer.error.message}`;
      return;
    }
    stats.answered(now, now - started, answer);
    overlay = overlayOf(answer);
    els.last.textContent = event.data.slice(0, 4000);
    els.last.dataset['frame'] = String(answer.frame);
  });
  socket.addEventListener('open', () => {
    raf = requestAnimationFrame(tick);
  });
  socket.addEventListener('close', (event) => {
    if (!stopped && event.code !== 1000) {
      els.error.textContent = `The stream closed: ${event.code} ${event.reason}`;
    }
    stopped = true;
    cancelAnimationFrame(raf);
    onEnd();
  });
  return {
    stop() {
      stopped = true;
      cancelAnimationFrame(raf);
      socket.close(1000, 'stopped');
    },
  };
}

/** The Live view: model, source (camera or video file), start/stop, picture and numbers. */
export async function renderLive(view: HTMLElement): Promise<void> {
  stopLive();
  const all = await models();
  const images = all.filter((m) => servingVersion(m)?.assets?.image != null);
  const modelSelect = h(
    'select',
    { id: 'live-model', name: 'model' },
    ...images.map((m) => h('option', { value: m.name }, m.name)),
  );
  const fileInput = h('input', { type: 'file', id: 'live-file', accept: 'video/*' });
  const cameraButton = h('button', { type: 'button', id: 'live-camera' }, 'Use the camera');
  const stopButton = h('button', { type: 'button', id: 'live-stop', disabled: true }, 'Stop');
  const els: LiveElements = {
    video: h('video', { muted: true, playsinline: true, loop: true, hidden: true }),
    canvas: h('canvas', {
      class: 'preview',
      'data-testid': 'live-canvas',
      role: 'img',
      'aria-label': 'The picture with the model answers drawn over it',
    }),
    status: h('p', { 'data-testid': 'live-status', 'aria-live': 'off' }, 'Not streaming.'),
    last: h('pre', { 'data-testid': 'live-last', tabindex: '0', class: 'live-last' }),
    error: h('p', { class: 'error', role: 'alert' }),
  };
  els.video.muted = true;
  const begin = async (source: MediaStream | File): Promise<void> => {
    stopLive();
    els.error.textContent = '';
    const { video } = els;
    if (source instanceof File) {
      video.srcObject = null;
      video.src = URL.createObjectURL(source);
    } else {
      video.srcObject = source;
    }
    await video.play();
    stopButton.disabled = false;
    const session = startSession(streamUrl(modelSelect.value, ''), els, () => {
      stopButton.disabled = true;
    });
    active = {
      stop() {
        session.stop();
        video.pause();
        if (video.srcObject instanceof MediaStream) for (const t of video.srcObject.getTracks()) t.stop();
        if (video.src.startsWith('blob:')) URL.revokeObjectURL(video.src);
      },
    };
  };
  const fail = (error: unknown): void => {
    els.error.textContent = String(error);
  };
  cameraButton.addEventListener('click', () => {
    navigator.mediaDevices
      .getUserMedia({ video: true, audio: false })
      .then((stream) => begin(stream))
      .catch(fail);
  });
  fileInput.addEventListener('change', () => {
    const file = fileInput.files?.[0];
    if (file !== undefined) begin(file).catch(fail);
  });
  stopButton.addEventListener('click', stopLive);
  view.replaceChildren(
    h('h2', {}, 'Live'),
    images.length === 0
      ? h('p', {}, 'No AVAILABLE model takes images.')
      : h(
          'div',
          { class: 'row' },
          h('label', {}, 'Model', modelSelect),
          cameraButton,
          h('label', {}, 'Video file', fileInput),
          stopButton,
        ),
    h(
      'p',
      {},
      'Frames go over the WebSocket frame stream with policy latest: the newest frame is processed, ' +
        'stale ones are dropped and counted.',
    ),
    els.status,
    els.error,
    els.video,
    els.canvas,
    els.last,
  );
}

let active: LiveSession | undefined;

/** Ends the stream and releases the camera (leaving the view, or a new source). */
export function stopLive(): void {
  active?.stop();
  active = undefined;
}
