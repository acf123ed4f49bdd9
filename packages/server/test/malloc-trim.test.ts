import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { collectFully } from '../src/util/idle-collection.js';
import { mallocTrim } from '../src/util/malloc-trim.js';

const glibc = (process.report.getReport() as { header?: { glibcVersionRuntime?: string } }).header
  ?.glibcVersionRuntime;
const rssMiB = (): number =>
  Number(/VmRSS:\s+(\d+)/.exec(readFileSync('/proc/self/status', 'utf8'))![1]) / 1024;

/** Collects, so that freed buffers go back to malloc (V8's sweeper frees them a little later). */
async function settle(): Promise<void> {
  for (let i = 0; i < 3; i++) {
    collectFully();
    await new Promise((r) => setTimeout(r, 50));
  }
}

void describe('malloc trim (util/malloc-trim.ts)', () => {
  void it(
    'gives back memory freed below live allocations, which glibc keeps on its own',
    { skip: glibc === undefined ? 'not glibc' : false },
    async () => {
      const trim = mallocTrim();
      assert.ok(trim !== undefined, 'glibc and koffi (an optional dependency installed by npm ci) are here');
      // 1 MiB pieces from the malloc heap (not mapped afresh: under the malloc settings' mmap
      // threshold, or glibc's own once it has grown), every other one kept alive: the freed ones
      // are holes below live memory that no heap-top trim reaches.
      // glibc's own threshold grows past a size once a mapped buffer that big is freed.
      new Uint8Array(new ArrayBuffer(4 * 1024 * 1024)).fill(1);
      await settle();
      const pieces: (ArrayBuffer | undefined)[] = [];
      for (let i = 0; i < 256; i++) {
        const b = new ArrayBuffer(1024 * 1024);
        new Uint8Array(b).fill(1);
        pieces.push(b);
      }
      for (let i = 0; i < pieces.length; i += 2) pieces[i] = undefined;
      await settle();
      const before = rssMiB();
      trim();
      const after = rssMiB();
      assert.equal(pieces.filter(Boolean).length, 128);
      assert.ok(before - after >= 64, `RSS ${before.toFixed(0)} -> ${after.toFixed(0)} MiB after the trim`);
    },
  );
});
