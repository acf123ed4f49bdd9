import { API, type ModelJson, defaultSignature, models, servingVersion } from './api.js';
import { type Box, type LabelledBox, drawBoxes } from './boxes.js';
import { formatMs, h, table } from './dom.js';

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
  const result = answer.predictions as { detections: readonly LabelledBox[] };
  drawBoxes(ctx, bitmap.width, bitmap.height, result.detections, minScore);
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
