/**
 * A frame stream's raw tensor frame (`visionserve.stream.FrameTensor`): KServe v2's binary
 * tensor form (datatype name, shape, little-endian row-major bytes), decoded with the same
 * checks as a ModelInferRequest input's `raw_input_contents`.
 */
import type { MessageInitShape } from '@bufbuild/protobuf';
import { invalidArgument } from '../errors.js';
import type { Tensor } from '../tensor.js';
import { binaryOf, tensorFromBinary } from '../kserve/binary-tensor.js';
import { datatypeOfDtype, isKServeDatatype } from '../kserve/datatype.js';
import { declaredShape } from '../kserve-proto/grpc-infer-request.js';
import type { FrameTensor, FrameTensorSchema } from '../gen/visionserve/frame_stream_pb.js';

/**
 * The tensor a FrameTensor holds (numeric data a view of `raw_contents` where aligned).
 * INVALID_ARGUMENT naming `what` for an unknown datatype, a negative or huge dimension, or
 * raw bytes that do not match the datatype and shape.
 */
export function tensorOfFrameTensor(message: FrameTensor, what: string): Tensor {
  const datatype = message.datatype;
  if (!isKServeDatatype(datatype)) {
    const shown = datatype.length > 32 ? `${datatype.slice(0, 32)}...` : datatype;
    throw invalidArgument(
      `${what}: unknown datatype ${JSON.stringify(shown)} (KServe v2 names: UINT8, FP32, ...)`,
    );
  }
  const { shape, count } = declaredShape(message.shape, what);
  return tensorFromBinary(datatype, shape, count, message.rawContents, what);
}

/** A tensor as a FrameTensor (numeric data a view, no copy). */
export function frameTensorOf(tensor: Tensor): MessageInitShape<typeof FrameTensorSchema> {
  return {
    datatype: datatypeOfDtype(tensor.dtype),
    shape: tensor.shape.map((d) => BigInt(d)),
    rawContents: binaryOf(tensor),
  };
}
