/**
 * Fuzz target: hostile connection patterns against every kind of listener (HTTP/1.1 plain and
 * TLS, gRPC on the lean transport plain and TLS, gRPC on node:http2), each with a small
 * connection cap and a short first-bytes deadline (connection-guard.ts): groups of sockets
 * that stay silent, send a cut prefix of their first bytes (request head, HTTP/2 preface and
 * SETTINGS, TLS ClientHello), trickle them a byte at a time, send garbage, or complete them
 * and then idle. Properties: a good client is served on the listener while they are open,
 * every socket that never completed its first bytes is closed within the deadline plus slack,
 * a connection that completed them is closed only to make room at the cap, nothing is logged
 * as an error, and the listener's connection count returns to 0 once the clients are gone.
 */
import { after, before, describe, it } from 'node:test';
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import http2 from 'node:http2';
import { type Socket, connect, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import fc from 'fast-check';
import { type RunningGrpcServer, startGrpcServer } from '../../src/frontends/grpc/index.js';
import { createHttpEdge } from '../../src/frontends/http/http-edge.js';
import { sendJson } from '../../src/frontends/http/send.js';
import { type StartedHttpServer, startHttpServer } from '../../src/frontends/http/start-http-server.js';
import { createJsonLogger } from '../../src/util/logger.js';
import { fuzzAsync, targetOptions } from '@visionserve/testkit/campaign';
import { DEFAULTS } from '../../src/config/server-config.js';
import { grpcServerSettings, httpServerSettings } from '../../src/compose/config-settings.js';

const CAP = 16;
const DEADLINE_MS = 300;
/** How long past the deadline an unfinished socket may stay open on a loaded 2-core box. */
const SLACK_MS = 4_000;
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
const SETTINGS = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);
const HEAD = Buffer.from('GET /ok HTTP/1.1\r\nHost: fuzz\r\nUser-Agent: slow\r\n\r\n', 'latin1');

type ListenerName = 'http' | 'https' | 'grpc' | 'grpcs' | 'grpc-node';
const LISTENERS: readonly ListenerName[] = ['http', 'https', 'grpc', 'grpcs', 'grpc-node'];
const isTls = (name: ListenerName): boolean => name === 'https' || name === 'grpcs';

type Pattern =
  | { kind: 'silent' }
  | { kind: 'cut'; at: number }
  | { kind: 'trickle'; everyMs: number }
  | { kind: 'garbage'; bytes: Uint8Array }
  | { kind: 'complete' };

const patternArb: fc.Arbitrary<Pattern> = fc.oneof(
  fc.constant<Pattern>({ kind: 'silent' }),
  fc.nat().map<Pattern>((at) => ({ kind: 'cut', at })),
  fc.integer({ min: 30, max: 150 }).map<Pattern>((everyMs) => ({ kind: 'trickle', everyMs })),
  fc.uint8Array({ minLength: 1, maxLength: 64 }).map<Pattern>((bytes) => ({ kind: 'garbage', bytes })),
  fc.constant<Pattern>({ kind: 'complete' }),
);
const inputArb = fc.record({
  listener: fc.constantFrom(...LISTENERS),
  groups: fc.array(fc.record({ pattern: patternArb, count: fc.integer({ min: 1, max: 12 }) }), {
    minLength: 1,
    maxLength: 4,
  }),
});

/** One hostile client socket. */
interface Hostile {
  readonly socket: Socket;
  readonly openedAt: number;
  closedAt: number;
  /** It completed its first bytes (the server may keep it). */
  readonly started: boolean;
}

