/**
 * Connection age and idle limits (TF Serving's --grpc_channel_arguments grpc.max_connection_*)
 * on both gRPC transports, over real sockets with node:http2 as the client: an idle connection
 * gets GOAWAY and closes; an old one gets GOAWAY while its call goes on, and is closed when the
 * grace ends; the argument parser applies what it knows and names what it ignores.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { connect } from 'node:net';
import { ConfigError } from '../src/config/config-error.js';
import { parseGrpcChannelArguments } from '../src/config/grpc-channel-arguments.js';
import { resolveServerConfig } from '../src/config/server-config.js';
import { type RunningGrpcServer, startGrpcServer } from '../src/frontends/grpc/index.js';
import type { GrpcService } from '../src/frontends/grpc/index.js';
import { watchConnectionLifetime } from '../src/frontends/grpc/connection-lifetime.js';
import { silentLogger } from '../src/util/logger.js';
import { DEFAULTS } from '../src/config/server-config.js';
import { grpcServerSettings } from '../src/compose/config-settings.js';

function grpcMessage(body: Uint8Array): Buffer {
  const out = Buffer.alloc(5 + body.byteLength);
  out.writeUInt32BE(body.byteLength, 1);
  out.set(body, 5);
  return out;
}

describe('--grpc_channel_arguments', () => {
  it('applies the connection, stream and message arguments and names the others', () => {
    const { applied, ignored } = parseGrpcChannelArguments([
      'grpc.max_connection_age_ms=60000',
      'grpc.max_connection_age_grace_ms=5000',
      'grpc.max_connection_idle_ms=0',
      'grpc.max_concurrent_streams=64',
      'grpc.max_receive_message_length=-1',
      'grpc.keepalive_time_ms=7200000',
      'grpc.keepalive_timeout_ms=20000',
      'grpc.http2.min_ping_interval_without_data_ms=300000',
    ]);
    assert.deepEqual(applied, {
      maxConnectionAgeMs: 60000,
      maxConnectionAgeGraceMs: 5000,
      maxConnectionIdleMs: 0,
      maxConcurrentStreams: 64,
      maxReceiveMessageBytes: -1,
      keepaliveTimeMs: 7200000,
      keepaliveTimeoutMs: 20000,
    });
    assert.deepEqual(ignored, ['grpc.http2.min_ping_interval_without_data_ms']);
  });

  it('refuses malformed entries and values at start', () => {
    for (const bad of [
      'grpc.max_connection_age_ms',
      '=5',
      'grpc.max_connection_age_ms=soon',
      'grpc.max_connection_age_ms=-5',
      'grpc.max_concurrent_streams=0',
      'grpc.max_connection_idle_ms=1e3',
    ]) {
      assert.throws(() => parseGrpcChannelArguments([bad]), ConfigError, bad);
      assert.throws(() => resolveServerConfig({ grpcChannelArguments: [bad] }), ConfigError, bad);
    }
  });
});

describe('connection lifetime timers', () => {
  it('idle: GOAWAY only after the last call closed and the idle time passed; age jitter within ±10 %', async () => {
    // The lifetime timers are unref'd (they never hold the process open): keep it running.
    const keepAlive = setInterval(() => undefined, 1000);
    after(() => {
      clearInterval(keepAlive);
    });
    const events: string[] = [];
    const lifetime = watchConnectionLifetime(
      { maxIdleMs: 60 },
      { drain: () => events.push('drain'), destroy: () => events.push('destroy'), ping: () => undefined },
    );
    lifetime.activeStreams(1);
    await new Promise((resolve) => setTimeout(resolve, 120));
    assert.deepEqual(events, [], 'a call is open: not idle');
    lifetime.activeStreams(0);
    await new Promise((resolve) => setTimeout(resolve, 150));
    assert.deepEqual(events, ['drain']);
    lifetime.closed();

    const aged: number[] = [];
    for (const r of [0, 0.999]) {
      const started = performance.now();
      await new Promise<void>((resolve) => {
        const l = watchConnectionLifetime(
          { maxAgeMs: 100 },
          {
            drain: () => {
              aged.push(performance.now() - started);
              l.closed();
              resolve();
            },
            destroy: () => undefined,
            ping: () => undefined,
          },
          () => r,
        );
      });
    }
    // 90 and ~110 ms asked for (timers have millisecond granularity, and run late on a busy box).
    assert.ok(aged[0]! >= 85, `early jitter ${aged[0]}`);
    assert.ok(aged[1]! >= 105, `late jitter ${aged[1]}`);
  });
});

describe('keepalive timers', () => {
  it('pings again after each answer; an unanswered PING closes the connection after the timeout', async () => {
    const keepAlive = setInterval(() => undefined, 1000);
    after(() => {
      clearInterval(keepAlive);
    });
    let pings = 0;
    let destroyed = false;
    const answered = watchConnectionLifetime(
      { keepaliveTimeMs: 40, keepaliveTimeoutMs: 60 },
      {
        drain: () => undefined,
        destroy: () => {
          destroyed = true;
        },
        ping: (onAck) => {
          pings++;
          setTimeout(onAck, 5);
        },
      },
    );
    await new Promise((resolve) => setTimeout(resolve, 400));
    answered.closed();
    assert.ok(pings >= 3, `${pings} pings in 400 ms`);
    assert.equal(destroyed, false);

    const started = performance.now();
    let sent = 0;
    await new Promise<void>((resolve) => {
      const silent = watchConnectionLifetime(
        { keepaliveTimeMs: 40, keepaliveTimeoutMs: 60 },
        {
          drain: () => undefined,
          destroy: () => {
            silent.closed();
            resolve();
          },
          ping: () => {
            sent++;
          },
        },
      );
    });
    assert.equal(sent, 1);
    assert.ok(performance.now() - started >= 95, 'closed before keepalive time + timeout');
  });
});

for (const transport of ['lean', 'node'] as const) {
  describe(`gRPC connection limits (${transport} transport)`, () => {
    let idleServer: RunningGrpcServer;
    let ageServer: RunningGrpcServer;
    let keepaliveServer: RunningGrpcServer;
    let holdAborted: Promise<unknown>;
    let onHoldAbort: (reason: unknown) => void = () => undefined;

    const service: GrpcService = {
      name: 't.Svc',
      methods: {
        Echo: { handler: (message) => Promise.resolve([message.slice()]) },
        Hold: {
          handler: (_message, context) =>
            new Promise((_resolve, reject) => {
              context.signal.addEventListener(
                'abort',
                () => {
                  onHoldAbort(context.signal.reason);
                  reject(context.signal.reason as Error);
                },
                { once: true },
              );
            }),
        },
      },
    };

    before(async () => {
      idleServer = await startGrpcServer({
        ...grpcServerSettings(DEFAULTS),
        host: '127.0.0.1',
        port: 0,
        transport,
        logger: silentLogger,
        services: [service],
        connectionLimits: { maxIdleMs: 300 },
      });
      ageServer = await startGrpcServer({
        ...grpcServerSettings(DEFAULTS),
        host: '127.0.0.1',
        port: 0,
        transport,
        logger: silentLogger,
        services: [service],
        connectionLimits: { maxAgeMs: 400, maxAgeGraceMs: 400 },
      });
      keepaliveServer = await startGrpcServer({
        ...grpcServerSettings(DEFAULTS),
        host: '127.0.0.1',
        port: 0,
        transport,
        logger: silentLogger,
        services: [service],
        connectionLimits: { keepaliveTimeMs: 100, keepaliveTimeoutMs: 300 },
      });
    });

    after(async () => {
      await idleServer.close(1000);
      await ageServer.close(1000);
      await keepaliveServer.close(1000);
    });

    it('a response the client never lets through (window 0) is reset with CANCEL after the send-stall time', async () => {
      const stalled = await startGrpcServer({
        ...grpcServerSettings(DEFAULTS),
        host: '127.0.0.1',
        port: 0,
        transport,
        logger: silentLogger,
        sendStallTimeoutMs: 300,
        services: [
          {
            name: 't.Svc',
            methods: { Big: { handler: () => Promise.resolve([Buffer.alloc(4 * 1024 * 1024, 7)]) } },
          },
        ],
      });
      const client = http2.connect(`http://127.0.0.1:${stalled.port}`, {
        settings: { initialWindowSize: 0 },
      });
      client.on('error', () => undefined);
      try {
        const stream = client.request({
          ':method': 'POST',
          ':path': '/t.Svc/Big',
          'content-type': 'application/grpc',
          te: 'trailers',
        });
        stream.on('error', () => undefined);
        const responded = new Promise<number>((resolve) => {
          stream.once('response', () => {
            resolve(Date.now());
          });
        });
        const closed = new Promise<number>((resolve, reject) => {
          const timer = setTimeout(() => {
            reject(new Error('the stalled response was not reset within 10 s'));
          }, 10_000);
          stream.once('close', () => {
            clearTimeout(timer);
            resolve(stream.rstCode ?? -1);
          });
        });
        stream.end(grpcMessage(Buffer.from('x')));
        const t0 = await responded;
        assert.equal(await closed, http2.constants.NGHTTP2_CANCEL);
        assert.ok(Date.now() - t0 >= 150, `reset ${Date.now() - t0} ms after the headers`);
        const ended = Date.now();
        while (stalled.inFlight > 0 && Date.now() - ended < 5000) {
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        assert.equal(stalled.inFlight, 0, 'the call was not released');
      } finally {
        client.destroy();
        await stalled.close(1000);
      }
    });

    it('keepalive: a client that answers PINGs stays connected; one that never does is closed', async () => {
      const client = http2.connect(`http://127.0.0.1:${keepaliveServer.port}`);
      let pings = 0;
      client.on('ping', () => {
        pings++;
      });
      let closedEarly = false;
      client.once('close', () => {
        closedEarly = true;
      });
      assert.equal((await call(client, 'Echo')).status, '0');
      await new Promise((resolve) => setTimeout(resolve, 700));
      assert.ok(pings >= 2, `${pings} keepalive PINGs in 700 ms`);
      assert.equal(closedEarly, false, 'a client answering PINGs was disconnected');
      assert.equal((await call(client, 'Echo')).status, '0');
      client.close();

      // A raw client: preface and SETTINGS, then it reads but never answers anything.
      const socket = connect({ host: '127.0.0.1', port: keepaliveServer.port });
      socket.on('data', () => undefined);
      socket.on('error', () => undefined);
      socket.write(Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1'));
      socket.write(Buffer.from([0, 0, 0, 4, 0, 0, 0, 0, 0]));
      const opened = Date.now();
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => {
          reject(new Error('a client that never answers PINGs was not disconnected in 10 s'));
        }, 10_000);
        socket.once('close', () => {
          clearTimeout(timer);
          resolve();
        });
      });
      assert.ok(Date.now() - opened >= 350, `closed after ${Date.now() - opened} ms`);
      assert.equal(keepaliveServer.limitCloses.get('keepalive_timeout'), 1);
    });

    function call(client: http2.ClientHttp2Session, method: string): Promise<{ status: string | undefined }> {
      return new Promise((resolve, reject) => {
        const stream = client.request({
          ':method': 'POST',
          ':path': `/t.Svc/${method}`,
          'content-type': 'application/grpc',
          te: 'trailers',
        });
        let status: string | undefined;
        stream.on('response', (h) => {
          if (h['grpc-status'] !== undefined) status = String(h['grpc-status']);
        });
        stream.on('trailers', (h: http2.IncomingHttpHeaders) => {
          status = String(h['grpc-status']);
        });
        stream.on('data', () => undefined);
        stream.on('error', reject);
        stream.on('close', () => {
          resolve({ status });
        });
        stream.end(grpcMessage(Buffer.from('x')));
      });
    }

    it('an idle connection gets GOAWAY NO_ERROR after the idle time and closes; a busy one does not', async () => {
      const client = http2.connect(`http://127.0.0.1:${idleServer.port}`);
      const goaway = new Promise<number>((resolve) => {
        client.once('goaway', (code: number) => {
          resolve(code);
        });
      });
      const closed = new Promise<void>((resolve) => {
        client.once('close', () => {
          resolve();
        });
      });
      const started = Date.now();
      // Calls every 100 ms for 600 ms: never idle for 300 ms.
      for (let i = 0; i < 6; i++) {
        assert.equal((await call(client, 'Echo')).status, '0');
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      const busyFor = Date.now() - started;
      assert.equal(idleServer.connections, 1);
      assert.equal(await goaway, 0);
      await closed;
      assert.ok(Date.now() - started >= busyFor, 'GOAWAY while calls kept it busy');
      assert.equal(idleServer.limitCloses.get('max_idle'), 1);
      const closedAt = Date.now();
      while (idleServer.connections > 0 && Date.now() - closedAt < 5000) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.equal(idleServer.connections, 0);
    });

    it('an old connection gets GOAWAY, its open call goes on, and it is closed when the grace ends', async () => {
      const client = http2.connect(`http://127.0.0.1:${ageServer.port}`);
      client.on('error', () => undefined);
      holdAborted = new Promise((resolve) => {
        onHoldAbort = resolve;
      });
      let goawayAt = 0;
      client.once('goaway', () => {
        goawayAt = Date.now();
      });
      const started = Date.now();
      const held = call(client, 'Hold').then(
        (r) => r,
        (e: unknown) => ({ status: `error ${String(e)}` }),
      );
      const reason = await holdAborted;
      const abortedAt = Date.now();
      assert.ok(goawayAt > 0, 'no GOAWAY before the connection was closed');
      assert.ok(goawayAt - started >= 300, `GOAWAY after ${goawayAt - started} ms`);
      assert.ok(abortedAt - goawayAt >= 300, `closed ${abortedAt - goawayAt} ms after GOAWAY`);
      assert.match(String(reason), /cancel|connection/i);
      const answer = await held;
      assert.notEqual(answer.status, '0');
      assert.equal(ageServer.limitCloses.get('max_age'), 1);
      client.destroy();
    });
  });
}
