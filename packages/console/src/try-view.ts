import { API, type ModelJson, defaultSignature, models, servingVersion } from './api.js';
import { formatMs, h, table } from './dom.js';

interface Box {
  readonly ymin: number;
  readonly xmin: number;
  readonly ymax: number;
  readonly xmax: number;
}
interface TryAnswer {
  readonly model: string;
  readonly version: number;
  readonly width: number;
  readonly height: number;
  readonly kind: 'classification' | 'detection' | 'raw';
  readonly predictions?:
    | { class_id: number; label?: string; score: number }[]
    | { num_detections: number; detections: { class_id: number; label?: string; score: number; box: Box }[] };
  readonly outputs?: Record<string, { dtype: string; shape: number[]; head: unknown[] }>;
  readonly timings: { decodeMs: number; predictMs: number; postprocessMs: number; totalMs: number };
}

const BOX_COLORS = ['#d62728', '#1f77b4', '#2ca02c', '#9467bd', '#ff7f0e', '#17becf'];

async function drawDetections(
  canvas: HTMLCanvasElement,
  file: Blob,
  answer: TryAnswer,
  minScore: number,
): Promise<void> {
  const bitmap = await createImageBitmap(file);
  canvas.width = bitmap.width;
  canvas.height = bitmap.height;
  const ctx = canvas.getContext('2d')!;
  ctx.drawImage(bitmap, 0, 0);
  const result = answer.predictions as {
    detections: { label?: string; class_id: number; score: number; box: Box }[];
  };
  ctx.lineWidth = Math.max(2, bitmap.width / 300);
  ctx.font = `${Math.max(14, Math.round(bitmap.width / 50))}px sans-serif`;
  result.detections
    .filter((d) => d.score >= minScore)
    .forEach((d, i) => {
      const color = BOX_COLORS[i % BOX_COLORS.length]!;
      const x = d.box.xmin * bitmap.width;
      const y = d.box.ymin * bitmap.height;
      const w = (d.box.xmax - d.box.xmin) * bitmap.width;
      const hh = (d.box.ymax - d.box.ymin) * bitmap.height;
      ctx.strokeStyle = color;
      ctx.strokeRect(x, y, w, hh);
      const text = `${d.label ?? d.class_id} ${(d.score * 100).toFixed(0)}%`;
      const tw = ctx.measureText(text).width + 6;
      const th = parseInt(ctx.font, 10) + 4;
      ctx.fillStyle = color;
      ctx.fillRect(x, Math.max(0, y - th), tw, th);
      ctx.fillStyle = '#ffffff';
      ctx.fillText(text, x + 3, Math.max(th - 4, y - 4));
    });
}

function jsonEditor(model: ModelJson, out: HTMLElement): HTMLElement {
  const sig = defaultSignature(servingVersion(model));
  const inputs: Record<string, unknown> = {};
  for (const [alias, spec] of Object.entries(sig?.inputs ?? {})) {
    const dims = spec.shape.map((d) => (d < 0 ? 1 : d));
    const fill = (depth: number): unknown =>
      depth === dims.length ? 0 : Array.from({ length: Math.min(dims[depth]!, 64) }, () => fill(depth + 1));
    inputs[alias] = fill(0);
  }
  const area = h('textarea', { id: 'json-body', 'aria-label': 'Request body (TF Serving REST JSON)' });
  area.value = JSON.stringify({ inputs }, null, 1);
  const send = h('button', { type: 'button' }, 'Send as TF Serving REST');
  send.addEventListener('click', () => {
    const started = performance.now();
    void fetch(`/v1/models/${encodeURIComponent(model.name)}:predict`, { method: 'POST', body: area.value })
      .then(async (res) => {
        const text = await res.text();
        out.replaceChildren(
          h('p', {}, `HTTP ${res.status} in ${formatMs(performance.now() - started)}`),
          h('pre', { tabindex: '0' }, text.slice(0, 20_000)),
        );
      })
      .catch((error: unknown) => {
        out.replaceChildren(h('p', { class: 'error' }, String(error)));
      });
  });
  return h(
    'div',
    {},
    h('p', {}, 'This model takes tensors, not images: edit the request prefilled from its signature.'),
    area,
    send,
  );
}

