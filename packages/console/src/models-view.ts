import { type ModelJson, type SignatureJson, models } from './api.js';
import { h, table } from './dom.js';

function shape(dims: readonly number[]): string {
  return `[${dims.map((d) => (d < 0 ? '?' : String(d))).join(', ')}]`;
}

function signatureTable(name: string, sig: SignatureJson): HTMLElement {
  const rows = [
    ...Object.entries(sig.inputs).map(([alias, t]) => ['input', alias, t.name, t.dtype, shape(t.shape)]),
    ...Object.entries(sig.outputs).map(([alias, t]) => ['output', alias, t.name, t.dtype, shape(t.shape)]),
  ];
  return h(
    'div',
    {},
    h('h4', {}, `Signature ${name}`),
    table(['', 'alias', 'tensor', 'dtype', 'shape'], rows),
  );
}

function modelCard(model: ModelJson): HTMLElement {
  const labels = Object.entries(model.versionLabels);
  return h(
    'section',
    { class: 'card', 'data-testid': 'model', 'data-model': model.name, 'aria-label': `Model ${model.name}` },
    h('h3', {}, model.name),
    model.basePath === null
      ? h('p', { class: 'muted' }, 'Base path shown to callers that may manage models (Manage: admin token)')
      : h('p', { class: 'muted' }, 'Base path ', h('code', {}, model.basePath)),
    h(
      'p',
      {},
      `Batching: ${model.batching.enabled ? `on (max batch ${String(model.batching.maxBatchSize ?? '?')})` : 'off'}; `,
      `instances: ${model.batching.instances}`,
      labels.length > 0 ? `; labels: ${labels.map(([l, v]) => `${l} → ${v}`).join(', ')}` : '',
    ),
    table(
      ['version', 'state', 'since', 'load', 'error'],
      model.versions.map((v) => [
        String(v.version),
        h('span', { class: `state-${v.state}` }, v.state),
        v.since === null ? '–' : new Date(v.since).toLocaleString(),
        v.loadMs === undefined ? '–' : `${v.loadMs} ms`,
        v.error === null ? '' : h('span', { class: 'error' }, `${v.error.code}: ${v.error.message}`),
      ]),
      'versions',
    ),
    ...model.versions.flatMap((v) => {
      if (v.signatures === undefined) return [];
      return [
        h(
          'details',
          { open: true },
          h('summary', {}, `Version ${v.version}: signature and assets`),
          ...Object.entries(v.signatures).map(([name, sig]) => signatureTable(name, sig)),
          h('h4', {}, 'Assets'),
          h(
            'p',
            {},
            `Label file: ${v.labels === null || v.labels === undefined ? 'none' : `${v.labels} labels`}; handler: ${v.assets?.handler ?? 'none'}`,
          ),
          h('p', {}, 'Image preprocessing'),
          h('pre', { tabindex: '0' }, JSON.stringify(v.assets?.image ?? null, null, 2)),
          h('p', {}, 'Post-processing'),
          h('pre', { tabindex: '0' }, JSON.stringify(v.assets?.postprocess ?? null, null, 2)),
        ),
      ];
    }),
  );
}

export async function renderModels(view: HTMLElement): Promise<void> {
  const list = await models();
  view.replaceChildren(
    h('h2', {}, 'Models'),
    list.length === 0 ? h('p', {}, 'No model is configured.') : h('div', {}, ...list.map(modelCard)),
  );
}
