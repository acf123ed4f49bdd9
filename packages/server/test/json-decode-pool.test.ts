/**
 * JSON predict bodies read off the event loop (frontends/shared/json-decode-pool.ts): the
 * decode thread's tensors equal the fast reader's on the main thread, small bodies stay
 * here, the decode backlog sheds before a body is read, and a dead thread loses nothing.
 */
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import {
  Code,
  PackedNumbers,
  type NumericPredictBody,
  ServingError,
  parseTfsJsonText,
  parseTfsPredictBody,
  readFastJsonBody,
  readNumericPredictBody,
  tfsJsonToTensors,
} from '@visionserve/protocol';
import { createJsonDecodePool } from '../src/runtime/json-decode-pool.js';
import { createMemoryLogger } from './fakes.js';

/** A nested list of `dims` with numbers written as `write` gives them. */
function nested(dims: readonly number[], write: (i: number) => string): string {
  let i = 0;
  const level = (d: number): string =>
    d === dims.length ? write(i++) : `[${Array.from({ length: dims[d]! }, () => level(d + 1)).join(',')}]`;
  return level(0);
}

/** Floats as float32 -> float64 reprs (17 digits, the reader's inexact path), ints, exponents. */
const number = (i: number): string =>
  i % 3 === 0
    ? String(Math.fround(Math.sin(i) * 3))
    : i % 3 === 1
      ? String(i - 500)
      : `${(i % 97) / 7}e-${i % 5}`;

const bodies: Record<string, Uint8Array> = {
  instances: Buffer.from(
    `{"signature_name":"serving_default","instances":${nested([2, 3, 32, 32], number)}}`,
  ),
  named: Buffer.from(
    `{"inputs":{"a":${nested([1, 3, 64, 64], number)},"b":${nested([4, 5], (i) => String(i / 3))}}}`,
  ),
  columnar: Buffer.from(` {"inputs" : ${nested([3, 96, 96], number)} } `),
};

/** Every tensor's shape, exact values and float32 values, for comparing two reads. */
function describeBody(body: NumericPredictBody | undefined): unknown {
  if (body === undefined) return undefined;
  const tensor = (p: PackedNumbers) => {
    const f32 = new Float32Array(p.length);
    p.toFloat32(f32);
    return { shape: [...p.shape], exact: [...p.exactValues()], f32: [...f32] };
  };
  return Object.fromEntries(
    Object.entries(body).map(([k, v]) => [
      k,
      typeof v === 'string'
        ? v
        : v instanceof PackedNumbers
          ? tensor(v)
          : Object.fromEntries(Object.entries(v).map(([n, p]) => [n, tensor(p)])),
    ]),
  );
}

function toF32(p: PackedNumbers): Float32Array {
  const out = new Float32Array(p.length);
  p.toFloat32(out);
  return out;
}

const overloaded = (e: unknown): boolean =>
  e instanceof ServingError && e.code === Code.UNAVAILABLE && e.reason === 'overloaded';

