/**
 * Idle and half-open sockets cannot lock a listener out (connection-guard.ts), on the real
 * server over real sockets: with more idle sockets than `--max_connections` open on the REST,
 * SageMaker and gRPC ports (plaintext and TLS), the oldest idle ones are closed and a good
 * client is served on each; sockets that send nothing, half a request head, half an HTTP/2
 * preface or half a TLS handshake are closed once `--connection_first_bytes_timeout_ms` has
 * passed, while a keep-alive connection that sent a request stays; `--max_connections_per_address`
 * refuses connections beyond it from one address and not from another.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { connect, type Socket } from 'node:net';
import { connect as tlsConnect } from 'node:tls';
import {
  type ClientTlsOptions,
  createInvocationsClient,
  createTfsGrpcClient,
  createTfsRestClient,
  tensor,
} from '@visionserve/client';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { makeTestCerts } from '../src/tools/test-certs.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { startHarness, type Harness } from './helpers/server-harness.js';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';

/** The HTTP/2 client preface. */
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
/** An empty SETTINGS frame. */
const SETTINGS = Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]);
/** The first bytes of a TLS ClientHello record (its header and a few body bytes). */
const HALF_CLIENT_HELLO = Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03]);
const HALF_HEAD = Buffer.from('GET /v1/models/half HTTP/1.1\r\nHost: x\r\n', 'latin1');
const FULL_HEAD = Buffer.from('GET /v1/models/half HTTP/1.1\r\nHost: x\r\n\r\n', 'latin1');

/** A raw client socket and what happened to it. */
interface Probe {
  readonly socket: Socket;
  /** Resolves with the socket's lifetime in ms (connect to close) once the server closed it. */
  readonly closed: Promise<number>;
  /** Whether it has closed yet. */
  isClosed(): boolean;
  /** Bytes the server sent. */
  received(): Buffer;
}

/** Connects to `port` and writes `send` (if any) once connected. */
function probe(port: number, send?: Buffer, localAddress?: string): Promise<Probe> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let closedAt: number | undefined;
    let openedAt = 0;
    const socket = connect({ host: '127.0.0.1', port, ...(localAddress ? { localAddress } : {}) });
    const closed = new Promise<number>((done) => {
      socket.once('close', () => {
        closedAt = Date.now();
        done(closedAt - openedAt);
      });
    });
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', () => undefined);
    socket.once('connect', () => {
      openedAt = Date.now();
      if (send !== undefined) socket.write(send);
      resolve({
        socket,
        closed,
        isClosed: () => closedAt !== undefined,
        received: () => Buffer.concat(chunks),
      });
    });
    socket.once('error', reject);
  });
}

async function probes(
  count: number,
  port: number,
  send: (i: number) => Buffer | undefined,
): Promise<Probe[]> {
  const out: Probe[] = [];
  for (let i = 0; i < count; i++) out.push(await probe(port, send(i)));
  return out;
}

function closeAll(list: readonly Probe[]): void {
  for (const p of list) p.socket.destroy();
}

const small = Float32Array.from([1, 2, 3]);
const expected = Float32Array.from([2.5, 3, 3.5]);

/** A predict on a fresh client of each protocol: REST, SageMaker (when a port is given), gRPC on both transports. */
async function goodClientsServed(
  ports: { rest: number; grpc: number; sagemaker?: number },
  tls?: ClientTlsOptions,
): Promise<void> {
  const scheme = tls === undefined ? 'http' : 'https';
  const rest = createTfsRestClient({
    baseUrl: `${scheme}://127.0.0.1:${ports.rest}`,
    ...(tls ? { tls } : {}),
  });
  try {
    assert.deepEqual((await rest.predict('half', { x: tensor(small) })).outputs.y!.data, expected, 'REST');
  } finally {
    rest.close();
  }
  if (ports.sagemaker !== undefined) {
    const sm = createInvocationsClient({
      baseUrl: `${scheme}://127.0.0.1:${ports.sagemaker}`,
      ...(tls ? { tls } : {}),
    });
    try {
      assert.deepEqual(
        (await sm.invoke({ instances: [1, 2] })).json(),
        { predictions: [2.5, 3] },
        'SageMaker',
      );
    } finally {
      sm.close();
    }
  }
  for (const transport of ['lean', 'node'] as const) {
    const grpc = createTfsGrpcClient({
      address: `${scheme}://${tls === undefined ? '127.0.0.1' : 'localhost'}:${ports.grpc}`,
      transport,
      ...(tls ? { tls } : {}),
    });
    try {
      const r = await grpc.predict('half', { x: tensor(small) });
      assert.deepEqual(r.outputs.y!.data, expected, `gRPC (${transport} client)`);
    } finally {
      grpc.close();
    }
  }
}

