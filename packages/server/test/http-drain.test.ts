/**
 * Draining an HTTP listener (start-http-server + the HTTP edge) over real sockets: requests
 * in flight finish with `Connection: close`, a keep-alive client that sends right after the
 * drain began is still answered, idle connections close after DRAIN_IDLE_MS, new
 * connections are refused, and the grace period bounds it all.
 */
import assert from 'node:assert/strict';
import http from 'node:http';
import { connect } from 'node:net';
import { after, describe, it } from 'node:test';
import { DRAIN_IDLE_MS } from '../src/frontends/http/connection-tracker.js';
import type { HttpApi } from '../src/frontends/http/http-api.js';
import { createHttpEdge } from '../src/frontends/http/http-edge.js';
import { sendJson } from '../src/frontends/http/send.js';
import { type StartedHttpServer, startHttpServer } from '../src/frontends/http/start-http-server.js';
import { createMemoryLogger, sleep } from './fakes.js';
import { DEFAULTS } from '../src/config/server-config.js';
import { httpServerSettings } from '../src/compose/config-settings.js';

/** `/slow?ms=N` answers after N ms; `/fast` at once. */
const api: HttpApi = {
  name: 'test',
  routes: [
    {
      methods: ['GET'],
      path: '/fast',
      handle: ({ res }) => {
        sendJson(res, 200, '{"ok":true}');
      },
    },
    {
      methods: ['GET'],
      path: '/slow',
      handle: async ({ req, res }) => {
        const ms = Number(new URL(req.url!, 'http://x').searchParams.get('ms'));
        await sleep(ms);
        sendJson(res, 200, '{"ok":true}');
      },
    },
  ],
  requestTimeoutMs: 0,
  bodyLimitBytes: 1024,
};

async function start(): Promise<StartedHttpServer> {
  return startHttpServer({
    ...httpServerSettings(DEFAULTS),
    host: '127.0.0.1',
    port: 0,
    edge: createHttpEdge({ apis: [api], logger: createMemoryLogger(), notFoundMessage: () => 'Not Found' }),
  });
}

interface Answer {
  status: number;
  connection: string | undefined;
}

function get(agent: http.Agent, port: number, path: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path, agent }, (res) => {
        res.resume();
        res.on('end', () => {
          resolve({ status: res.statusCode!, connection: res.headers.connection });
        });
      })
      .on('error', reject);
  });
}

describe('HTTP listener drain', () => {
  const agents: http.Agent[] = [];
  const agent = (): http.Agent => {
    const a = new http.Agent({ keepAlive: true, maxSockets: 1 });
    agents.push(a);
    return a;
  };
  after(() => {
    for (const a of agents) a.destroy();
  });

  it('answers in-flight requests with Connection: close and refuses new connections', async () => {
    const server = await start();
    const a = agent();
    assert.equal((await get(a, server.port, '/fast')).connection, 'keep-alive');
    const inFlight = get(a, server.port, '/slow?ms=300');
    await sleep(50);
    const closed = server.close(5000);
    const answer = await inFlight;
    assert.deepEqual(answer, { status: 200, connection: 'close' });
    await closed;
    await assert.rejects(get(new http.Agent(), server.port, '/fast'), /ECONNREFUSED/);
  });

  it('still answers a keep-alive client that sends just after the drain began', async () => {
    const server = await start();
    const a = agent();
    await get(a, server.port, '/fast'); // the socket is now idle, kept alive
    const closed = server.close(5000);
    await sleep(DRAIN_IDLE_MS / 4);
    // Sent on the idle keep-alive socket: answered, and told to close.
    assert.deepEqual(await get(a, server.port, '/fast'), { status: 200, connection: 'close' });
    await closed;
  });

  it('closes idle connections once idle for DRAIN_IDLE_MS; close resolves right after', async () => {
    const server = await start();
    const socket = connect(server.port, '127.0.0.1');
    await new Promise((resolve) => socket.once('connect', resolve));
    const ended = new Promise<number>((resolve) => {
      socket.once('close', () => {
        resolve(Date.now());
      });
    });
    const started = Date.now();
    await server.close(5000);
    const at = await ended;
    assert.ok(at - started <= DRAIN_IDLE_MS + 1000, `closed after ${at - started} ms`);
    // An idle connection opened long before the drain closes at once.
    const again = await start();
    const old = connect(again.port, '127.0.0.1');
    await new Promise((resolve) => old.once('connect', resolve));
    await sleep(DRAIN_IDLE_MS + 50);
    const t0 = Date.now();
    await again.close(5000);
    assert.ok(Date.now() - t0 < DRAIN_IDLE_MS, `took ${Date.now() - t0} ms`);
    old.destroy();
  });

  it('destroys what is left when the grace period ends', async () => {
    const server = await start();
    const slow = get(agent(), server.port, '/slow?ms=3000');
    await sleep(50);
    const t0 = Date.now();
    await server.close(200);
    assert.ok(Date.now() - t0 < 2000);
    await assert.rejects(slow, /socket hang up|ECONNRESET/);
  });
});
