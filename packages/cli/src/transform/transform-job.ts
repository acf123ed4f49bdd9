/**
 * A Batch Transform job: every input file becomes `<name>.out`, its records sent in
 * mini-batches by a bounded pool of concurrent requests, answers written in record
 * order. Resumable: finished outputs are skipped, and an unfinished line-split file
 * continues from its last checkpoint (records answered and output bytes, written
 * atomically beside the partial output). Failed records go to a failures manifest and
 * the job goes on.
 */
import { mkdir, open, readFile, rename, rm, truncate, writeFile } from 'node:fs/promises';
import type { FileHandle } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import type { InputFile, OutputLocation } from './transform-location.js';
import {
  type AssembleWith,
  type BatchStrategy,
  type MiniBatch,
  type SplitType,
  type TransformRecord,
  assemble,
  contentTypeFor,
  miniBatches,
  splitRecords,
} from './transform-records.js';

/** One request's outcome; `status` 0 means the request never got an answer (network). */
export type InvokeResult =
  | { readonly ok: true; readonly body: Uint8Array }
  | { readonly ok: false; readonly status: number; readonly error: string };

/** Sends one /invocations request (in-process or to an endpoint). */
export type TransformInvoke = (
  body: Uint8Array,
  contentType: string | undefined,
  accept: string,
) => Promise<InvokeResult>;

export interface TransformJobOptions {
  readonly inputs: readonly InputFile[];
  readonly output: OutputLocation;
  readonly invoke: TransformInvoke;
  readonly splitType: SplitType;
  readonly batchStrategy: BatchStrategy;
  /** Largest request body, in bytes. */
  readonly maxPayloadBytes: number;
  /** Requests in flight at once. */
  readonly concurrency: number;
  readonly assembleWith: AssembleWith;
  readonly accept: string;
  /** Content-Type of every request; default: by each file's extension. */
  readonly contentType?: string | undefined;
  /** Stop taking new work (requests in flight finish and are written; checkpoints saved). */
  readonly signal?: AbortSignal | undefined;
  /** Called at most every `progressEveryMs` and at the end. */
  readonly onProgress?: ((progress: TransformProgress) => void) | undefined;
  readonly progressEveryMs?: number | undefined;
  /** Tries per request for 429/503 and network errors. Default 3. */
  readonly attempts?: number | undefined;
}

export interface TransformProgress {
  /** Records answered in this run. */
  readonly records: number;
  readonly recordsPerSecond: number;
  /** Input bytes whose records are answered (this run and before), of `totalBytes`. */
  readonly bytesDone: number;
  readonly totalBytes: number;
  /** Seconds left at the current byte rate; undefined before there is a rate. */
  readonly etaSeconds: number | undefined;
  readonly filesDone: number;
  readonly files: number;
}

export interface TransformFailure {
  readonly input: string;
  /** 1-based line of the record (line-split inputs); absent for a whole file. */
  readonly line?: number;
  /** 0-based index of the record among the file's records. */
  readonly record: number;
  readonly status: number;
  readonly error: string;
}

export interface TransformSummary {
  readonly files: number;
  /** Outputs that existed already (resume). */
  readonly filesSkipped: number;
  /** Outputs written by this run. */
  readonly filesWritten: number;
  /** Inputs that produced no output (a whole-file record that failed). */
  readonly filesFailed: number;
  /** Records answered by this run, failed ones included. */
  readonly records: number;
  /** Records of unfinished files answered by an earlier run (resumed past). */
  readonly recordsResumed: number;
  readonly recordsFailed: number;
  readonly requests: number;
  readonly wallMs: number;
  readonly recordsPerSecond: number;
  readonly interrupted: boolean;
  readonly failures: readonly TransformFailure[];
}

/** A checkpoint: records answered and output bytes written for a partial output. */
interface Checkpoint {
  readonly records: number;
  readonly bytes: number;
}

const RETRY_STATUS = new Set([0, 429, 503]);

interface FileJob {
  readonly input: InputFile;
  readonly name: string;
  readonly contentType: string | undefined;
  readonly records: readonly TransformRecord[];
  readonly batches: readonly MiniBatch[];
  readonly partialPath: string;
  readonly checkpointPath: string;
  /** Records answered before this run. */
  readonly resumedRecords: number;
  handle: FileHandle | undefined;
  bytes: number;
  recordsWritten: number;
  nextWrite: number;
  readonly done: Map<number, Uint8Array>;
  writing: Promise<void>;
  lastCheckpoint: number;
  failed: boolean;
  /** Committed (or given up); later flushes find nothing to do. */
  finished: boolean;
}

function errorLine(message: string): Uint8Array {
  return Buffer.from(JSON.stringify({ error: message }));
}

