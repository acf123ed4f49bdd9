/**
 * The connection guard (frontends/shared/connection-guard.ts) on real TCP sockets: at the cap
 * the connection idle the longest goes (never one with work in flight), a new connection is
 * refused only when all are busy, the per-address cap refuses beyond it, and the first-bytes
 * deadline closes a connection that has not started. The listeners' use of it is tested on
 * the real server in packages/cli/test/connection-guard.integration.test.ts.
 */
import { after, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { type Server, type Socket, connect, createServer } from 'node:net';
import {
  type ConnectionGuard,
  type ConnectionGuardLimits,
  type GuardedConnection,
  createConnectionGuard,
} from '../src/frontends/shared/connection-guard.js';

interface Bench {
  readonly guard: ConnectionGuard;
  /** Opens a client connection; resolves with it and the server side's guarded connection (undefined: refused). */
  open(localAddress?: string): Promise<{ client: Socket; guarded: GuardedConnection | undefined }>;
  close(): void;
}

async function bench(limits: ConnectionGuardLimits): Promise<Bench> {
  const guard = createConnectionGuard(limits);
  const waiting: ((guarded: GuardedConnection | undefined) => void)[] = [];
  const server: Server = createServer((socket) => {
    socket.on('error', () => undefined);
    waiting.shift()?.(guard.admit(socket));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const clients: Socket[] = [];
  return {
    guard,
    open: (localAddress) =>
      new Promise((resolve) => {
        const client = connect({ host: '127.0.0.1', port, ...(localAddress ? { localAddress } : {}) });
        client.on('error', () => undefined);
        clients.push(client);
        waiting.push((guarded) => {
          resolve({ client, guarded });
        });
      }),
    close() {
      for (const client of clients) client.destroy();
      guard.destroyAll();
      server.close();
    },
  };
}

function closed(socket: Socket): Promise<void> {
  return new Promise((resolve) => {
    if (socket.closed) resolve();
    else
      socket.once('close', () => {
        resolve();
      });
  });
}

const tick = (ms = 5): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

describe('connection guard', () => {
  const benches: Bench[] = [];
  after(() => {
    for (const b of benches) b.close();
  });

  it('at the cap closes the connection idle the longest, never a busy one; refuses when all are busy', async () => {
    const b = await bench({ maxConnections: 3 });
    benches.push(b);
    const first = await b.open();
    await tick();
    const second = await b.open();
    await tick();
    const third = await b.open();
    // The oldest turns busy, then the second busy and idle again: now the youngest idle.
    first.guarded!.inFlight(1);
    second.guarded!.inFlight(2);
    second.guarded!.inFlight(0);
    const fourth = await b.open();
    assert.ok(fourth.guarded !== undefined, 'admitted in place of an idle one');
    await closed(third.client);
    assert.equal(b.guard.size, 3);
    assert.equal(first.client.closed, false, 'a busy connection stays');
    assert.equal(second.client.closed, false, 'the one idle for less time stays');
    // Every connection busy: the next is refused.
    second.guarded!.inFlight(1);
    fourth.guarded.inFlight(1);
    const refused = await b.open();
    assert.equal(refused.guarded, undefined);
    await closed(refused.client);
    assert.deepEqual(Object.fromEntries(b.guard.counts), { evicted_idle: 1, refused_at_cap: 1 });
  });

  it('an evicted connection closes the way its listener says, and stops counting at once', async () => {
    const b = await bench({ maxConnections: 1 });
    benches.push(b);
    const first = await b.open();
    let evicted = 0;
    first.guarded!.onEvict(() => {
      evicted++;
    });
    const second = await b.open();
    assert.ok(second.guarded !== undefined);
    assert.equal(evicted, 1);
    assert.equal(first.client.closed, false, 'the listener closes it (gracefully), not the guard');
    assert.equal(b.guard.size, 1);
  });

  it('refuses connections beyond the per-address cap, and counts another address apart', async () => {
    const b = await bench({ maxConnections: 100, maxConnectionsPerAddress: 2 });
    benches.push(b);
    const held = [await b.open(), await b.open()];
    const refused = await b.open();
    assert.equal(refused.guarded, undefined);
    await closed(refused.client);
    const other = await b.open('127.0.0.2');
    assert.ok(other.guarded !== undefined, 'another address has its own count');
    held[0]!.client.destroy();
    await closed(held[0]!.client);
    await tick(50);
    const again = await b.open();
    assert.ok(again.guarded !== undefined, 'a closed connection frees its place');
    assert.equal(b.guard.counts.get('refused_per_address'), 1);
  });

  it('closes a connection that has not started by the first-bytes deadline; started() stops it', async () => {
    const b = await bench({ maxConnections: 100, firstBytesTimeoutMs: 150 });
    benches.push(b);
    const lazy = await b.open();
    const prompt = await b.open();
    prompt.guarded!.started();
    const t0 = Date.now();
    await closed(lazy.client);
    assert.ok(Date.now() - t0 >= 100, 'not before the deadline');
    await tick(300);
    assert.equal(prompt.client.closed, false);
    assert.equal(b.guard.counts.get('first_bytes_timeout'), 1);
  });
});