/** Of `list`, those the server closed before `ms` of their life (evicted, not timed out). */
async function closedWithin(list: readonly Probe[], ms: number): Promise<number> {
  let count = 0;
  for (const p of list) {
    if (!p.isClosed()) continue;
    if ((await p.closed) < ms) count++;
  }
  return count;
}

const CAP = 64;
const IDLE = 100;
const FIRST_BYTES_MS = 3000;
/** How long past the deadline a socket may stay open on a loaded 2-core box. */
const SLACK_MS = 10_000;

async function assertClosedByDeadline(list: readonly Probe[], what: string): Promise<void> {
  const lifetimes = await Promise.all(list.map((p) => p.closed));
  for (const ms of lifetimes) {
    assert.ok(ms >= FIRST_BYTES_MS - 50, `${what}: closed after ${ms} ms, before the deadline`);
    assert.ok(ms < FIRST_BYTES_MS + SLACK_MS, `${what}: open for ${ms} ms`);
  }
}

describe('connection guard, plaintext (REST, SageMaker, gRPC)', () => {
  let h: Harness;
  before(async () => {
    const dir = await tempRepo('vs-guard-');
    h = await startHarness({
      modelName: 'half',
      modelBasePath: await placeModel(dir, 'half', 1, halfPlusTwoModel()),
      sagemakerPort: 0,
      maxConnections: CAP,
      connectionFirstBytesTimeoutMs: FIRST_BYTES_MS,
      monitoringConfigFile: await writeMonitoring(dir),
    });
  });
  after(() => h.close());
  const ports = () => ({
    rest: h.server.ports.rest!,
    grpc: h.server.ports.grpc!,
    sagemaker: h.server.ports.sagemaker!,
  });

  it(`${IDLE} idle sockets per port past --max_connections=${CAP}: the oldest are closed, good clients served`, async () => {
    const { rest, grpc, sagemaker } = ports();
    const idle = [
      ...(await probes(IDLE, rest, (i) => (i % 2 === 0 ? undefined : HALF_HEAD))),
      ...(await probes(IDLE, sagemaker, () => undefined)),
      ...(await probes(IDLE, grpc, (i) => (i % 2 === 0 ? undefined : PREFACE.subarray(0, 10)))),
    ];
    try {
      await goodClientsServed(ports());
      // Each port had IDLE sockets for CAP places: at least IDLE - CAP were closed to make
      // room, long before the first-bytes deadline.
      for (const [i, name] of ['REST', 'SageMaker', 'gRPC'].entries()) {
        const evicted = await closedWithin(idle.slice(i * IDLE, (i + 1) * IDLE), FIRST_BYTES_MS - 100);
        assert.ok(evicted >= IDLE - CAP, `${name}: ${evicted} idle sockets closed before the deadline`);
      }
    } finally {
      closeAll(idle);
    }
  });

  it('sockets that send nothing or half their first bytes are closed at the first-bytes deadline; a keep-alive connection that sent a request stays', async () => {
    const { rest, grpc, sagemaker } = ports();
    const silent = [await probe(rest), await probe(sagemaker), await probe(grpc)];
    const halfHead = [await probe(rest, HALF_HEAD), await probe(sagemaker, HALF_HEAD)];
    const halfPreface = [await probe(grpc, PREFACE.subarray(0, 12)), await probe(grpc, PREFACE)];
    const served = await probe(rest, FULL_HEAD);
    const servedGrpc = await probe(grpc, Buffer.concat([PREFACE, SETTINGS]));
    try {
      await assertClosedByDeadline(silent, 'silent');
      await assertClosedByDeadline(halfHead, 'half a request head');
      await assertClosedByDeadline(halfPreface, 'half a preface / no SETTINGS');
      assert.ok(!served.isClosed(), 'a served keep-alive connection stays open past the deadline');
      assert.match(served.received().toString('latin1'), /^HTTP\/1\.1 200/);
      served.socket.write(FULL_HEAD);
      await waitFor(() => served.received().toString('latin1').split('HTTP/1.1 200').length === 3);
      assert.ok(!servedGrpc.isClosed(), 'a gRPC connection that sent its preface and SETTINGS stays open');
      // Both limits show in the metrics, per listener.
      const text = await (await fetch(`${h.rest}/monitoring/prometheus/metrics`)).text();
      for (const listener of ['rest', 'sagemaker', 'grpc']) {
        for (const reason of ['evicted_idle', 'first_bytes_timeout']) {
          const line = new RegExp(
            `^visionserve_connections_guarded_total\\{listener="${listener}",reason="${reason}"\\} (\\d+)`,
            'm',
          );
          const value = Number(line.exec(text)?.[1] ?? 0);
          assert.ok(value >= 1, `${listener} ${reason}: ${value}`);
        }
      }
      assert.match(text, /^visionserve_connections\{listener="rest"\} [1-9]/m);
    } finally {
      closeAll([...silent, ...halfHead, ...halfPreface, served, servedGrpc]);
    }
  });
});

