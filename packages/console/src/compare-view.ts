import { createGrpcWebChannel, createTfsGrpcStub, type Tensor } from '@visionserve/client/grpc-web';
import { type ModelJson, type TensorSpecJson, defaultSignature, models, servingVersion } from './api.js';
import { formatBytes, formatMs, h, table } from './dom.js';

const KSERVE_TYPES: Readonly<Record<string, string>> = {
  float32: 'FP32',
  float64: 'FP64',
  uint8: 'UINT8',
  int8: 'INT8',
  int32: 'INT32',
  int64: 'INT64',
  float16: 'FP16',
};

/** A request tensor for an input: unknown dims from the image settings (else 1), random values. */
function requestTensor(model: ModelJson, spec: TensorSpecJson): Tensor {
  const image = servingVersion(model)?.assets?.image as
    { width?: number; height?: number; layout?: string } | null | undefined;
  const dims = spec.shape.map((d, i) => {
    if (d >= 0) return d;
    if (i === 0) return 1;
    const nchw = image?.layout === 'NCHW';
    const hIndex = nchw ? 2 : 1;
    const wIndex = nchw ? 3 : 2;
    if (i === hIndex) return image?.height ?? 224;
    if (i === wIndex) return image?.width ?? 224;
    return 3;
  });
  const count = dims.reduce((a, b) => a * b, 1);
  switch (spec.dtype) {
    case 'uint8': {
      const data = new Uint8Array(count);
      for (let i = 0; i < count; i++) data[i] = (i * 2654435761) >>> 24;
      return { dtype: 'uint8', shape: dims, data };
    }
    case 'int64': {
      return { dtype: 'int64', shape: dims, data: new BigInt64Array(count) };
    }
    case 'int32':
      return { dtype: 'int32', shape: dims, data: new Int32Array(count) };
    default: {
      const data = new Float32Array(count);
      for (let i = 0; i < count; i++) data[i] = ((i * 2654435761) >>> 8) / 16777216;
      return { dtype: 'float32', shape: dims, data };
    }
  }
}

function nested(t: Tensor): unknown {
  const data = Array.from(t.data as ArrayLike<number | bigint>, (v) =>
    typeof v === 'bigint' ? Number(v) : v,
  );
  const rec = (offset: number, depth: number): unknown => {
    const size = t.shape[depth]!;
    if (depth === t.shape.length - 1) return data.slice(offset, offset + size);
    const stride = t.shape.slice(depth + 1).reduce((a, b) => a * b, 1);
    return Array.from({ length: size }, (_, i) => rec(offset + i * stride, depth + 1));
  };
  return t.shape.length === 0 ? data[0] : rec(0, 0);
}

interface Measure {
  readonly ms: number;
  readonly requestBytes: number;
  readonly responseBytes: number;
}

async function tfRest(model: string, inputs: Record<string, Tensor>): Promise<Measure> {
  const body = new TextEncoder().encode(
    JSON.stringify({ inputs: Object.fromEntries(Object.entries(inputs).map(([k, t]) => [k, nested(t)])) }),
  );
  const t0 = performance.now();
  const res = await fetch(`/v1/models/${encodeURIComponent(model)}:predict`, {
    method: 'POST',
    body,
    headers: { 'Content-Type': 'application/json' },
  });
  const bytes = await res.arrayBuffer();
  const ms = performance.now() - t0;
  if (!res.ok)
    throw new Error(`TF REST: HTTP ${res.status} ${new TextDecoder().decode(bytes).slice(0, 200)}`);
  return { ms, requestBytes: body.byteLength, responseBytes: bytes.byteLength };
}

