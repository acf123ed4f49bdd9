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

/** The state of one job run, shared by the module-level functions below. */
interface Job {
  readonly options: TransformJobOptions;
  readonly started: number;
  readonly attempts: number;
  /** Outputs that exist already (resume). */
  readonly finished: ReadonlySet<string>;
  readonly failures: TransformFailure[];
  readonly totalBytes: number;
  bytesDone: number;
  bytesDoneThisRun: number;
  records: number;
  recordsResumed: number;
  recordsFailed: number;
  requests: number;
  filesSkipped: number;
  filesWritten: number;
  filesFailed: number;
  lastProgress: number;
  /** Inputs read ahead (as many as requests in flight), so that S3 downloads overlap the work. */
  readonly reads: Map<number, Promise<Uint8Array>>;
  /** Work items across files, in order; files are opened as the pool reaches them. */
  fileIndex: number;
  current: { job: FileJob; next: number } | undefined;
  opening: Promise<void>;
  readonly jobsOpen: Set<FileJob>;
  fatal: Error | undefined;
}

function progress(j: Job, force: boolean): void {
  const { options } = j;
  const now = Date.now();
  if (options.onProgress === undefined || (!force && now - j.lastProgress < (options.progressEveryMs ?? 500)))
    return;
  j.lastProgress = now;
  const seconds = Math.max(0.001, (now - j.started) / 1000);
  const byteRate = j.bytesDoneThisRun / seconds;
  options.onProgress({
    records: j.records,
    recordsPerSecond: j.records / seconds,
    bytesDone: j.bytesDone,
    totalBytes: j.totalBytes,
    etaSeconds: byteRate > 0 ? (j.totalBytes - j.bytesDone) / byteRate : undefined,
    filesDone: j.filesSkipped + j.filesWritten + j.filesFailed,
    files: options.inputs.length,
  });
}

async function saveCheckpoint(job: FileJob): Promise<void> {
  const checkpoint: Checkpoint = { records: job.resumedRecords + job.recordsWritten, bytes: job.bytes };
  await writeFile(`${job.checkpointPath}.tmp`, JSON.stringify(checkpoint));
  await rename(`${job.checkpointPath}.tmp`, job.checkpointPath);
  job.lastCheckpoint = Date.now();
}

/** Reads input `index`, and starts reading the next ones not done yet. */
function readInput(j: Job, index: number): Promise<Uint8Array> {
  const { inputs } = j.options;
  const readAhead = Math.max(1, j.options.concurrency);
  for (let i = index; i < Math.min(inputs.length, index + readAhead); i++) {
    const input = inputs[i]!;
    if (j.reads.has(i) || j.finished.has(`${input.rel}.out`)) continue;
    const pending = input.read();
    pending.catch(() => undefined);
    j.reads.set(i, pending);
  }
  const data = j.reads.get(index) ?? inputs[index]!.read();
  j.reads.delete(index);
  return data;
}

/** A partial output's checkpoint (its output cut back to it), or none. */
async function readCheckpoint(partialPath: string, checkpointPath: string): Promise<Checkpoint> {
  let checkpoint: Checkpoint = { records: 0, bytes: 0 };
  try {
    checkpoint = JSON.parse(await readFile(checkpointPath, 'utf8')) as Checkpoint;
    // Output written after the last checkpoint is dropped: those records are sent again.
    await truncate(partialPath, checkpoint.bytes);
  } catch {
    checkpoint = { records: 0, bytes: 0 };
  }
  if (checkpoint.records === 0) await rm(partialPath, { force: true });
  return checkpoint;
}

