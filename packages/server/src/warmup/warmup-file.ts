/**
 * TF Serving's warmup file (`<version>/assets.extra/tf_serving_warmup_requests`):
 * a TFRecord file of `PredictionLog` messages. visionserve replays `predict_log`
 * records; the other log types name APIs it does not serve and are refused.
 */
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { Code, ServingError, type Tensor } from '@visionserve/protocol';
import { tensorToProto, type PredictRequest, PredictionLogSchema } from '@visionserve/protocol/tfs-proto';
import { readTfRecords, writeTfRecords } from './tfrecord.js';

/** Path of the warmup file relative to a version directory. */
export const WARMUP_FILE_PATH = 'assets.extra/tf_serving_warmup_requests';

/** TF Serving replays at most this many records. */
export const MAX_WARMUP_RECORDS = 1000;

const LOG_TYPE_NAMES: Readonly<Record<string, string>> = {
  classifyLog: 'classify_log',
  regressLog: 'regress_log',
  multiInferenceLog: 'multi_inference_log',
};

/**
 * Decodes a warmup file into its PredictRequests, in file order. Throws
 * DATA_LOSS for a corrupt TFRecord framing (bad CRC, truncation) or an
 * undecodable record, INVALID_ARGUMENT for more than MAX_WARMUP_RECORDS
 * records or a record that is not a predict_log.
 */
export function parseWarmupFile(bytes: Uint8Array, source = WARMUP_FILE_PATH): PredictRequest[] {
  const records = readTfRecords(bytes, { source, maxRecords: MAX_WARMUP_RECORDS });
  return records.map((record, i) => {
    let log;
    try {
      log = fromBinary(PredictionLogSchema, record);
    } catch (error) {
      throw new ServingError(Code.DATA_LOSS, `${source}: record ${i} is not a PredictionLog`, {
        cause: error,
      });
    }
    if (log.logType.case !== 'predictLog') {
      const name =
        log.logType.case === undefined ? 'unknown' : (LOG_TYPE_NAMES[log.logType.case] ?? 'unknown');
      throw new ServingError(
        Code.INVALID_ARGUMENT,
        `${source}: record ${i}: unsupported log type ${name} for warmup (only predict_log is replayed)`,
      );
    }
    const request = log.logType.value.request;
    if (request === undefined) {
      throw new ServingError(Code.INVALID_ARGUMENT, `${source}: record ${i}: predict_log without a request`);
    }
    return request;
  });
}

/** One request of a warmup file to write: input alias -> tensor, optional output filter. */
export interface WarmupRecord {
  readonly inputs: Readonly<Record<string, Tensor>>;
  readonly outputFilter?: readonly string[];
  /** Signature name written into the request's model_spec. Default "serving_default". */
  readonly signatureName?: string;
  /** Model name written into the request's model_spec. Default "". */
  readonly modelName?: string;
}

/** Encodes requests as a warmup file (TFRecord of PredictionLog with predict_log), tensors as tensor_content. */
export function encodeWarmupFile(records: readonly WarmupRecord[]): Uint8Array {
  return writeTfRecords(
    records.map((r) => {
      const inputs: Record<string, ReturnType<typeof tensorToProto>> = {};
      for (const [alias, t] of Object.entries(r.inputs))
        inputs[alias] = tensorToProto(t, { asTensorContent: true });
      const log = create(PredictionLogSchema, {
        logType: {
          case: 'predictLog',
          value: {
            request: {
              modelSpec: { name: r.modelName ?? '', signatureName: r.signatureName ?? 'serving_default' },
              inputs,
              outputFilter: [...(r.outputFilter ?? [])],
            },
          },
        },
      });
      return toBinary(PredictionLogSchema, log);
    }),
  );
}