export async function renderTry(view: HTMLElement): Promise<void> {
  const all = await models();
  const available = all.filter((m) => servingVersion(m) !== undefined);
  const modelSelect = h(
    'select',
    { id: 'try-model', name: 'model' },
    ...available.map((m) => h('option', { value: m.name }, m.name)),
  );
  const versionSelect = h('select', { id: 'try-version', name: 'version' });
  const fileInput = h('input', { type: 'file', id: 'try-file', accept: 'image/*' });
  const drop = h(
    'div',
    { id: 'drop' },
    'Drop an image here, or pick one: ',
    h('label', { class: 'inline' }, 'Image file', fileInput),
  );
  const result = h('div', { id: 'try-result', 'aria-live': 'polite' });
  const editorHost = h('div', {});
  const fillVersions = (): void => {
    const model = available.find((m) => m.name === modelSelect.value);
    versionSelect.replaceChildren(
      h('option', { value: '' }, 'latest'),
      ...(model?.versions ?? [])
        .filter((v) => v.state === 'AVAILABLE')
        .map((v) => h('option', { value: String(v.version) }, String(v.version))),
    );
    const image = model === undefined ? null : (servingVersion(model)?.assets?.image ?? null);
    drop.hidden = image === null;
    editorHost.replaceChildren(model !== undefined && image === null ? jsonEditor(model, result) : '');
  };
  modelSelect.addEventListener('change', fillVersions);
  fillVersions();

  const run = async (file: File): Promise<void> => {
    result.replaceChildren(h('p', {}, `Sending ${file.name}…`));
    const version = versionSelect.value;
    const url = `${API}/try/${encodeURIComponent(modelSelect.value)}${version === '' ? '' : `/versions/${version}`}`;
    const res = await fetch(url, {
      method: 'POST',
      body: file,
      headers: { 'Content-Type': file.type || 'application/octet-stream' },
    });
    const text = await res.text();
    if (!res.ok) {
      result.replaceChildren(h('p', { class: 'error', role: 'alert' }, `HTTP ${res.status}: ${text}`));
      return;
    }
    const answer = JSON.parse(text) as TryAnswer;
    const timings = table(
      ['decode + resize', 'model (queue + inference)', 'post-processing', 'total on the server'],
      [
        [
          formatMs(answer.timings.decodeMs),
          formatMs(answer.timings.predictMs),
          formatMs(answer.timings.postprocessMs),
          formatMs(answer.timings.totalMs),
        ],
      ],
      'try-timings',
    );
    const header = h(
      'p',
      {},
      `${answer.model} version ${answer.version}, image ${answer.width}×${answer.height}`,
    );
    if (answer.kind === 'classification') {
      const top = answer.predictions as { class_id: number; label?: string; score: number }[];
      result.replaceChildren(
        header,
        h(
          'ol',
          { 'data-testid': 'topk' },
          ...top.map((c) =>
            h('li', {}, h('strong', {}, c.label ?? `class ${c.class_id}`), ` ${(c.score * 100).toFixed(1)}%`),
          ),
        ),
        timings,
      );
    } else if (answer.kind === 'detection') {
      const minScore = 0.3;
      const det = answer.predictions as { detections: { class_id: number; label?: string; score: number }[] };
      const canvas = h('canvas', {
        class: 'preview',
        'data-testid': 'boxes',
        role: 'img',
        'aria-label': 'Image with the detected boxes',
      });
      const shown = det.detections.filter((d) => d.score >= minScore);
      result.replaceChildren(
        header,
        canvas,
        h(
          'ul',
          { 'data-testid': 'detections' },
          ...shown.map((d) =>
            h('li', {}, h('strong', {}, d.label ?? `class ${d.class_id}`), ` ${(d.score * 100).toFixed(0)}%`),
          ),
        ),
        timings,
      );
      await drawDetections(canvas, file, answer, minScore);
      canvas.dataset['drawn'] = String(shown.length);
    } else {
      result.replaceChildren(
        header,
        h('pre', { tabindex: '0' }, JSON.stringify(answer.outputs, null, 1)),
        timings,
      );
    }
  };
  const start = (file: File | undefined): void => {
    if (file === undefined) return;
    run(file).catch((error: unknown) => {
      result.replaceChildren(h('p', { class: 'error', role: 'alert' }, String(error)));
    });
  };
  fileInput.addEventListener('change', () => {
    start(fileInput.files?.[0]);
  });
  drop.addEventListener('dragover', (e) => {
    e.preventDefault();
    drop.classList.add('over');
  });
  drop.addEventListener('dragleave', () => {
    drop.classList.remove('over');
  });
  drop.addEventListener('drop', (e) => {
    e.preventDefault();
    drop.classList.remove('over');
    start(e.dataTransfer?.files[0]);
  });
  view.replaceChildren(
    h('h2', {}, 'Try it'),
    available.length === 0
      ? h('p', {}, 'No model has an AVAILABLE version.')
      : h(
          'div',
          { class: 'row' },
          h('label', {}, 'Model', modelSelect),
          h('label', {}, 'Version', versionSelect),
        ),
    drop,
    editorHost,
    result,
  );
}