export async function runTransformJob(options: TransformJobOptions): Promise<TransformSummary> {
  const { output, splitType, assembleWith, accept } = options;
  const started = Date.now();
  const attempts = Math.max(1, options.attempts ?? 3);
  const finished = await output.finished();
  await mkdir(output.stateDir, { recursive: true });
  const failures: TransformFailure[] = [];
  const totalBytes = options.inputs.reduce((n, f) => n + f.size, 0);
  let bytesDone = 0;
  let records = 0;
  let recordsResumed = 0;
  let recordsFailed = 0;
  let requests = 0;
  let filesSkipped = 0;
  let filesWritten = 0;
  let filesFailed = 0;
  let lastProgress = 0;

  const progress = (force: boolean): void => {
    const now = Date.now();
    if (options.onProgress === undefined || (!force && now - lastProgress < (options.progressEveryMs ?? 500)))
      return;
    lastProgress = now;
    const seconds = Math.max(0.001, (now - started) / 1000);
    const byteRate = bytesDoneThisRun / seconds;
    options.onProgress({
      records,
      recordsPerSecond: records / seconds,
      bytesDone,
      totalBytes,
      etaSeconds: byteRate > 0 ? (totalBytes - bytesDone) / byteRate : undefined,
      filesDone: filesSkipped + filesWritten + filesFailed,
      files: options.inputs.length,
    });
  };
  let bytesDoneThisRun = 0;

  const saveCheckpoint = async (job: FileJob): Promise<void> => {
    const checkpoint: Checkpoint = { records: job.resumedRecords + job.recordsWritten, bytes: job.bytes };
    await writeFile(`${job.checkpointPath}.tmp`, JSON.stringify(checkpoint));
    await rename(`${job.checkpointPath}.tmp`, job.checkpointPath);
    job.lastCheckpoint = Date.now();
  };

  // Inputs are read ahead (as many as requests in flight), so that S3 downloads overlap the work.
  const reads = new Map<number, Promise<Uint8Array>>();
  const readAhead = Math.max(1, options.concurrency);
  const readInput = (index: number): Promise<Uint8Array> => {
    for (let i = index; i < Math.min(options.inputs.length, index + readAhead); i++) {
      const input = options.inputs[i]!;
      if (reads.has(i) || finished.has(`${input.rel}.out`)) continue;
      const pending = input.read();
      pending.catch(() => undefined);
      reads.set(i, pending);
    }
    const data = reads.get(index) ?? options.inputs[index]!.read();
    reads.delete(index);
    return data;
  };

  /** Opens a file's job: its records, its batches from the checkpoint on, its partial output. */
  const openJob = async (input: InputFile, index: number): Promise<FileJob | undefined> => {
    const name = `${input.rel}.out`;
    if (finished.has(name)) {
      filesSkipped++;
      bytesDone += input.size;
      return undefined;
    }
    const data = await readInput(index);
    const fileRecords = splitRecords(data, splitType);
    const partialPath = join(output.stateDir, `${name}.partial`);
    const checkpointPath = join(output.stateDir, `${name}.checkpoint`);
    await mkdir(dirname(partialPath), { recursive: true });
    let checkpoint: Checkpoint = { records: 0, bytes: 0 };
    try {
      checkpoint = JSON.parse(await readFile(checkpointPath, 'utf8')) as Checkpoint;
      // Output written after the last checkpoint is dropped: those records are sent again.
      await truncate(partialPath, checkpoint.bytes);
    } catch {
      checkpoint = { records: 0, bytes: 0 };
    }
    if (checkpoint.records === 0) await rm(partialPath, { force: true });
    const batches = miniBatches(
      fileRecords,
      options.batchStrategy,
      options.maxPayloadBytes,
      checkpoint.records,
    );
    recordsResumed += checkpoint.records;
    bytesDone +=
      fileRecords.length === 0 ? 0 : Math.round((input.size * checkpoint.records) / fileRecords.length);
    return {
      input,
      name,
      contentType: options.contentType ?? contentTypeFor(input.rel),
      records: fileRecords,
      batches,
      partialPath,
      checkpointPath,
      resumedRecords: checkpoint.records,
      handle: undefined,
      bytes: checkpoint.bytes,
      recordsWritten: 0,
      nextWrite: 0,
      done: new Map(),
      writing: Promise.resolve(),
      lastCheckpoint: Date.now(),
      failed: false,
      finished: false,
    };
  };

  const finishJob = async (job: FileJob): Promise<void> => {
    await job.handle?.close();
    job.handle = undefined;
    if (job.failed) {
      filesFailed++;
      await rm(job.partialPath, { force: true });
    } else {
      if (job.batches.length === 0 && job.resumedRecords === 0) await writeFile(job.partialPath, '');
      await output.commit(job.name, job.partialPath);
      filesWritten++;
      await rm(job.partialPath, { force: true });
    }
    await rm(job.checkpointPath, { force: true });
  };

  /** Appends answered batches in order; finishes the file after its last batch. */
  const flush = (job: FileJob): Promise<void> => {
    job.writing = job.writing.then(async () => {
      while (job.done.has(job.nextWrite)) {
        const bytes = job.done.get(job.nextWrite)!;
        const batch = job.batches[job.nextWrite]!;
        job.done.delete(job.nextWrite);
        if (bytes.byteLength > 0) {
          job.handle ??= await open(job.partialPath, 'a');
          await job.handle.write(bytes);
          job.bytes += bytes.byteLength;
        }
        job.recordsWritten += batch.records.length;
        job.nextWrite++;
        const fraction = batch.records.length / Math.max(1, job.records.length);
        bytesDone += job.input.size * fraction;
        bytesDoneThisRun += job.input.size * fraction;
      }
      if (job.nextWrite === job.batches.length) {
        if (!job.finished) {
          job.finished = true;
          await finishJob(job);
        }
      } else if (job.batches.length > 1 && Date.now() - job.lastCheckpoint > 200) await saveCheckpoint(job);
    });
    return job.writing;
  };

  const send = async (body: Uint8Array, contentType: string | undefined): Promise<InvokeResult> => {
    let result: InvokeResult = { ok: false, status: 0, error: 'not sent' };
    for (let attempt = 0; attempt < attempts; attempt++) {
      if (attempt > 0) await new Promise((r) => setTimeout(r, 250 * 2 ** attempt));
      requests++;
      result = await options.invoke(body, contentType, accept);
      if (result.ok || !RETRY_STATUS.has(result.status)) return result;
    }
    if (!result.ok && result.status === 0) throw new Error(`the endpoint cannot be reached: ${result.error}`);
    return result;
  };

  /** Answers one batch; a failing multi-record batch is retried record by record to isolate bad records. */
  const runBatch = async (job: FileJob, batch: MiniBatch): Promise<Uint8Array> => {
    const whole = await send(batch.body, job.contentType);
    if (whole.ok) {
      records += batch.records.length;
      return assemble(whole.body, assembleWith);
    }
    const singles =
      batch.records.length === 1
        ? [whole]
        : await (async () => {
            const out: InvokeResult[] = [];
            for (const r of batch.records) out.push(await send(r.data, job.contentType));
            return out;
          })();
    const parts: Uint8Array[] = [];
    singles.forEach((result, i) => {
      const record = batch.records[i]!;
      records++;
      if (result.ok) {
        parts.push(assemble(result.body, assembleWith));
        return;
      }
      recordsFailed++;
      failures.push({
        input: job.input.uri,
        ...(splitType === 'Line' ? { line: record.line } : {}),
        record: job.resumedRecords + batch.first + i,
        status: result.status,
        error: result.error,
      });
      if (splitType === 'None') job.failed = true;
      else if (assembleWith === 'Line') parts.push(assemble(errorLine(result.error), 'Line'));
    });
    return Buffer.concat(parts);
  };

  // Work items across files, in order; files are opened as the pool reaches them.
  let fileIndex = 0;
  let current: { job: FileJob; next: number } | undefined;
  let opening: Promise<void> = Promise.resolve();
  const jobsOpen = new Set<FileJob>();
  const nextItem = async (): Promise<{ job: FileJob; batch: MiniBatch } | undefined> => {
    const take = opening.then(async () => {
      for (;;) {
        if (options.signal?.aborted === true) return undefined;
        if (current !== undefined && current.next < current.job.batches.length) {
          const batch = current.job.batches[current.next++]!;
          return { job: current.job, batch };
        }
        if (fileIndex >= options.inputs.length) return undefined;
        const index = fileIndex++;
        const job = await openJob(options.inputs[index]!, index);
        progress(false);
        if (job === undefined) continue;
        jobsOpen.add(job);
        if (job.batches.length === 0) {
          await flush(job);
          jobsOpen.delete(job);
          continue;
        }
        current = { job, next: 0 };
      }
    });
    opening = take.then(
      () => undefined,
      () => undefined,
    );
    return take;
  };

  let fatal: Error | undefined;
  const worker = async (): Promise<void> => {
    for (;;) {
      if (fatal !== undefined) return;
      const item = await nextItem();
      if (item === undefined) return;
      try {
        const bytes = await runBatch(item.job, item.batch);
        item.job.done.set(item.batch.index, bytes);
        await flush(item.job);
        if (item.job.nextWrite === item.job.batches.length) jobsOpen.delete(item.job);
        progress(false);
      } catch (error) {
        fatal ??= error instanceof Error ? error : new Error(String(error));
        return;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, options.concurrency) }, () => worker()));
  // Unfinished files (interrupted, or a fatal error): keep their partial output with a checkpoint.
  for (const job of jobsOpen) {
    await job.writing;
    if (job.nextWrite < job.batches.length) {
      await job.handle?.close();
      job.handle = undefined;
      if (job.batches.length > 1 || job.recordsWritten > 0) await saveCheckpoint(job);
    }
  }
  progress(true);
  if (fatal !== undefined) throw fatal;
  const wallMs = Date.now() - started;
  return {
    files: options.inputs.length,
    filesSkipped,
    filesWritten,
    filesFailed,
    records,
    recordsResumed,
    recordsFailed,
    requests,
    wallMs,
    recordsPerSecond: records / Math.max(0.001, wallMs / 1000),
    interrupted:
      options.signal?.aborted === true && filesSkipped + filesWritten + filesFailed < options.inputs.length,
    failures,
  };
}