describe('connection guard, --max_connections_per_address', () => {
  let h: Harness;
  const PER_ADDRESS = 4;
  before(async () => {
    const dir = await tempRepo('vs-guard-addr-');
    h = await startHarness({
      modelName: 'half',
      modelBasePath: await placeModel(dir, 'half', 1, halfPlusTwoModel()),
      maxConnectionsPerAddress: PER_ADDRESS,
      connectionFirstBytesTimeoutMs: 0,
    });
  });
  after(() => h.close());

  it(`refuses connections beyond ${PER_ADDRESS} from one address on REST and gRPC, not from another`, async () => {
    const rest = h.server.ports.rest!;
    const grpc = h.server.ports.grpc!;
    // The harness's own gRPC channel may hold a connection: close it so the count is ours.
    h.grpc.close();
    const held = [
      ...(await probes(PER_ADDRESS, rest, () => FULL_HEAD)),
      ...(await probes(PER_ADDRESS, grpc, () => Buffer.concat([PREFACE, SETTINGS]))),
    ];
    try {
      await waitFor(() => held.every((p) => p.received().byteLength > 0));
      const refusedRest = await probe(rest, FULL_HEAD);
      const refusedGrpc = await probe(grpc, Buffer.concat([PREFACE, SETTINGS]));
      await Promise.all([refusedRest.closed, refusedGrpc.closed]);
      assert.equal(refusedRest.received().byteLength, 0, 'REST: refused without an answer');
      assert.equal(refusedGrpc.received().byteLength, 0, 'gRPC: refused without SETTINGS');
      assert.ok(
        held.every((p) => !p.isClosed()),
        'the connections within the cap stay',
      );
      // Another client address is not limited by these.
      const other = [await probe(rest, FULL_HEAD, '127.0.0.2'), await probe(grpc, PREFACE, '127.0.0.2')];
      await waitFor(() => other.every((p) => p.received().byteLength > 0));
      assert.match(other[0]!.received().toString('latin1'), /^HTTP\/1\.1 200/);
      closeAll(other);
    } finally {
      closeAll(held);
    }
  });
});