/** Opens a file's job: its records, its batches from the checkpoint on, its partial output. */
async function openJob(j: Job, input: InputFile, index: number): Promise<FileJob | undefined> {
  const { options } = j;
  const name = `${input.rel}.out`;
  if (j.finished.has(name)) {
    j.filesSkipped++;
    j.bytesDone += input.size;
    return undefined;
  }
  const data = await readInput(j, index);
  const fileRecords = splitRecords(data, options.splitType);
  const partialPath = join(options.output.stateDir, `${name}.partial`);
  const checkpointPath = join(options.output.stateDir, `${name}.checkpoint`);
  await mkdir(dirname(partialPath), { recursive: true });
  const checkpoint = await readCheckpoint(partialPath, checkpointPath);
  const batches = miniBatches(
    fileRecords,
    options.batchStrategy,
    options.maxPayloadBytes,
    checkpoint.records,
  );
  j.recordsResumed += checkpoint.records;
  j.bytesDone +=
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
}

async function finishJob(j: Job, job: FileJob): Promise<void> {
  await job.handle?.close();
  job.handle = undefined;
  if (job.failed) {
    j.filesFailed++;
    await rm(job.partialPath, { force: true });
  } else {
    if (job.batches.length === 0 && job.resumedRecords === 0) await writeFile(job.partialPath, '');
    await j.options.output.commit(job.name, job.partialPath);
    j.filesWritten++;
    await rm(job.partialPath, { force: true });
  }
  await rm(job.checkpointPath, { force: true });
}

/** Writes the answered batches that are next in order. */
async function writeAnswered(j: Job, job: FileJob): Promise<void> {
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
    j.bytesDone += job.input.size * fraction;
    j.bytesDoneThisRun += job.input.size * fraction;
  }
}

/** Appends answered batches in order; finishes the file after its last batch. */
function flush(j: Job, job: FileJob): Promise<void> {
  job.writing = job.writing.then(async () => {
    await writeAnswered(j, job);
    if (job.nextWrite === job.batches.length) {
      if (!job.finished) {
        job.finished = true;
        await finishJob(j, job);
      }
    } else if (job.batches.length > 1 && Date.now() - job.lastCheckpoint > 200) await saveCheckpoint(job);
  });
  return job.writing;
}

async function send(j: Job, body: Uint8Array, contentType: string | undefined): Promise<InvokeResult> {
  let result: InvokeResult = { ok: false, status: 0, error: 'not sent' };
  for (let attempt = 0; attempt < j.attempts; attempt++) {
    if (attempt > 0) await new Promise((r) => setTimeout(r, 250 * 2 ** attempt));
    j.requests++;
    result = await j.options.invoke(body, contentType, j.options.accept);
    if (result.ok || !RETRY_STATUS.has(result.status)) return result;
  }
  if (!result.ok && result.status === 0) throw new Error(`the endpoint cannot be reached: ${result.error}`);
  return result;
}

/** The output of one record's result: its answer, or (failed) an error line where lines are assembled. */
function recordOutput(
  j: Job,
  job: FileJob,
  batch: MiniBatch,
  i: number,
  result: InvokeResult,
): Uint8Array | undefined {
  const { splitType, assembleWith } = j.options;
  const record = batch.records[i]!;
  j.records++;
  if (result.ok) return assemble(result.body, assembleWith);
  j.recordsFailed++;
  j.failures.push({
    input: job.input.uri,
    ...(splitType === 'Line' ? { line: record.line } : {}),
    record: job.resumedRecords + batch.first + i,
    status: result.status,
    error: result.error,
  });
  if (splitType === 'None') job.failed = true;
  else if (assembleWith === 'Line') return assemble(errorLine(result.error), 'Line');
  return undefined;
}

/** Answers one batch; a failing multi-record batch is retried record by record to isolate bad records. */
async function runBatch(j: Job, job: FileJob, batch: MiniBatch): Promise<Uint8Array> {
  const whole = await send(j, batch.body, job.contentType);
  if (whole.ok) {
    j.records += batch.records.length;
    return assemble(whole.body, j.options.assembleWith);
  }
  const singles: InvokeResult[] = [];
  if (batch.records.length === 1) singles.push(whole);
  else for (const r of batch.records) singles.push(await send(j, r.data, job.contentType));
  const parts: Uint8Array[] = [];
  singles.forEach((result, i) => {
    const part = recordOutput(j, job, batch, i, result);
    if (part !== undefined) parts.push(part);
  });
  return Buffer.concat(parts);
}

