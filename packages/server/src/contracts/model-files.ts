import type { DType, ExampleFeatureSpec } from '@visionserve/protocol';

/**
 * What a version directory holds for the runtime: one ONNX file per signature, with what
 * the model's own format declares about each signature. A plain version (`model.onnx`)
 * is one `serving_default` entry with nothing declared; a converted TensorFlow SavedModel
 * has one entry per SignatureDef. Type-only: the composition root passes the repository's
 * resolver (which may convert) to the runtime.
 */
export interface ModelFiles {
  /** Signature name -> its file. */
  readonly signatures: Readonly<Record<string, SignatureFile>>;
  /**
   * Signatures of the model's own format left out of `signatures` (e.g. a SavedModel
   * signature that did not convert), with the reason each is not served. Default: none.
   */
  readonly unserved?: Readonly<Record<string, string>> | undefined;
}

/** One declared tensor of a signature (the SavedModel's TensorInfo). */
export interface DeclaredTensor {
  readonly dtype: DType;
  /** -1 for unknown dimensions; undefined for unknown rank. */
  readonly shape: readonly number[] | undefined;
}

export interface SignatureFile {
  /** Absolute path of the ONNX file (several signatures may share one). */
  readonly path: string;
  /** TF Serving method name. Default "tensorflow/serving/predict". */
  readonly methodName?: string | undefined;
  /**
   * Declared inputs and outputs by alias; their graph names in the ONNX file are the
   * aliases. Shapes and dtypes here win over the ONNX metadata (a SavedModel's unknown rank
   * reads as rank 0 there). Default: the ONNX metadata.
   */
  readonly inputs?: Readonly<Record<string, DeclaredTensor>> | undefined;
  readonly outputs?: Readonly<Record<string, DeclaredTensor>> | undefined;
  /**
   * Set when clients send serialized tf.Examples in `inputKey` while the ONNX file takes
   * the parsed features (a SavedModel cut after its ParseExample op).
   */
  readonly examples?:
    { readonly inputKey: string; readonly features: readonly ExampleFeatureSpec[] } | undefined;
}

/** Finds (and, for formats that need it, prepares) the files of a version. */
export type ModelFilesResolver = (source: {
  readonly modelName: string;
  readonly version: number;
  /** The version directory. */
  readonly path: string;
  /** The model's base directory (holds the version directories and the model's assets). */
  readonly basePath: string;
}) => Promise<ModelFiles>;
