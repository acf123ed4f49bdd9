/**
 * TF Serving PredictRequest generators and the reference decoder shared by the fuzz targets of
 * the protocol codec (packages/protocol/test/fuzz/tensor-proto.test.ts) and of the gRPC
 * handlers that use it (packages/server/test/fuzz/tfs-grpc.test.ts). Not a test file.
 */
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import fc from 'fast-check';
import type { Tensor } from '@visionserve/protocol';
import {
  PredictRequestSchema,
  tensorFromProto,
  tensorToProto,
  writePredictRequest,
} from '@visionserve/protocol/tfs-proto';
import { aliasArb, concat, sameTensor, tensorArb } from './arbitraries.js';

/** Copies `bytes` to offset `shift` of a fresh buffer (to reach every alignment of tensor_content). */
export function shifted(bytes: Uint8Array, shift: number): Uint8Array {
  const buffer = new ArrayBuffer(bytes.byteLength + shift);
  const out = new Uint8Array(buffer, shift, bytes.byteLength);
  out.set(bytes);
  return out;
}

/** 1-3 named tensors of any dtype. */
export const inputsArb = fc.dictionary(aliasArb, tensorArb(), { minKeys: 1, maxKeys: 3 });
/** A model spec: name, a version or a label (or neither), signature name. */
export const specArb = fc.record({
  name: fc.string({ maxLength: 8 }),
  version: fc.option(fc.bigInt({ min: -2n, max: 2n ** 63n - 1n }), { nil: undefined }),
  label: fc.option(fc.string({ maxLength: 6 }), { nil: undefined }),
  signatureName: fc.string({ maxLength: 6 }),
});

/** A PredictRequest's bytes, written the way `mode` names: typed fields, tensor_content, or the chunked writer. */
export function requestBytes(
  inputs: Record<string, Tensor>,
  spec: { name: string; version: bigint | undefined; label: string | undefined; signatureName: string },
  mode: 'typed' | 'content' | 'chunks' | 'chunks-typed',
  outputFilter: string[],
): Uint8Array {
  const head = create(PredictRequestSchema, {
    modelSpec: {
      name: spec.name,
      signatureName: spec.signatureName,
      versionChoice:
        spec.version !== undefined
          ? { case: 'version', value: { value: spec.version } }
          : spec.label !== undefined
            ? { case: 'versionLabel', value: spec.label }
            : { case: undefined },
    },
    outputFilter,
  });
  if (mode === 'chunks' || mode === 'chunks-typed') {
    return concat(writePredictRequest(head, inputs, mode === 'chunks'));
  }
  for (const [alias, t] of Object.entries(inputs)) {
    head.inputs[alias] = tensorToProto(t, { asTensorContent: mode === 'content' });
  }
  return toBinary(PredictRequestSchema, head);
}

/** Valid PredictRequest bytes, every writer mode, with an output filter. */
export const validRequestArb = fc
  .tuple(
    inputsArb,
    specArb,
    fc.constantFrom('typed' as const, 'content' as const, 'chunks' as const, 'chunks-typed' as const),
    fc.array(aliasArb, { maxLength: 2 }),
  )
  .map(([inputs, spec, mode, filter]) => requestBytes(inputs, spec, mode, filter));

/** The alias the decoders of the fuzz targets answer for bytes that are not a PredictRequest. */
export const MALFORMED = '\u0000malformed';

/** The general decoder: protobuf-es's PredictRequest, then tensorFromProto per input. */
export function decodeGeneral(bytes: Uint8Array): Record<string, Tensor> {
  let request;
  try {
    request = fromBinary(PredictRequestSchema, bytes);
  } catch {
    return { [MALFORMED]: { dtype: 'bool', shape: [], data: new Uint8Array(1) } };
  }
  const out: Record<string, Tensor> = {};
  for (const [alias, proto] of Object.entries(request.inputs)) out[alias] = tensorFromProto(proto, alias);
  return out;
}

/** Same aliases and {@link sameTensor} for each; a description of the first difference. */
export function sameInputs(a: Record<string, Tensor>, b: Record<string, Tensor>): string | undefined {
  const ka = Object.keys(a).sort();
  const kb = Object.keys(b).sort();
  if (ka.join('\u0001') !== kb.join('\u0001')) return `aliases {${ka.join(',')}} != {${kb.join(',')}}`;
  for (const k of ka) {
    const d = sameTensor(a[k]!, b[k]!);
    if (d !== undefined) return `${k}: ${d}`;
  }
  return undefined;
}