/** The next batch to send, opening files in order as they are reached; undefined when done or stopped. */
function nextItem(j: Job): Promise<{ job: FileJob; batch: MiniBatch } | undefined> {
  const { options } = j;
  const take = j.opening.then(async () => {
    for (;;) {
      if (options.signal?.aborted === true) return undefined;
      const current = j.current;
      if (current !== undefined && current.next < current.job.batches.length) {
        const batch = current.job.batches[current.next++]!;
        return { job: current.job, batch };
      }
      if (j.fileIndex >= options.inputs.length) return undefined;
      const index = j.fileIndex++;
      const job = await openJob(j, options.inputs[index]!, index);
      progress(j, false);
      if (job === undefined) continue;
      j.jobsOpen.add(job);
      if (job.batches.length === 0) {
        await flush(j, job);
        j.jobsOpen.delete(job);
        continue;
      }
      j.current = { job, next: 0 };
    }
  });
  j.opening = take.then(
    () => undefined,
    () => undefined,
  );
  return take;
}

/** One of the pool's request loops. */
async function worker(j: Job): Promise<void> {
  for (;;) {
    if (j.fatal !== undefined) return;
    const item = await nextItem(j);
    if (item === undefined) return;
    try {
      const bytes = await runBatch(j, item.job, item.batch);
      item.job.done.set(item.batch.index, bytes);
      await flush(j, item.job);
      if (item.job.nextWrite === item.job.batches.length) j.jobsOpen.delete(item.job);
      progress(j, false);
    } catch (error) {
      j.fatal ??= error instanceof Error ? error : new Error(String(error));
      return;
    }
  }
}

/** Unfinished files (interrupted, or a fatal error): keep their partial output with a checkpoint. */
async function keepUnfinished(j: Job): Promise<void> {
  for (const job of j.jobsOpen) {
    await job.writing;
    if (job.nextWrite < job.batches.length) {
      await job.handle?.close();
      job.handle = undefined;
      if (job.batches.length > 1 || job.recordsWritten > 0) await saveCheckpoint(job);
    }
  }
}

function summary(j: Job): TransformSummary {
  const { options } = j;
  const wallMs = Date.now() - j.started;
  const filesDone = j.filesSkipped + j.filesWritten + j.filesFailed;
  return {
    files: options.inputs.length,
    filesSkipped: j.filesSkipped,
    filesWritten: j.filesWritten,
    filesFailed: j.filesFailed,
    records: j.records,
    recordsResumed: j.recordsResumed,
    recordsFailed: j.recordsFailed,
    requests: j.requests,
    wallMs,
    recordsPerSecond: j.records / Math.max(0.001, wallMs / 1000),
    interrupted: options.signal?.aborted === true && filesDone < options.inputs.length,
    failures: j.failures,
  };
}

export async function runTransformJob(options: TransformJobOptions): Promise<TransformSummary> {
  const started = Date.now();
  const finished = await options.output.finished();
  await mkdir(options.output.stateDir, { recursive: true });
  const j: Job = {
    options,
    started,
    attempts: Math.max(1, options.attempts ?? 3),
    finished,
    failures: [],
    totalBytes: options.inputs.reduce((n, f) => n + f.size, 0),
    bytesDone: 0,
    bytesDoneThisRun: 0,
    records: 0,
    recordsResumed: 0,
    recordsFailed: 0,
    requests: 0,
    filesSkipped: 0,
    filesWritten: 0,
    filesFailed: 0,
    lastProgress: 0,
    reads: new Map(),
    fileIndex: 0,
    current: undefined,
    opening: Promise.resolve(),
    jobsOpen: new Set(),
    fatal: undefined,
  };
  await Promise.all(Array.from({ length: Math.max(1, options.concurrency) }, () => worker(j)));
  await keepUnfinished(j);
  progress(j, true);
  if (j.fatal !== undefined) throw j.fatal;
  return summary(j);
}
