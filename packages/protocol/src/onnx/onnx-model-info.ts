/**
 * Reads a model's signature and provenance from ONNX bytes with our protobuf subset
 * (proto/onnx), without onnxruntime: what `visionserve inspect` prints.
 */
import { fromBinary } from '@bufbuild/protobuf';
import type { DType } from '../dtype.js';
import { ModelProtoSchema, TensorProto_DataType, type ValueInfoProto } from '../gen/onnx/onnx_subset_pb.js';

/** One graph input or output. */
export interface OnnxValueInfo {
  readonly name: string;
  /** ONNX element type name, e.g. "FLOAT", "UINT8". */
  readonly elemType: string;
  /** The visionserve dtype, undefined for types it does not serve. */
  readonly dtype: DType | undefined;
  /** Dimensions: a number for a fixed size, a string for a named dynamic one, null for an unnamed dynamic one; undefined for unknown rank. */
  readonly dims: readonly (number | string | null)[] | undefined;
}

export interface OnnxModelInfo {
  readonly irVersion: number;
  readonly producerName: string;
  readonly producerVersion: string;
  readonly domain: string;
  readonly modelVersion: number;
  readonly docString: string;
  /** Operator sets; the default domain is reported as "ai.onnx". */
  readonly opsets: readonly { readonly domain: string; readonly version: number }[];
  readonly graphName: string;
  readonly nodeCount: number;
  readonly initializerCount: number;
  /** Elements in all initializers (weights). */
  readonly parameterCount: number;
  /** Inputs that must be fed (graph inputs that are not initializers, as onnxruntime reports them). */
  readonly inputs: readonly OnnxValueInfo[];
  readonly outputs: readonly OnnxValueInfo[];
  readonly metadata: Readonly<Record<string, string>>;
}

const ELEM_TO_DTYPE: Partial<Record<number, DType>> = {
  [TensorProto_DataType.FLOAT]: 'float32',
  [TensorProto_DataType.DOUBLE]: 'float64',
  [TensorProto_DataType.FLOAT16]: 'float16',
  [TensorProto_DataType.BFLOAT16]: 'bfloat16',
  [TensorProto_DataType.INT8]: 'int8',
  [TensorProto_DataType.INT16]: 'int16',
  [TensorProto_DataType.INT32]: 'int32',
  [TensorProto_DataType.INT64]: 'int64',
  [TensorProto_DataType.UINT8]: 'uint8',
  [TensorProto_DataType.UINT16]: 'uint16',
  [TensorProto_DataType.UINT32]: 'uint32',
  [TensorProto_DataType.UINT64]: 'uint64',
  [TensorProto_DataType.BOOL]: 'bool',
  [TensorProto_DataType.STRING]: 'string',
};

/** Parses ONNX bytes; throws an Error naming the problem for anything that is not a model. */
export function readOnnxModelInfo(bytes: Uint8Array): OnnxModelInfo {
  let model;
  try {
    model = fromBinary(ModelProtoSchema, bytes, { readUnknownFields: false });
  } catch (error) {
    throw new Error(`not an ONNX model (${error instanceof Error ? error.message : String(error)})`);
  }
  const graph = model.graph;
  if (graph === undefined || model.irVersion === 0n)
    throw new Error('not an ONNX model (no graph or ir_version)');
  const initializers = new Set(graph.initializer.map((t) => t.name));
  let parameters = 0;
  for (const t of graph.initializer) parameters += t.dims.reduce((a, d) => a * Number(d), 1);
  return {
    irVersion: Number(model.irVersion),
    producerName: model.producerName,
    producerVersion: model.producerVersion,
    domain: model.domain,
    modelVersion: Number(model.modelVersion),
    docString: model.docString,
    opsets: model.opsetImport.map((o) => ({
      domain: o.domain === '' ? 'ai.onnx' : o.domain,
      version: Number(o.version),
    })),
    graphName: graph.name,
    nodeCount: graph.node.length,
    initializerCount: graph.initializer.length,
    parameterCount: parameters,
    inputs: graph.input.filter((v) => !initializers.has(v.name)).map(valueInfo),
    outputs: graph.output.map(valueInfo),
    metadata: Object.fromEntries(model.metadataProps.map((p) => [p.key, p.value])),
  };
}

function valueInfo(v: ValueInfoProto): OnnxValueInfo {
  const type = v.type?.value;
  if (type?.case !== 'tensorType')
    return { name: v.name, elemType: 'NON_TENSOR', dtype: undefined, dims: undefined };
  const elem = type.value.elemType;
  const shape = type.value.shape;
  return {
    name: v.name,
    elemType: TensorProto_DataType[elem] ?? String(elem),
    dtype: ELEM_TO_DTYPE[elem],
    dims:
      shape === undefined
        ? undefined
        : shape.dim.map((d) =>
            d.value.case === 'dimValue'
              ? Number(d.value.value)
              : d.value.case === 'dimParam'
                ? d.value.value
                : null,
          ),
  };
}