describe('JSON decode pool', () => {
  it('reads big bodies on a decode thread into the same tensors as the reader here', async () => {
    const pool = createJsonDecodePool({ threads: 2, maxWaitMs: 0, logger: createMemoryLogger() });
    try {
      for (const [name, bytes] of Object.entries(bodies)) {
        assert.ok(bytes.byteLength >= 65_536, `${name} is big enough for a thread`);
        const here = readNumericPredictBody(bytes);
        assert.notEqual(here, undefined, name);
        const there = await pool.readNumericPredictBody(bytes);
        assert.deepEqual(describeBody(there), describeBody(readNumericPredictBody(bytes)), name);
      }
      // Concurrent reads land on both threads and each gets its own answer.
      const all = await Promise.all(
        Object.values(bodies)
          .flatMap((b) => [b, b])
          .map((b) => pool.readNumericPredictBody(b)),
      );
      const names = Object.keys(bodies);
      all.forEach((body, i) => {
        assert.deepEqual(describeBody(body), describeBody(readNumericPredictBody(bodies[names[i >> 1]!]!)));
      });
      assert.equal(pool.counts.offThread, names.length * 3);
      assert.equal(pool.counts.inline, 0);
    } finally {
      await pool.close();
    }
  });

  it('reads KServe v2 requests and SageMaker bare lists on a decode thread as the reader here does', async () => {
    const pool = createJsonDecodePool({ threads: 1, maxWaitMs: 0, logger: createMemoryLogger() });
    try {
      const kserve = Buffer.from(
        `{"id":"a","inputs":[{"name":"x","shape":[1,3,64,64],"datatype":"FP32","data":${nested([1, 3, 64, 64], number)}},` +
          `{"name":"y","shape":[2],"datatype":"BYTES","data":["p","q"]},` +
          `{"name":"z","shape":[4,5],"datatype":"INT32","data":${nested([20], (i) => String(i - 7))}}],` +
          `"outputs":[{"name":"o","parameters":{"binary_data":true,"classification":3}}]}`,
      );
      const sagemaker = Buffer.from(nested([2, 3, 48, 48], number));
      for (const [format, bytes] of [
        ['kserve-infer', kserve],
        ['sagemaker-json', sagemaker],
      ] as const) {
        assert.ok(bytes.byteLength >= 65_536);
        const here = readFastJsonBody(format, bytes);
        assert.notEqual(here, undefined, format);
        const there = await pool.read(format, bytes);
        // Same tree; packed tensors with the same shape and values.
        const plain = (value: unknown): unknown =>
          JSON.parse(
            JSON.stringify(value, (_k, v: unknown) =>
              v instanceof PackedNumbers
                ? { shape: v.shape, exact: [...v.exactValues()], f32: [...toF32(v)] }
                : v,
            ),
          );
        assert.deepEqual(plain(there), plain(here), format);
      }
      assert.equal(pool.counts.offThread, 2);
      // A body the reader does not take: undefined, as for TF Serving bodies.
      const escaped = Buffer.from(kserve.toString().replace('"a"', '"\\u0061"'));
      assert.equal(await pool.read('kserve-infer', escaped), undefined);
    } finally {
      await pool.close();
    }
  });

  it('answers undefined for bodies the reader does not take, and reads small ones here', async () => {
    const pool = createJsonDecodePool({ threads: 1, maxWaitMs: 0, logger: createMemoryLogger() });
    try {
      const strings = Buffer.from(`{"instances":[${Array.from({ length: 20_000 }, () => '"a"').join(',')}]}`);
      const ragged = Buffer.from(`{"instances":[[${'1,'.repeat(40_000)}2],[3]]}`);
      const truncated = bodies.instances!.subarray(0, bodies.instances!.byteLength - 3);
      for (const bytes of [strings, ragged, truncated]) {
        assert.equal(await pool.readNumericPredictBody(bytes), undefined);
      }
      assert.equal(pool.counts.offThread, 3);
      const small = Buffer.from(`{"instances":${nested([4, 64], number)}}`);
      assert.ok(small.byteLength < 65_536);
      assert.deepEqual(
        describeBody(await pool.readNumericPredictBody(small)),
        describeBody(readNumericPredictBody(small)),
      );
      assert.equal(pool.counts.inline, 1);
    } finally {
      await pool.close();
    }
  });

  it('readTfsPredictBody: bodies the reader refuses are parsed on the thread, with the general path’s tensors and errors', async () => {
    const pool = createJsonDecodePool({ threads: 1, maxWaitMs: 0, logger: createMemoryLogger() });
    const big = nested([3, 64, 64], number);
    const b64 = Array.from(
      { length: 5000 },
      (_, i) => `{"b64":"${Buffer.from(`img${i}`).toString('base64')}"}`,
    );
    const cases: [string, string, Record<string, { dtype: 'float32' | 'int32' | 'string' }>][] = [
      [
        'NaN tokens',
        `{"instances":${nested([3, 64, 64], (i) => (i % 7 === 0 ? 'NaN' : i % 11 === 0 ? '-Infinity' : number(i)))}}`,
        { x: { dtype: 'float32' } },
      ],
      [
        'row objects',
        `{"instances":[{"a":${big},"s":"x"},{"a":${big},"s":"y"}]}`,
        { a: { dtype: 'float32' }, s: { dtype: 'string' } },
      ],
      ['b64 rows', `{"signature_name":"sig","instances":[${b64.join(',')}]}`, { x: { dtype: 'string' } }],
      ['b64 columnar', `{"inputs":{"b64":"${'QUJD'.repeat(30_000)}"}}`, { x: { dtype: 'string' } }],
      ['escaped key', `{"in\\u0073tances":${big}}`, { x: { dtype: 'float32' } }],
      [
        'named + extra key',
        `{"inputs":{"a":${big},"b":[[1,2],[3]]},"extra":1}`,
        { a: { dtype: 'float32' }, b: { dtype: 'int32' } },
      ],
      [
        'named ragged',
        `{"inputs":{"a":${big},"b":[[1,2],[3]]}}`,
        { a: { dtype: 'float32' }, b: { dtype: 'int32' } },
      ],
      ['__proto__ input', `{"inputs":{"__proto__":${big},"a":${big}}}`, { a: { dtype: 'float32' } }],
      [
        'duplicate keys',
        `{"instances":${big},"instances":${nested([2, 64, 64], number)}}`,
        { x: { dtype: 'float32' } },
      ],
      ['ints for float', `{"inputs":${big}, "signature_name": 5}`, { x: { dtype: 'float32' } }],
      [
        'wrong dtype',
        `{"inputs":${nested([4, 64, 64], (i) => (i === 1000 ? 'true' : String(i)))}}`,
        { x: { dtype: 'int32' } },
      ],
    ];
    /** Tensors (dtype, shape, bytes) or the error, as the codec gives them for a parsed body. */
    const outcome = (
      body: unknown,
      specs: Record<string, { dtype: 'float32' | 'int32' | 'string' }>,
    ): unknown => {
      try {
        const parsed = parseTfsPredictBody(body);
        const tensors = tfsJsonToTensors(parsed.format, parsed.value, specs);
        return {
          signature: parsed.signatureName,
          tensors: Object.entries(tensors).map(([k, t]) => [
            k,
            t.dtype,
            t.shape,
            Array.isArray(t.data)
              ? t.data.map((b) => Buffer.from(b as Uint8Array).toString('hex'))
              : Buffer.from((t.data as Float32Array).buffer).toString('hex'),
          ]),
        };
      } catch (error) {
        return `${String((error as ServingError).code)}: ${(error as Error).message}`;
      }
    };
    try {
      for (const [name, text, specs] of cases) {
        const bytes = Buffer.from(text);
        assert.ok(bytes.byteLength >= 65_536, name);
        assert.equal(readNumericPredictBody(bytes), undefined, `${name} is one the reader refuses`);
        const there = await pool.readTfsPredictBody(bytes);
        assert.deepEqual(outcome(there, specs), outcome(parseTfsJsonText(text), specs), name);
      }
      assert.equal(pool.counts.offThread, cases.length);
      // Text that is not JSON: the general path's error, from the thread.
      for (const text of [`{"instances":${big}`, `{"instances":${big}}}`, `${big.slice(0, -1)}x]`]) {
        const expected = (() => {
          try {
            parseTfsJsonText(text);
          } catch (error) {
            return error as ServingError;
          }
          return undefined;
        })();
        assert.ok(expected !== undefined);
        await assert.rejects(pool.readTfsPredictBody(Buffer.from(text)), (e: unknown) => {
          assert.ok(e instanceof ServingError);
          assert.equal(e.code, Code.INVALID_ARGUMENT);
          assert.equal(e.message, expected.message);
          return true;
        });
      }
      assert.equal(pool.counts.offThread, cases.length + 3);
      assert.equal(pool.counts.inline, 0);
      // Bodies the reader takes, and small ones (read here), as parseTfsPredictJson gives them.
      const small = Buffer.from(`{"instances":[1, NaN]}`);
      assert.deepEqual(
        outcome(await pool.readTfsPredictBody(small), { x: { dtype: 'float32' } }),
        outcome(parseTfsJsonText(small.toString()), { x: { dtype: 'float32' } }),
      );
      assert.equal(pool.counts.inline, 1);
      const fast = await pool.readTfsPredictBody(bodies.instances!);
      assert.deepEqual(
        describeBody(fast as NumericPredictBody),
        describeBody(readNumericPredictBody(bodies.instances!)),
      );
    } finally {
      await pool.close();
    }
  });

  it('sheds a body that would wait longer than maxWaitMs behind the admitted ones, until they are decoded', async () => {
    const pool = createJsonDecodePool({ threads: 1, maxWaitMs: 50, logger: createMemoryLogger() });
    try {
      // Nothing admitted: even a body far over the limit is taken (nothing waits ahead of it).
      const first = pool.admit(100 * 1024 * 1024);
      assert.ok(pool.backlogMs() > 50);
      assert.throws(() => pool.admit(1000), overloaded);
      assert.throws(() => pool.admit(Number.NaN), overloaded);
      // Its decode releases its share (the request's own end releases it again, harmlessly).
      await pool.readNumericPredictBody(bodies.instances!, first);
      first.release();
      assert.equal(pool.backlogMs(), 0);
      const a = pool.admit(1000);
      const b = pool.admit(1000);
      a.release();
      b.release();
      assert.equal(pool.backlogMs(), 0);
    } finally {
      await pool.close();
    }
    // maxWaitMs 0: no decode admission.
    const open = createJsonDecodePool({ threads: 1, maxWaitMs: 0, logger: createMemoryLogger() });
    open.admit(1e12);
    open.admit(1e12);
    await open.close();
  });

  it('refuses a body past the limits with INVALID_ARGUMENT, on a thread and here, and copies small tensors back instead of moving them', async () => {
    const limits = { maxDepth: 100, maxObjectKeys: 1000, maxValues: 1_000_000 };
    const pool = createJsonDecodePool({ threads: 1, maxWaitMs: 0, logger: createMemoryLogger(), limits });
    try {
      const keys = (n: number) =>
        Buffer.from(`{"inputs":{${Array.from({ length: n }, (_, i) => `"k${i}":[${i}]`).join(',')}}}`);
      const tooMany = (e: unknown) =>
        e instanceof ServingError &&
        e.code === Code.INVALID_ARGUMENT &&
        /more than 1000 keys/.test(e.message);
      // 100,000 keys: 1.5 MB on a thread; 3,000 keys: 43 KB here.
      await assert.rejects(pool.readTfsPredictBody(keys(100_000)), tooMany);
      await assert.rejects(pool.read('kserve-infer', keys(100_000)), tooMany);
      await assert.rejects(pool.readTfsPredictBody(keys(3000)), tooMany);
      assert.deepEqual(pool.counts, { offThread: 2, inline: 1 });
      // 1,000 one-number tensors (under 64 KiB each: copied with the message) arrive whole.
      const body = (await pool.readNumericPredictBody(
        Buffer.concat([keys(1000), Buffer.alloc(70_000, 32)]),
      ))!;
      const named = body['inputs'] as Record<string, PackedNumbers>;
      assert.equal(Object.keys(named).length, 1000);
      assert.deepEqual([...named['k999']!.exactValues()], [999]);
      const deep = Buffer.from(`{"instances":${'['.repeat(70_000)}${']'.repeat(70_000)}}`);
      await assert.rejects(pool.readTfsPredictBody(deep), (e: unknown) => {
        return e instanceof ServingError && /nested deeper than 100 levels/.test(e.message);
      });
    } finally {
      await pool.close();
    }
  });

  it('drops a body still waiting for a thread when its request aborts, at once', async () => {
    const pool = createJsonDecodePool({ threads: 1, maxWaitMs: 0, logger: createMemoryLogger() });
    try {
      // A body that keeps the one thread busy (the general path over 300,000 keys).
      const slow = Buffer.from(
        `{"inputs":{${Array.from({ length: 300_000 }, (_, i) => `"k${i}":"v"`).join(',')}}}`,
      );
      const busy = pool.readTfsPredictBody(slow);
      const controller = new AbortController();
      const ticket = pool.admit(0, { signal: controller.signal });
      const waiting = pool.readNumericPredictBody(bodies.instances!, ticket);
      const started = performance.now();
      const deadline = new ServingError(Code.DEADLINE_EXCEEDED, 'deadline');
      setTimeout(() => {
        controller.abort(deadline);
      }, 20);
      await assert.rejects(waiting, (e: unknown) => e === deadline);
      const aborted = performance.now() - started;
      await busy;
      const read = performance.now() - started;
      assert.ok(aborted < read, `aborted after ${aborted} ms, the body ahead read after ${read} ms`);
      // Only the first body reached the thread.
      assert.equal(pool.counts.offThread, 1);
      // An aborted signal before the read: refused at once too.
      await assert.rejects(
        pool.readNumericPredictBody(bodies.instances!, ticket),
        (e: unknown) => e === deadline,
      );
    } finally {
      await pool.close();
    }
  });

  describe('a decode thread that dies', () => {
    const dir = mkdtempSync(join(tmpdir(), 'vs-decode-'));
    after(() => {
      rmSync(dir, { recursive: true, force: true });
    });
    const dying = join(dir, 'dying-worker.mjs');
    writeFileSync(
      dying,
      "import { parentPort } from 'node:worker_threads';\nparentPort.on('message', () => process.exit(3));\n",
    );

    it('reads its bodies here instead, logs it, and starts a new thread for the next body', async () => {
      const logger = createMemoryLogger();
      const pool = createJsonDecodePool({
        threads: 1,
        maxWaitMs: 0,
        logger,
        workerUrl: pathToFileURL(dying),
      });
      try {
        for (let round = 0; round < 2; round++) {
          const results = await Promise.all([
            pool.readNumericPredictBody(bodies.instances!),
            pool.readNumericPredictBody(bodies.named!),
          ]);
          assert.deepEqual(describeBody(results[0]), describeBody(readNumericPredictBody(bodies.instances!)));
          assert.deepEqual(describeBody(results[1]), describeBody(readNumericPredictBody(bodies.named!)));
        }
        assert.equal(pool.counts.inline, 4);
        // The general path too, and its errors.
        const nan = `{"instances":${nested([3, 64, 64], (i) => (i % 7 === 0 ? 'NaN' : String(i)))}}`;
        const body = (await pool.readTfsPredictBody(Buffer.from(nan))) as { instances: unknown };
        assert.deepEqual(body, parseTfsJsonText(nan));
        await assert.rejects(pool.readTfsPredictBody(Buffer.from(nan.slice(1))), (e: unknown) => {
          return e instanceof ServingError && e.code === Code.INVALID_ARGUMENT;
        });
        assert.ok(logger.records.some((r) => r.level === 'error' && /decode thread stopped/.test(r.message)));
      } finally {
        await pool.close();
      }
    });
  });

  it('prestart starts one thread before the first body (none with threads 0, none after close)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'vs-decode-'));
    try {
      const starts = join(dir, 'starts');
      const marker = join(dir, 'marker-worker.mjs');
      writeFileSync(
        marker,
        `import { appendFileSync } from 'node:fs';\nappendFileSync(${JSON.stringify(starts)}, 'x');\n`,
      );
      const started = (): number => (existsSync(starts) ? readFileSync(starts, 'utf8').length : 0);
      const options = { maxWaitMs: 0, logger: createMemoryLogger(), workerUrl: pathToFileURL(marker) };
      const none = createJsonDecodePool({ ...options, threads: 0 });
      none.prestart();
      const closed = createJsonDecodePool({ ...options, threads: 2 });
      await closed.close();
      closed.prestart();
      const pool = createJsonDecodePool({ ...options, threads: 2 });
      pool.prestart();
      pool.prestart();
      for (let i = 0; i < 200 && started() === 0; i++) await new Promise((r) => setTimeout(r, 50));
      await new Promise((r) => setTimeout(r, 300));
      assert.equal(started(), 1);
      await Promise.all([pool.close(), none.close()]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('after close, reads here', async () => {
    const pool = createJsonDecodePool({ threads: 1, maxWaitMs: 0, logger: createMemoryLogger() });
    await pool.close();
    assert.notEqual(await pool.readNumericPredictBody(bodies.columnar!), undefined);
    assert.equal(pool.counts.inline, 1);
  });
});