async function kserveBinary(
  model: string,
  inputs: Record<string, Tensor>,
  outputs: readonly string[],
): Promise<Measure> {
  const parts: Uint8Array[] = [];
  const header = {
    inputs: Object.entries(inputs).map(([name, t]) => {
      const raw = new Uint8Array(
        (t.data as Float32Array).buffer,
        (t.data as Float32Array).byteOffset,
        (t.data as Float32Array).byteLength,
      );
      parts.push(raw);
      return {
        name,
        shape: t.shape,
        datatype: KSERVE_TYPES[t.dtype] ?? 'FP32',
        parameters: { binary_data_size: raw.byteLength },
      };
    }),
    outputs: outputs.map((name) => ({ name, parameters: { binary_data: true } })),
  };
  const json = new TextEncoder().encode(JSON.stringify(header));
  const body = new Uint8Array(json.byteLength + parts.reduce((n, p) => n + p.byteLength, 0));
  body.set(json, 0);
  let at = json.byteLength;
  for (const p of parts) {
    body.set(p, at);
    at += p.byteLength;
  }
  const t0 = performance.now();
  const res = await fetch(`/v2/models/${encodeURIComponent(model)}/infer`, {
    method: 'POST',
    body,
    headers: {
      'Content-Type': 'application/octet-stream',
      'Inference-Header-Content-Length': String(json.byteLength),
    },
  });
  const bytes = await res.arrayBuffer();
  const ms = performance.now() - t0;
  if (!res.ok) throw new Error(`KServe: HTTP ${res.status} ${new TextDecoder().decode(bytes).slice(0, 200)}`);
  return { ms, requestBytes: body.byteLength, responseBytes: bytes.byteLength };
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)]!;
};

export async function renderCompare(view: HTMLElement): Promise<void> {
  const all = (await models()).filter((m) => servingVersion(m) !== undefined);
  const modelSelect = h(
    'select',
    { id: 'compare-model' },
    ...all.map((m) => h('option', { value: m.name }, m.name)),
  );
  const runs = h('input', { id: 'compare-runs', type: 'number', min: '1', max: '50', value: '5' });
  const button = h('button', { type: 'button', id: 'compare-run' }, 'Run');
  const out = h('div', { 'aria-live': 'polite', id: 'compare-result' });
  const channel = createGrpcWebChannel({ baseUrl: '' });
  const grpcMeasured = createTfsGrpcStub(channel, {});
  button.addEventListener('click', () => {
    const model = all.find((m) => m.name === modelSelect.value);
    if (model === undefined) return;
    const sig = defaultSignature(servingVersion(model));
    if (sig === undefined) return;
    const inputs: Record<string, Tensor> = {};
    for (const [alias, spec] of Object.entries(sig.inputs)) inputs[alias] = requestTensor(model, spec);
    const outputNames = Object.keys(sig.outputs);
    const n = Math.max(1, Math.min(50, Number(runs.value) || 5));
    button.disabled = true;
    out.replaceChildren(h('p', {}, 'Measuring…'));
    void (async () => {
      const rows: (readonly [string, Measure[]])[] = [
        ['TF Serving REST (JSON)', []],
        ['KServe v2 (binary HTTP)', []],
        ['TF Serving gRPC (gRPC-web)', []],
      ];
      try {
        for (let i = 0; i < n; i++) {
          rows[0]![1].push(await tfRest(model.name, inputs));
          rows[1]![1].push(await kserveBinary(model.name, inputs, outputNames));
          const t0 = performance.now();
          await grpcMeasured.predict(model.name, inputs);
          const ms = performance.now() - t0;
          const wire = channel.lastWire!;
          rows[2]![1].push({
            ms,
            requestBytes: wire.requestBodyBytes,
            responseBytes: wire.responseBodyBytes,
          });
        }
        out.replaceChildren(
          h('p', {}, `Model ${model.name}, ${n} requests each (median latency; sizes of the HTTP bodies).`),
          table(
            ['API', 'median latency', 'request body', 'response body'],
            rows.map(([name, ms]) => [
              name,
              formatMs(median(ms.map((m) => m.ms))),
              formatBytes(ms[0]!.requestBytes),
              formatBytes(ms[0]!.responseBytes),
            ]),
            'compare-table',
          ),
        );
      } catch (error) {
        out.replaceChildren(h('p', { class: 'error', role: 'alert' }, String(error)));
      } finally {
        button.disabled = false;
      }
    })();
  });
  view.replaceChildren(
    h('h2', {}, 'REST vs gRPC, live'),
    h(
      'p',
      {},
      'The same tensor sent from this browser as TF Serving REST JSON, as KServe binary HTTP and as TF Serving gRPC over gRPC-web (served by visionserve itself).',
    ),
    h(
      'div',
      { class: 'row' },
      h('label', {}, 'Model', modelSelect),
      h('label', {}, 'Requests per API', runs),
      button,
    ),
    out,
  );
}
