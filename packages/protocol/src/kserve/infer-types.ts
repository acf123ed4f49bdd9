/**
 * An Open Inference Protocol inference request and response after (before) wire
 * decoding, the same for HTTP/REST and gRPC: the transports only differ in how tensors
 * and parameters are framed.
 */
import type { Tensor } from '../tensor.js';
import type { KServeDatatype } from './datatype.js';

/** A request, tensor or response parameter (the InferParameter oneof; JSON has no bigint). */
export type InferParameterValue = string | number | boolean | bigint;

export type InferParameters = Readonly<Record<string, InferParameterValue>>;

export interface InferInputTensor {
  readonly name: string;
  readonly datatype: KServeDatatype;
  /** As declared by the request. */
  readonly shape: readonly number[];
  readonly parameters: InferParameters;
  /** The data, of the datatype's dtype and the declared shape (element count checked). */
  readonly tensor: Tensor;
}

export interface InferRequestedOutput {
  readonly name: string;
  readonly parameters: InferParameters;
  /**
   * Classification extension: return the top `classification` entries of this output as
   * BYTES "value:index[:label]" instead of the tensor; 0 means no classification.
   */
  readonly classification: number;
}

export interface InferRequest {
  /** Echoed in the response; "" when the request carries none. */
  readonly id: string;
  readonly parameters: InferParameters;
  readonly inputs: readonly InferInputTensor[];
  /** The outputs asked for, in order; undefined when the request lists none (all outputs). */
  readonly outputs: readonly InferRequestedOutput[] | undefined;
}

export interface InferOutputTensor {
  readonly name: string;
  /** Datatype and shape come from the tensor (`string` is BYTES). */
  readonly tensor: Tensor;
}

export interface InferResponse {
  readonly modelName: string;
  /** The version that ran, as a decimal string. */
  readonly modelVersion: string;
  /** The request's id; "" when it had none (then omitted on the wire). */
  readonly id: string;
  readonly outputs: readonly InferOutputTensor[];
}
