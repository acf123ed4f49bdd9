import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { Code, ServingError, type Tensor, invalidArgument } from '@visionserve/protocol';
import { createModelManager } from '../src/core/model-manager.js';
import type { ModelSource, RunOptions, Session, SessionFactory } from '../src/core/session.js';
import type { Signature } from '../src/core/signature.js';
import { silentLogger } from '../src/util/logger.js';
import { crc32c, maskedCrc32c } from '../src/warmup/crc32c.js';
import { readTfRecords, writeTfRecords } from '../src/warmup/tfrecord.js';
import { encodeWarmupFile, parseWarmupFile } from '../src/warmup/warmup-file.js';
import {
  type ServedSignatures,
  type WarmupReport,
  createWarmupSessionFactory,
} from '../src/warmup/warmup-session-factory.js';
import {
  FAKE_SIGNATURE,
  createFakeDisk,
  createFakeSessionFactory,
  deferred,
  floatInput,
  tick,
} from './fakes.js';
import { DEFAULTS } from '../src/config/server-config.js';
import { modelManagerSettings } from '../src/compose/config-settings.js';

const isCode =
  (code: Code, message?: RegExp) =>
  (error: unknown): boolean => {
    assert.ok(error instanceof ServingError, `not a ServingError: ${String(error)}`);
    assert.equal(error.code, code, error.message);
    if (message) assert.match(error.message, message);
    return true;
  };

const bytesOf = (s: string): Uint8Array => new TextEncoder().encode(s);

void describe('TFRecord framing', () => {
  void it('computes CRC-32C and its TFRecord mask', () => {
    assert.equal(crc32c(bytesOf('123456789')), 0xe3069283);
    assert.equal(crc32c(new Uint8Array(0)), 0);
    const crc = crc32c(bytesOf('abc'));
    assert.equal(maskedCrc32c(bytesOf('abc')), ((((crc >>> 15) | (crc << 17)) >>> 0) + 0xa282ead8) >>> 0);
  });

  void it('round-trips records, including empty ones', () => {
    const records = [bytesOf('first'), new Uint8Array(0), bytesOf('x'.repeat(1000))];
    const file = writeTfRecords(records);
    assert.equal(
      file.length,
      records.reduce((n, r) => n + 16 + r.length, 0),
    );
    assert.deepEqual(
      readTfRecords(file).map((r) => [...r]),
      records.map((r) => [...r]),
    );
  });

  void it('refuses corrupt or truncated files with DATA_LOSS naming the offset', () => {
    const file = writeTfRecords([bytesOf('hello'), bytesOf('world')]);
    const flipped = file.slice();
    flipped[21 + 12 + 1] = flipped[21 + 12 + 1]! ^ 0x01; // a data byte of the second record (it starts at 21)
    assert.throws(() => readTfRecords(flipped), isCode(Code.DATA_LOSS, /offset 21: data crc32c mismatch/));
    const badLength = file.slice();
    badLength[0] = badLength[0]! ^ 0x04;
    assert.throws(() => readTfRecords(badLength), isCode(Code.DATA_LOSS, /offset 0: length crc32c mismatch/));
    assert.throws(
      () => readTfRecords(file.subarray(0, file.length - 2)),
      isCode(Code.DATA_LOSS, /truncated/),
    );
    assert.throws(
      () => readTfRecords(file.subarray(0, 5)),
      isCode(Code.DATA_LOSS, /truncated record header/),
    );
    assert.throws(() => readTfRecords(file, { maxRecords: 1 }), isCode(Code.INVALID_ARGUMENT, /more than 1/));
  });

  void it('encodes and parses warmup files of predict_log records', () => {
    const file = encodeWarmupFile([
      { inputs: { x: floatInput([[1, 2]]) }, outputFilter: ['y'] },
      {
        inputs: {
          x: floatInput([
            [3, 4],
            [5, 6],
          ]),
        },
      },
    ]);
    const requests = parseWarmupFile(file);
    assert.equal(requests.length, 2);
    assert.deepEqual(requests[0]!.outputFilter, ['y']);
    assert.deepEqual(
      requests[1]!.inputs['x']!.tensorShape!.dim.map((d) => d.size),
      [2n, 2n],
    );
    const tooMany = encodeWarmupFile(
      Array.from({ length: 1001 }, () => ({ inputs: { x: floatInput([[0, 0]]) } })),
    );
    assert.throws(() => parseWarmupFile(tooMany), isCode(Code.INVALID_ARGUMENT, /more than 1000 records/));
  });
});

/** A fake factory whose sessions record runs and can hold them at a gate. */
function gatedFactory() {
  const inner = createFakeSessionFactory();
  const state = {
    runs: [] as { source: ModelSource; inputs: Record<string, Tensor>; options: RunOptions | undefined }[],
    gate: undefined as Promise<void> | undefined,
    loads: 0,
  };
  const factory: SessionFactory = {
    async load(source) {
      state.loads++;
      const session = await inner.load(source);
      const wrapped: Session = {
        signature: session.signature,
        async run(inputs, options) {
          state.runs.push({ source, inputs: { ...inputs }, options });
          await state.gate;
          return session.run(inputs, options);
        },
        close: () => session.close(),
      };
      return wrapped;
    },
  };
  return { factory, state, inner };
}