describe('fuzz: hostile connection patterns on every listener', () => {
  let dir: string;
  let cert: Buffer;
  /** A ClientHello as node's TLS client sends it (for cut and trickled handshakes). */
  let clientHello: Buffer;
  const ports = new Map<ListenerName, number>();
  const counts = new Map<ListenerName, () => number>();
  const servers: { close(graceMs: number): Promise<void> }[] = [];
  const logs: string[] = [];

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'vs-fuzz-conn-'));
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost'].concat([
        '-addext',
        'subjectAltName=DNS:localhost',
        '-keyout',
        'key.pem',
        '-out',
        'cert.pem',
      ]),
      { cwd: dir, stdio: 'ignore' },
    );
    const key = await readFile(join(dir, 'key.pem'));
    cert = await readFile(join(dir, 'cert.pem'));
    clientHello = await captureClientHello();
    const logger = createJsonLogger({ level: 'warn', write: (line) => logs.push(line) });
    const guard = { maxConnections: CAP, firstBytesTimeoutMs: DEADLINE_MS };
    const listenerTls = { context: { key, cert }, clientVerify: false };
    for (const name of ['http', 'https'] as const) {
      const server: StartedHttpServer = await startHttpServer({
        ...httpServerSettings(DEFAULTS),
        host: '127.0.0.1',
        port: 0,
        ...guard,
        tls: name === 'https' ? listenerTls : undefined,
        edge: createHttpEdge({
          apis: [
            {
              name: 'fuzz',
              routes: [
                {
                  methods: ['GET'],
                  path: '/ok',
                  handle: ({ res }) => {
                    sendJson(res, 200, '{}');
                  },
                },
              ],
              requestTimeoutMs: 0,
              bodyLimitBytes: 1024,
            },
          ],
          logger,
          notFoundMessage: () => 'Not Found',
        }),
      });
      servers.push(server);
      ports.set(name, server.port);
      counts.set(name, () => server.connections);
    }
    for (const name of ['grpc', 'grpcs', 'grpc-node'] as const) {
      const server: RunningGrpcServer = await startGrpcServer({
        ...grpcServerSettings(DEFAULTS),
        host: '127.0.0.1',
        port: 0,
        logger,
        ...guard,
        transport: name === 'grpc-node' ? 'node' : 'lean',
        tls: name === 'grpcs' ? listenerTls : undefined,
        services: [
          { name: 'fuzz.Echo', methods: { Echo: { handler: (m) => Promise.resolve([m.slice()]) } } },
        ],
      });
      servers.push(server);
      ports.set(name, server.port);
      counts.set(name, () => server.connections);
    }
  });

  after(async () => {
    await Promise.all(servers.map((s) => s.close(500)));
    await rm(dir, { recursive: true, force: true });
  });

  /** The bytes a client must send before the server counts the connection as started. */
  const firstBytes = (name: ListenerName): Buffer =>
    isTls(name) ? clientHello : name === 'http' ? HEAD : Buffer.concat([PREFACE, SETTINGS]);

  /** Opens one hostile socket with `pattern` on `name`. */
  async function open(name: ListenerName, pattern: Pattern): Promise<Hostile> {
    const port = ports.get(name)!;
    if (pattern.kind === 'complete') return openComplete(name, port);
    const socket = connect({ host: '127.0.0.1', port });
    socket.on('error', () => undefined);
    socket.resume();
    await new Promise((resolve) => socket.once('connect', resolve));
    const hostile: Hostile = { socket, openedAt: Date.now(), closedAt: 0, started: false };
    socket.once('close', () => (hostile.closedAt = Date.now()));
    const bytes = firstBytes(name);
    if (pattern.kind === 'cut') socket.write(bytes.subarray(0, pattern.at % bytes.byteLength));
    if (pattern.kind === 'garbage') socket.write(pattern.bytes);
    if (pattern.kind === 'trickle') void trickle(socket, bytes, pattern.everyMs);
    return hostile;
  }

  /** A connection that completes its first bytes (a handshake and request head or preface), then idles. */
  async function openComplete(name: ListenerName, port: number): Promise<Hostile> {
    const socket: Socket = isTls(name)
      ? tls.connect({
          host: '127.0.0.1',
          port,
          ca: cert,
          servername: 'localhost',
          ALPNProtocols: [name === 'grpcs' ? 'h2' : 'http/1.1'],
        })
      : connect({ host: '127.0.0.1', port });
    socket.on('error', () => undefined);
    socket.resume();
    await new Promise((resolve) => socket.once(isTls(name) ? 'secureConnect' : 'connect', resolve));
    const hostile: Hostile = { socket, openedAt: Date.now(), closedAt: 0, started: true };
    socket.once('close', () => (hostile.closedAt = Date.now()));
    socket.write(name === 'http' || name === 'https' ? HEAD : Buffer.concat([PREFACE, SETTINGS]));
    return hostile;
  }

  async function trickle(socket: Socket, bytes: Buffer, everyMs: number): Promise<void> {
    for (let at = 0; at < bytes.byteLength && !socket.destroyed; at++) {
      socket.write(bytes.subarray(at, at + 1));
      await sleep(everyMs);
    }
  }

  /** A good request on a new connection: 200 over HTTP, the echo over gRPC. */
  function healthy(name: ListenerName): Promise<boolean> {
    const port = ports.get(name)!;
    if (name === 'http' || name === 'https') {
      return new Promise((resolve) => {
        const get = name === 'https' ? https.get : http.get;
        const req = get(
          { host: '127.0.0.1', port, path: '/ok', agent: false, ca: cert, servername: 'localhost' },
          (res) => {
            res.resume();
            res.on('end', () => {
              resolve(res.statusCode === 200);
            });
          },
        );
        req.setTimeout(5_000, () => req.destroy());
        req.on('error', () => {
          resolve(false);
        });
      });
    }
    return new Promise((resolve) => {
      const client = http2.connect(`${name === 'grpcs' ? 'https' : 'http'}://localhost:${port}`, {
        ca: cert,
      });
      client.on('error', () => undefined);
      const timer = setTimeout(() => {
        client.destroy();
        resolve(false);
      }, 5_000);
      const stream = client.request({
        ':method': 'POST',
        ':path': '/fuzz.Echo/Echo',
        'content-type': 'application/grpc',
        te: 'trailers',
      });
      let status: string | undefined;
      stream.on('trailers', (h: http2.IncomingHttpHeaders) => (status = String(h['grpc-status'] ?? '')));
      stream.on('error', () => undefined);
      stream.resume();
      stream.on('close', () => {
        clearTimeout(timer);
        client.close();
        resolve(status === '0');
      });
      stream.end(Buffer.from([0, 0, 0, 0, 2, 0x6f, 0x6b]));
    });
  }

  it(
    'connections/hostile: idle, cut, trickled, garbage and completed connections never lock a listener out',
    targetOptions('connections/hostile', 300_000),
    async (t) => {
      let sockets = 0;
      let evicted = 0;
      await fuzzAsync(
        t,
        'connections/hostile',
        fc.asyncProperty(inputArb, async ({ listener, groups }) => {
          const hostile: Hostile[] = [];
          try {
            for (const { pattern, count } of groups) {
              for (let i = 0; i < count; i++) hostile.push(await open(listener, pattern));
            }
            sockets += hostile.length;
            if (!(await healthy(listener))) throw new Error(`${listener}: a good client was not served`);
            const unstarted = hostile.filter((h) => !h.started);
            await waitFor(() => unstarted.every((h) => h.closedAt > 0), DEADLINE_MS + SLACK_MS + 5_000);
            for (const h of unstarted) {
              if (h.closedAt - h.openedAt > DEADLINE_MS + SLACK_MS) {
                throw new Error(
                  `${listener}: a socket stayed ${h.closedAt - h.openedAt} ms without its first bytes`,
                );
              }
            }
            const closedStarted = hostile.filter((h) => h.started && h.closedAt > 0).length;
            evicted += closedStarted;
            if (closedStarted > 0 && hostile.length + 1 <= CAP) {
              throw new Error(`${listener}: ${closedStarted} started connections closed below the cap`);
            }
            const errors = logs.filter((l) => /"level":"error"/.test(l));
            if (errors.length > 0) throw new Error(`error logged: ${errors[0]!.slice(0, 500)}`);
          } finally {
            for (const h of hostile) h.socket.destroy();
          }
          const count = counts.get(listener)!;
          await waitFor(() => count() === 0, 5_000, `${listener}: ${count()} connections still counted`);
        }),
        12,
        () => `; ${sockets} hostile sockets, ${evicted} started ones closed at the cap`,
        false,
      );
    },
  );
});

/** The first bytes node's TLS client sends (its ClientHello), caught by a plain TCP server. */
async function captureClientHello(): Promise<Buffer> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  const hello = new Promise<Buffer>((resolve) => {
    server.once('connection', (socket) => {
      socket.once('data', (chunk: Buffer) => {
        resolve(chunk);
        socket.destroy();
      });
    });
  });
  const client = tls.connect({ host: '127.0.0.1', port, servername: 'localhost', ALPNProtocols: ['h2'] });
  client.on('error', () => undefined);
  const bytes = await hello;
  client.destroy();
  server.close();
  return bytes;
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function waitFor(condition: () => boolean, timeoutMs: number, what = 'timed out'): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > until) throw new Error(what);
    await sleep(20);
  }
}
