/**
 * Accuracy checks that hold on any machine: the server's answer is compared with raw
 * onnxruntime run in the same test, on the same input, on the same CPU (int8 kernels give
 * different scores on AVX2 and AVX-512/VNNI machines, so fixed score windows and exact
 * ranks among near-ties are never asserted).
 */
import assert from 'node:assert/strict';
import ort from 'onnxruntime-node';
import type { Tensor } from '@visionserve/protocol';
import { ortSessionOptions } from '@visionserve/server';
import { type ClassScore, type ClassificationPostprocess, classifyTopK } from '@visionserve/vision';

const sessions = new Map<string, Promise<ort.InferenceSession>>();

/** Runs a model file with raw onnxruntime (the server's session options), in this process. */
export async function runReference(
  modelPath: string,
  inputs: Readonly<Record<string, Tensor>>,
): Promise<Record<string, Tensor>> {
  let session = sessions.get(modelPath);
  if (session === undefined) {
    session = ort.InferenceSession.create(
      modelPath,
      ortSessionOptions({ intraOpThreads: 1, interOpThreads: 1, allowSpinning: false }),
    );
    sessions.set(modelPath, session);
  }
  const feeds: Record<string, ort.Tensor> = {};
  for (const [name, t] of Object.entries(inputs)) {
    if (Array.isArray(t.data)) throw new Error('string inputs are not supported here');
    feeds[name] = new ort.Tensor(t.dtype as 'float32', t.data as Float32Array, t.shape);
  }
  const results = await (await session).run(feeds);
  const out: Record<string, Tensor> = {};
  for (const [name, t] of Object.entries(results)) {
    out[name] = { dtype: t.type as Tensor['dtype'], shape: [...t.dims], data: t.data as Float32Array };
  }
  return out;
}

/** Every class of row 0 with its score, for comparisons. */
export function allScores(
  scores: Tensor,
  config: Omit<ClassificationPostprocess, 'kind' | 'topK'>,
): ClassScore[] {
  const classes = scores.shape.at(-1)!;
  return classifyTopK(scores, { ...config, kind: 'classification', topK: classes }, undefined)[0]!;
}

/**
 * The served top-k agrees with the reference ranking: the same top-1 (unless the reference
 * top two tie within `tolerance`), every served class within `tolerance` of its reference
 * score, and the same set of classes as the reference top-k, except classes tied with the
 * k-th score at the boundary.
 */
export function assertSameTopK(
  served: readonly ClassScore[],
  reference: readonly ClassScore[],
  tolerance = 1e-4,
): void {
  const k = served.length;
  const byClass = new Map(reference.map((c) => [c.class_id, c.score]));
  for (const c of served) {
    const want = byClass.get(c.class_id);
    assert.ok(
      want !== undefined && Math.abs(want - c.score) <= tolerance,
      `class ${c.class_id}: served ${c.score}, reference ${want}`,
    );
  }
  const kth = reference[k - 1]!.score;
  const sure = reference
    .slice(0, k)
    .filter((c) => Math.abs(c.score - kth) > tolerance || reference[k]!.score < kth - tolerance);
  const servedIds = new Set(served.map((c) => c.class_id));
  for (const c of sure)
    assert.ok(servedIds.has(c.class_id), `reference top-${k} class ${c.class_id} missing from the answer`);
  if (reference[0]!.score - reference[1]!.score > tolerance) {
    assert.equal(served[0]!.class_id, reference[0]!.class_id, 'top-1');
  }
}