void describe('warmup session factory', () => {
  void it('replays the warmup file before the version becomes AVAILABLE', async () => {
    const { factory, state } = gatedFactory();
    const file = encodeWarmupFile([
      { inputs: { x: floatInput([[1, 2]]) } },
      {
        inputs: {
          x: floatInput([
            [3, 4],
            [5, 6],
          ]),
        },
        outputFilter: ['y'],
      },
    ]);
    const reports: WarmupReport[] = [];
    const disk = createFakeDisk({ '/m': [1] });
    const gate = deferred();
    state.gate = gate.promise;
    const manager = createModelManager({
      ...modelManagerSettings(DEFAULTS),
      sessionFactory: createWarmupSessionFactory({
        factory,
        readWarmupFile: () => Promise.resolve(file),
        iterations: 3,
        onWarmup: (r) => reports.push(r),
        logger: silentLogger,
      }),
      listVersions: (p) => disk.listVersions(p),
      logger: silentLogger,
    });
    const loading = manager.setModels([
      { name: 'm', basePath: '/m', versionPolicy: { kind: 'latest', numVersions: 1 }, versionLabels: {} },
    ]);
    while (state.runs.length === 0) await tick();
    // A warmup request is running: the version must not serve yet.
    assert.equal(manager.status('m')[0]!.state, 'LOADING');
    assert.throws(() => manager.acquire({ name: 'm' }), isCode(Code.NOT_FOUND));
    gate.resolve();
    await loading;
    assert.equal(manager.status('m')[0]!.state, 'AVAILABLE');
    assert.equal(state.runs.length, 6, '2 records x 3 iterations');
    assert.deepEqual(state.runs[1]!.options?.outputNames, ['y']);
    assert.deepEqual(state.runs[1]!.inputs['x']!.shape, [2, 2]);
    assert.deepEqual(
      reports.map((r) => [r.kind, r.records, r.runs]),
      [['file', 2, 6]],
    );
    await manager.close();
  });

  void it('replays records for served signatures through their input adapter; unknown ones fail the load', async () => {
    const { factory, state, inner } = gatedFactory();
    const jpeg: Tensor = {
      dtype: 'string',
      shape: [2],
      data: [bytesOf('JPEG one'), bytesOf('JPEG two')],
    };
    // As the encoded-image signature derived from visionserve.json: strings in, "x" rows out.
    const bytesSignature: Signature = {
      inputs: { image_bytes: { name: 'image_bytes', dtype: 'string', shape: [-1] } },
      outputs: FAKE_SIGNATURE.outputs,
      methodName: FAKE_SIGNATURE.methodName,
      runs: 'serving_default',
      adapter: { kind: 'encoded-image', inputKey: 'image_bytes', imageInput: 'x' },
      modelInputs: FAKE_SIGNATURE.inputs,
    };
    const adapted: string[][] = [];
    const served: ServedSignatures = {
      signatures: { serving_default: FAKE_SIGNATURE, serving_bytes: bytesSignature },
      adaptInputs: (signature, inputs) => {
        const data = (inputs['image_bytes']!.data as Uint8Array[]).map((b) => new TextDecoder().decode(b));
        adapted.push(data);
        if (!data.every((b) => b.startsWith('JPEG')))
          return Promise.reject(invalidArgument('Image 0: not an image'));
        return Promise.resolve({ x: floatInput(data.map((_, i) => [i, i])) });
      },
    };
    const reports: WarmupReport[] = [];
    const asked: string[][] = [];
    const warmup = (records: Parameters<typeof encodeWarmupFile>[0], withServed = true) =>
      createWarmupSessionFactory({
        factory,
        readWarmupFile: () => Promise.resolve(encodeWarmupFile(records)),
        servedSignatures: withServed
          ? (source, signatures) => {
              asked.push([source.modelName, ...Object.keys(signatures)]);
              return Promise.resolve(served);
            }
          : undefined,
        onWarmup: (r) => reports.push(r),
        logger: silentLogger,
      });
    const source = (version: number) => ({ modelName: 'm', version, path: `/m/${version}`, basePath: '/m' });

    await (
      await warmup([
        { inputs: { image_bytes: jpeg }, signatureName: 'serving_bytes', outputFilter: ['y'] },
        { inputs: { x: floatInput([[1, 2]]) } },
      ]).load(source(1))
    ).close();
    assert.deepEqual(asked, [['m', 'serving_default']], 'asked once, with the session signatures');
    assert.deepEqual(adapted, [['JPEG one', 'JPEG two']]);
    assert.equal(state.runs.length, 2);
    assert.deepEqual(state.runs[0]!.inputs['x']!.shape, [2, 2], 'the adapted batch ran');
    assert.deepEqual(state.runs[0]!.options?.outputNames, ['y']);
    assert.deepEqual(
      reports.map((r) => [r.kind, r.records, r.runs]),
      [['file', 2, 2]],
    );

    // TF Serving fails the load for a record it cannot run; so do adapter errors and unknown names.
    const bad = (
      record: Parameters<typeof encodeWarmupFile>[0][number],
      version: number,
      withServed = true,
    ) => warmup([record], withServed).load(source(version));
    await assert.rejects(
      bad(
        {
          inputs: { image_bytes: { ...jpeg, data: [bytesOf('GIF89a')], shape: [1] } },
          signatureName: 'serving_bytes',
        },
        2,
      ),
      isCode(Code.INVALID_ARGUMENT, /^Warmup request 0 of .* failed: Image 0: not an image/),
    );
    assert.ok(inner.events.includes('close m:2'), 'the loaded session was closed');
    await assert.rejects(
      bad({ inputs: { x: floatInput([[1, 2]]) }, signatureName: 'typo' }, 3),
      isCode(Code.FAILED_PRECONDITION, /Serving signature key "typo" not found/),
    );
    await assert.rejects(
      bad({ inputs: { x: floatInput([[1, 2]]) }, signatureName: 'serving_bytes' }, 4),
      isCode(Code.INVALID_ARGUMENT, /input tensor alias not found/),
    );
    // Without servedSignatures only the session's own signatures exist.
    await assert.rejects(
      bad({ inputs: { image_bytes: jpeg }, signatureName: 'serving_bytes' }, 5, false),
      isCode(Code.FAILED_PRECONDITION, /"serving_bytes" not found/),
    );
    assert.equal(state.runs.length, 2, 'no failing record reached the session');
  });

  void it('fails the load for a corrupt file or a failing record, and closes the session', async () => {
    const { factory, inner } = gatedFactory();
    const good = encodeWarmupFile([{ inputs: { x: floatInput([[1, 2]]) } }]);
    const corrupt = good.slice();
    corrupt[corrupt.length - 1] = corrupt[corrupt.length - 1]! ^ 0xff;
    const make = (file: Uint8Array) =>
      createWarmupSessionFactory({
        factory,
        readWarmupFile: () => Promise.resolve(file),
        logger: silentLogger,
      });
    await assert.rejects(
      make(corrupt).load({ modelName: 'm', version: 1, path: '/m/1', basePath: '/m' }),
      isCode(
        Code.DATA_LOSS,
        /Failed to read warmup file: m\/1\/assets.extra\/tf_serving_warmup_requests: corrupted record at byte offset 0: data crc32c mismatch/,
      ),
    );
    assert.ok(!inner.events.includes('load-start m:1'), 'the model is not loaded for a corrupt file');
    const wrongInput = encodeWarmupFile([{ inputs: { nope: floatInput([[1, 2]]) } }]);
    await assert.rejects(
      make(wrongInput).load({ modelName: 'm', version: 2, path: '/m/2', basePath: '/m' }),
      isCode(
        Code.INVALID_ARGUMENT,
        /^Warmup request 0 of assets.extra\/tf_serving_warmup_requests failed: input tensor alias not found/,
      ),
    );
    assert.ok(inner.events.includes('close m:2'), 'the loaded session was closed');
  });

  void it('by default, without a file, runs one built-in request per instance, all at once', async () => {
    const { factory, state } = gatedFactory();
    const reports: WarmupReport[] = [];
    const warm = createWarmupSessionFactory({
      factory,
      readWarmupFile: () => Promise.resolve(undefined),
      concurrency: 3,
      onWarmup: (r) => reports.push(r),
      logger: silentLogger,
    });
    const gate = deferred();
    state.gate = gate.promise;
    const loading = warm.load({ modelName: 'm', version: 1, path: '/m/1', basePath: '/m' });
    // Every instance's run is in flight before any finished: one each, not one after another.
    while (state.runs.length < 3) await tick();
    gate.resolve();
    await (await loading).close();
    assert.equal(state.runs.length, 3);
    assert.deepEqual(
      reports.map((r) => [r.kind, r.runs, r.failedRuns]),
      [['built-in', 3, 0]],
    );
  });

  void it('without a file runs built-in zero requests on every instance', async () => {
    const { factory, state } = gatedFactory();
    const reports: WarmupReport[] = [];
    const warm = createWarmupSessionFactory({
      factory,
      readWarmupFile: () => Promise.resolve(undefined),
      concurrency: 2,
      builtInRounds: 2,
      onWarmup: (r) => reports.push(r),
      logger: silentLogger,
    });
    await warm.load({ modelName: 'm', version: 1, path: '/m/1', basePath: '/m' });
    assert.equal(state.runs.length, 4);
    assert.deepEqual(state.runs[0]!.inputs['x']!.shape, [1, 2]);
    assert.deepEqual([...(state.runs[0]!.inputs['x']!.data as Float32Array)], [0, 0]);
    assert.deepEqual(
      reports.map((r) => [r.kind, r.runs, r.failedRuns]),
      [['built-in', 4, 0]],
    );
    assert.equal(FAKE_SIGNATURE.inputs['x']!.shape![0], -1);
  });
});
