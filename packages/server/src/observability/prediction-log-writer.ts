import { appendFile, mkdir } from 'node:fs/promises';
import { dirname } from 'node:path';
import { create, toBinary } from '@bufbuild/protobuf';
import { BinaryWriter, WireType } from '@bufbuild/protobuf/wire';
import { Code } from '@visionserve/protocol';
import {
  ModelSpecSchema,
  PredictRequestSchema,
  PredictResponseSchema,
  tensorToProto,
} from '@visionserve/protocol/tfs-proto';
import type { InferenceObserver, PredictEnd, PredictStart } from '../core/inference-observer.js';
import type { RequestLoggingConfig } from '../core/model-config.js';
import type { Logger } from '../util/logger.js';
import { writeTfRecords } from '../warmup/tfrecord.js';
import { MAX_WARMUP_RECORDS } from '../warmup/warmup-file.js';

export interface PredictionLogWriterOptions {
  /** The model's current `logging_config` (read on every predict; undefined: not logged). */
  readonly loggingConfigOf: (model: string) => RequestLoggingConfig | undefined;
  readonly logger: Logger;
  /** Records per file; each file stays a valid warmup file. Default 1000 (TF Serving's warmup limit). */
  readonly recordsPerFile?: number | undefined;
  /** Encoded records waiting to be written, in bytes, beyond which records are dropped. Default 64 MiB. */
  readonly maxPendingBytes?: number | undefined;
  /** Told of each sampled request: "written" or "dropped" (backlog full or write failed). */
  readonly onRecord?: ((model: string, outcome: 'written' | 'dropped') => void) | undefined;
  /** Random source in [0, 1) (tests). Default Math.random. */
  readonly random?: (() => number) | undefined;
}

export interface PredictionLogWriter extends InferenceObserver {
  /** Resolves once every record handed over so far is on disk. */
  flush(): Promise<void>;
}

/** LogMetadata { model_spec = 1; sampling_config = 2 { sampling_rate = 1 } } of a record. */
function logMetadata(start: PredictStart, samplingRate: number): Uint8Array {
  const spec = toBinary(
    ModelSpecSchema,
    create(ModelSpecSchema, {
      name: start.model,
      versionChoice: { case: 'version', value: { value: BigInt(start.version) } },
      signatureName: start.signatureName,
    }),
  );
  const sampling = new BinaryWriter().tag(1, WireType.Bit64).double(samplingRate).finish();
  return new BinaryWriter()
    .tag(1, WireType.LengthDelimited)
    .bytes(spec)
    .tag(2, WireType.LengthDelimited)
    .bytes(sampling)
    .finish();
}

/**
 * TF Serving's request logging (`logging_config` of a model): a `sampling_rate` share of
 * successful predicts is written as TFRecord files of `PredictionLog` records (log_metadata
 * + predict_log with request and response, tensors as tensor_content), named
 * `<filename_prefix>-<start time>-<pid>-<n>.tfrecord`. The format is the warmup file's, and
 * a file holds at most 1000 records, so any file can be copied to
 * `<version>/assets.extra/tf_serving_warmup_requests` to replay recorded traffic as warmup.
 * Requests are encoded on the request path only when sampled; files are written in the
 * background, in order, and a full backlog drops records instead of holding memory.
 */
export function createPredictionLogWriter(options: PredictionLogWriterOptions): PredictionLogWriter {
  const { logger } = options;
  const random = options.random ?? Math.random;
  const perFile = options.recordsPerFile ?? MAX_WARMUP_RECORDS;
  const maxPending = options.maxPendingBytes ?? 64 * 1024 * 1024;
  const stamp = new Date().toISOString().replace(/[-:]/g, '').replace(/\..*$/, '');
  const files = new Map<string, { index: number; records: number }>();
  let pendingBytes = 0;
  let tail: Promise<void> = Promise.resolve();
  let failures = 0;

  const fileFor = (prefix: string): string => {
    let f = files.get(prefix);
    if (f === undefined) {
      f = { index: 0, records: 0 };
      files.set(prefix, f);
    }
    if (f.records >= perFile) {
      f.index++;
      f.records = 0;
    }
    f.records++;
    return `${prefix}-${stamp}-${process.pid}-${f.index}.tfrecord`;
  };

  const write = (model: string, prefix: string, record: Uint8Array): void => {
    const framed = writeTfRecords([record]);
    if (pendingBytes + framed.byteLength > maxPending) {
      options.onRecord?.(model, 'dropped');
      return;
    }
    pendingBytes += framed.byteLength;
    const file = fileFor(prefix);
    tail = tail
      .then(async () => {
        await mkdir(dirname(file), { recursive: true });
        await appendFile(file, framed);
        options.onRecord?.(model, 'written');
      })
      .catch((error: unknown) => {
        options.onRecord?.(model, 'dropped');
        if (failures++ % 100 === 0) logger.error('request log: writing failed', { file, error });
      })
      .finally(() => {
        pendingBytes -= framed.byteLength;
      });
  };

  return {
    predictStarting(start: PredictStart) {
      const config = options.loggingConfigOf(start.model);
      if (config === undefined || !(random() < config.samplingRate)) return undefined;
      const inputs: Record<string, ReturnType<typeof tensorToProto>> = {};
      for (const [alias, t] of Object.entries(start.inputs))
        inputs[alias] = tensorToProto(t, { asTensorContent: true });
      // Encoded now: the inputs may be moved to a worker once this returns.
      const request = toBinary(
        PredictRequestSchema,
        create(PredictRequestSchema, {
          modelSpec: {
            name: start.model,
            versionChoice: { case: 'version', value: { value: BigInt(start.version) } },
            signatureName: start.signatureName,
          },
          inputs,
          outputFilter: [...start.outputFilter],
        }),
      );
      return (end: PredictEnd) => {
        if (end.code !== Code.OK || end.outputs === undefined) return;
        const outputs: Record<string, ReturnType<typeof tensorToProto>> = {};
        for (const [alias, t] of Object.entries(end.outputs))
          outputs[alias] = tensorToProto(t, { asTensorContent: true });
        const response = toBinary(
          PredictResponseSchema,
          create(PredictResponseSchema, {
            modelSpec: {
              name: start.model,
              versionChoice: { case: 'version', value: { value: BigInt(start.version) } },
              signatureName: start.signatureName,
            },
            outputs,
          }),
        );
        const predictLog = new BinaryWriter()
          .tag(1, WireType.LengthDelimited)
          .bytes(request)
          .tag(2, WireType.LengthDelimited)
          .bytes(response)
          .finish();
        const record = new BinaryWriter()
          .tag(1, WireType.LengthDelimited)
          .bytes(logMetadata(start, config.samplingRate))
          .tag(6, WireType.LengthDelimited)
          .bytes(predictLog)
          .finish();
        write(start.model, config.filenamePrefix, record);
      };
    },
    flush: () => tail,
  };
}