describe('connection guard over TLS (REST, SageMaker, gRPC)', () => {
  let h: Harness;
  let tls: ClientTlsOptions;
  let ca: string;
  const KEEPALIVE_MS = 1000;
  before(async () => {
    const dir = await tempRepo('vs-guard-tls-');
    const certs = await makeTestCerts(dir, 'g-');
    const sslConfig = join(dir, 'ssl.config');
    await writeFile(
      sslConfig,
      `server_key: "${certs.serverKey}"\nserver_cert: "${certs.serverCert}"\nclient_verify: false\n`,
    );
    ca = await readFile(certs.ca, 'utf8');
    tls = { ca };
    h = await startHarness({
      modelName: 'half',
      modelBasePath: await placeModel(dir, 'half', 1, halfPlusTwoModel()),
      sagemakerPort: 0,
      sslConfigFile: sslConfig,
      sslConfigPollSeconds: 0,
      maxConnections: CAP,
      connectionFirstBytesTimeoutMs: FIRST_BYTES_MS,
      httpKeepaliveTimeoutMs: KEEPALIVE_MS,
    });
  });
  after(() => h.close());

  it(`${IDLE} half TLS handshakes per port past --max_connections=${CAP}: good TLS clients served, the rest closed at the deadline`, async () => {
    const rest = h.server.ports.rest!;
    const grpc = h.server.ports.grpc!;
    const sagemaker = h.server.ports.sagemaker!;
    const idle = [
      ...(await probes(IDLE, rest, (i) => (i % 2 === 0 ? undefined : HALF_CLIENT_HELLO))),
      ...(await probes(IDLE, grpc, (i) => (i % 2 === 0 ? undefined : HALF_CLIENT_HELLO))),
    ];
    try {
      await goodClientsServed({ rest, grpc }, tls);
      const sm = createInvocationsClient({ baseUrl: `https://127.0.0.1:${sagemaker}`, tls });
      try {
        assert.deepEqual((await sm.invoke({ instances: [1, 2] })).json(), { predictions: [2.5, 3] });
      } finally {
        sm.close();
      }
      for (const [i, name] of ['REST', 'gRPC'].entries()) {
        const list = idle.slice(i * IDLE, (i + 1) * IDLE);
        const evicted = await closedWithin(list, FIRST_BYTES_MS - 100);
        assert.ok(evicted >= IDLE - CAP, `${name}: ${evicted} half handshakes closed before the deadline`);
        // The others are closed by the deadline.
        const lifetimes = await Promise.all(list.map((p) => p.closed));
        assert.ok(
          Math.max(...lifetimes) < FIRST_BYTES_MS + SLACK_MS,
          `${name}: a half handshake stayed open`,
        );
      }
    } finally {
      closeAll(idle);
    }
  });

  it('an idle HTTPS keep-alive connection closes after --http_keepalive_timeout_ms, not before', async () => {
    const socket = tlsConnect({
      host: '127.0.0.1',
      port: h.server.ports.rest!,
      ca,
      servername: 'localhost',
    });
    socket.on('error', () => undefined);
    let answered = 0;
    const closed = new Promise<number>((resolve) => {
      socket.on('data', () => {
        answered ||= Date.now();
      });
      socket.once('close', () => {
        resolve(Date.now());
      });
    });
    socket.once('secureConnect', () => socket.write(FULL_HEAD));
    const at = await closed;
    assert.ok(answered > 0, 'answered');
    assert.ok(at - answered >= KEEPALIVE_MS - 100, `closed ${at - answered} ms after the answer`);
    assert.ok(at - answered < KEEPALIVE_MS + SLACK_MS, `closed ${at - answered} ms after the answer`);
  });
});

async function writeMonitoring(dir: string): Promise<string> {
  const file = join(dir, 'monitoring.config');
  await writeFile(file, 'prometheus_config { enable: true path: "/monitoring/prometheus/metrics" }\n');
  return file;
}

async function waitFor(condition: () => boolean, timeoutMs = 15_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > until) throw new Error('timed out waiting');
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
