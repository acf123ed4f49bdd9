import { type MessageInitShape, create, toBinary } from '@bufbuild/protobuf';
import { type DType } from '@visionserve/protocol';
import {
  AttributeProto_AttributeType,
  type AttributeProtoSchema,
  ModelProtoSchema,
  type NodeProtoSchema,
  TensorProto_DataType,
  type TensorProtoSchema,
  type ValueInfoProtoSchema,
} from '@visionserve/protocol/onnx';

/** ONNX element type numbers for visionserve dtypes. */
export const ONNX_ELEM_TYPE: Readonly<Record<DType, TensorProto_DataType>> = {
  float32: TensorProto_DataType.FLOAT,
  float64: TensorProto_DataType.DOUBLE,
  float16: TensorProto_DataType.FLOAT16,
  bfloat16: TensorProto_DataType.BFLOAT16,
  int8: TensorProto_DataType.INT8,
  int16: TensorProto_DataType.INT16,
  int32: TensorProto_DataType.INT32,
  int64: TensorProto_DataType.INT64,
  uint8: TensorProto_DataType.UINT8,
  uint16: TensorProto_DataType.UINT16,
  uint32: TensorProto_DataType.UINT32,
  uint64: TensorProto_DataType.UINT64,
  bool: TensorProto_DataType.BOOL,
  string: TensorProto_DataType.STRING,
};

export interface ValueSpec {
  readonly name: string;
  readonly dtype: DType;
  /** A number is a fixed size, a string a named dynamic dimension; undefined: unknown rank (no shape). */
  readonly shape: readonly (number | string)[] | undefined;
}

export type AttributeValue = number | string | readonly number[] | { readonly tensor: InitializerSpec };

export interface NodeSpec {
  readonly op: string;
  readonly inputs: readonly string[];
  readonly outputs: readonly string[];
  /** Integers are written as INT, other numbers as FLOAT; arrays as INTS. */
  readonly attributes?: Readonly<Record<string, AttributeValue>>;
  readonly domain?: string;
}

export interface InitializerSpec {
  readonly name: string;
  readonly dtype: 'float32' | 'int64' | 'int32' | 'uint8';
  readonly dims: readonly number[];
  readonly values: readonly number[];
}

export interface ModelSpecForBuilder {
  readonly inputs: readonly ValueSpec[];
  readonly outputs: readonly ValueSpec[];
  readonly nodes: readonly NodeSpec[];
  readonly initializers?: readonly InitializerSpec[];
  /** Default opset of the "" domain. Default 13. */
  readonly opset?: number;
  readonly graphName?: string;
  readonly docString?: string;
}

function valueInfo(spec: ValueSpec): MessageInitShape<typeof ValueInfoProtoSchema> {
  return {
    name: spec.name,
    type: {
      value: {
        case: 'tensorType',
        value: {
          elemType: ONNX_ELEM_TYPE[spec.dtype],
          ...(spec.shape === undefined
            ? {}
            : {
                shape: {
                  dim: spec.shape.map((d) => ({
                    value:
                      typeof d === 'number'
                        ? { case: 'dimValue' as const, value: BigInt(d) }
                        : { case: 'dimParam' as const, value: d },
                  })),
                },
              }),
        },
      },
    },
  };
}

function rawBytes(spec: InitializerSpec): Uint8Array {
  switch (spec.dtype) {
    case 'float32':
      return new Uint8Array(new Float32Array(spec.values).buffer);
    case 'int32':
      return new Uint8Array(new Int32Array(spec.values).buffer);
    case 'int64':
      return new Uint8Array(new BigInt64Array(spec.values.map((v) => BigInt(v))).buffer);
    case 'uint8':
      return new Uint8Array(spec.values);
  }
}

function tensor(spec: InitializerSpec): MessageInitShape<typeof TensorProtoSchema> {
  return {
    name: spec.name,
    dims: spec.dims.map((d) => BigInt(d)),
    dataType: ONNX_ELEM_TYPE[spec.dtype],
    rawData: rawBytes(spec),
  };
}

function attribute(name: string, value: AttributeValue): MessageInitShape<typeof AttributeProtoSchema> {
  if (typeof value === 'number') {
    return Number.isInteger(value)
      ? { name, type: AttributeProto_AttributeType.INT, i: BigInt(value) }
      : { name, type: AttributeProto_AttributeType.FLOAT, f: value };
  }
  if (typeof value === 'string') {
    return { name, type: AttributeProto_AttributeType.STRING, s: new TextEncoder().encode(value) };
  }
  if ('tensor' in value) {
    return { name, type: AttributeProto_AttributeType.TENSOR, t: tensor(value.tensor) };
  }
  return { name, type: AttributeProto_AttributeType.INTS, ints: value.map((v) => BigInt(v)) };
}

function node(spec: NodeSpec, index: number): MessageInitShape<typeof NodeProtoSchema> {
  return {
    input: [...spec.inputs],
    output: [...spec.outputs],
    name: `${spec.op}_${index}`,
    opType: spec.op,
    domain: spec.domain ?? '',
    attribute: Object.entries(spec.attributes ?? {}).map(([k, v]) => attribute(k, v)),
  };
}

/** Serializes a small ONNX model (IR version 8). */
export function buildOnnxModel(spec: ModelSpecForBuilder): Uint8Array {
  const model = create(ModelProtoSchema, {
    irVersion: 8n,
    producerName: 'visionserve',
    producerVersion: '0.1.0',
    docString: spec.docString ?? '',
    opsetImport: [{ domain: '', version: BigInt(spec.opset ?? 13) }],
    graph: {
      name: spec.graphName ?? 'graph',
      node: spec.nodes.map(node),
      initializer: (spec.initializers ?? []).map(tensor),
      input: spec.inputs.map(valueInfo),
      output: spec.outputs.map(valueInfo),
    },
  });
  return toBinary(ModelProtoSchema, model);
}
