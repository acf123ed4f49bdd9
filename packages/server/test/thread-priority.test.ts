/**
 * Worker threads run below the event loop's CPU priority (runtime/thread-priority.ts): on
 * Linux a nice value is per thread, so the inference and JSON decode threads get it and the
 * main thread keeps its own. Read back from /proc/self/task/<tid>/stat.
 */
import assert from 'node:assert/strict';
import { readFileSync, readdirSync } from 'node:fs';
import { describe, it } from 'node:test';
import type { ModelSource } from '../src/core/session.js';
import { createJsonDecodePool } from '../src/runtime/json-decode-pool.js';
import { createOnnxSessionFactory } from '../src/runtime/onnx-session-factory.js';
import { lowerThreadPriority } from '../src/runtime/thread-priority.js';
import { silentLogger } from '../src/util/logger.js';
import { sharedModel, stageModel } from './shared-models.js';

const linux = process.platform === 'linux';

/** Nice value of every thread of this process, by thread id (field 19 of /proc/<pid>/task/<tid>/stat). */
function threadNices(): Map<number, number> {
  const out = new Map<number, number>();
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      // The command name (field 2) may hold spaces: count fields after its closing parenthesis.
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      out.set(Number(tid), Number(fields[16]));
    } catch {
      // the thread ended meanwhile
    }
  }
  return out;
}

const niceThreads = (nice: number): number => [...threadNices().values()].filter((n) => n === nice).length;

describe('worker thread priority', { skip: !linux && 'nice values are per thread on Linux only' }, () => {
  it('does nothing for 0 or less', () => {
    assert.equal(lowerThreadPriority(0), false);
    assert.equal(lowerThreadPriority(-5), false);
  });

  it('lowers inference and decode threads, never the event loop', async () => {
    const mainNice = threadNices().get(process.pid);
    assert.notEqual(mainNice, undefined);
    const before = niceThreads(13);
    const base = await stageModel('mnist', 1, sharedModel('mnist-8.onnx'));
    const source: ModelSource = { modelName: 'mnist', version: 1, path: `${base}/1`, basePath: base };
    const session = await createOnnxSessionFactory({
      logger: silentLogger,
      instances: 2,
      threadNice: 13,
    }).load(source);
    const decode = createJsonDecodePool({ threads: 1, maxWaitMs: 0, threadNice: 13, logger: silentLogger });
    try {
      const body = Buffer.from(
        `{"instances":[${Array.from({ length: 40_000 }, (_, i) => i % 10).join(',')}]}`,
      );
      assert.notEqual(await decode.readNumericPredictBody(body), undefined);
      assert.equal(decode.counts.offThread, 1);
      // Two inference workers and one decode thread (plus any threads they started).
      assert.ok(niceThreads(13) - before >= 3, `threads at nice 13: ${niceThreads(13) - before}`);
      assert.equal(threadNices().get(process.pid), mainNice, 'the event loop thread keeps its priority');
    } finally {
      await session.close();
      await decode.close();
    }
  });
});
