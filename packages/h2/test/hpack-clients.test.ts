/**
 * The HPACK codec against real HTTP/2 clients on loopback sockets:
 * - decoding: node:http2 and the stock Python grpcio client send gRPC calls (custom, -bin and
 *   long metadata, grpc-timeout; several calls on one connection so the dynamic table is used)
 *   through a recording TCP relay to a node:http2 server. Our decoder, fed the recorded HEADERS
 *   blocks in order, must give exactly the header lists node:http2's own decoder gave the server.
 * - encoding: a raw HTTP/2 server answers every call with response headers and trailers built by
 *   encodeHeaderBlock; node:http2 and grpcio clients must see exactly those fields.
 *
 * The grpcio client runs in the Python named by VISIONSERVE_GRPCIO_PYTHON, else in a compatibility
 * venv (.venv-kserve or .venv-compat; `bash compat/kserve/setup.sh` creates the first when neither
 * exists).
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import http2 from 'node:http2';
import { connect, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createHpackDecoder, encodeHeaderBlock } from '../src/index.js';

const ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const PREFACE = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

type Fields = (readonly [string, string])[];

const FRAME = { DATA: 0, HEADERS: 1, SETTINGS: 4, PING: 6, GOAWAY: 7, CONTINUATION: 9 } as const;
const FLAG = { END_STREAM: 0x1, ACK: 0x1, END_HEADERS: 0x4, PADDED: 0x8, PRIORITY: 0x20 } as const;

/** A complete header block a client sent, with its stream. */
interface RecordedBlock {
  readonly stream: number;
  readonly block: Buffer;
}

/**
 * Parses the client-to-server byte stream of one connection (preface, then frames) and calls
 * `onBlock` with each complete header block (HEADERS + CONTINUATIONs, padding and priority
 * removed) and `onFrame` with every frame.
 */
function frameReader(
  onBlock: (recorded: RecordedBlock) => void,
  onFrame: (type: number, flags: number, stream: number, payload: Buffer) => void = () => undefined,
): (chunk: Buffer) => void {
  let pending = Buffer.alloc(0);
  let prefaceSeen = false;
  let open: { stream: number; parts: Buffer[] } | undefined;
  return (chunk) => {
    pending = Buffer.concat([pending, chunk]);
    if (!prefaceSeen) {
      if (pending.length < PREFACE.length) return;
      assert.deepEqual(pending.subarray(0, PREFACE.length), PREFACE);
      pending = pending.subarray(PREFACE.length);
      prefaceSeen = true;
    }
    while (pending.length >= 9) {
      const length = pending.readUIntBE(0, 3);
      if (pending.length < 9 + length) return;
      const type = pending[3]!;
      const flags = pending[4]!;
      const stream = pending.readUInt32BE(5) & 0x7fffffff;
      const payload = Buffer.from(pending.subarray(9, 9 + length));
      pending = pending.subarray(9 + length);
      onFrame(type, flags, stream, payload);
      if (type === FRAME.HEADERS) {
        let start = 0;
        let end = payload.length;
        if ((flags & FLAG.PADDED) !== 0) {
          end -= payload[0]!;
          start = 1;
        }
        if ((flags & FLAG.PRIORITY) !== 0) start += 5;
        open = { stream, parts: [payload.subarray(start, end)] };
      } else if (type === FRAME.CONTINUATION) {
        assert.ok(open !== undefined && open.stream === stream, 'CONTINUATION without HEADERS');
        open.parts.push(payload);
      } else {
        continue;
      }
      if ((flags & FLAG.END_HEADERS) !== 0) {
        onBlock({ stream, block: Buffer.concat(open.parts) });
        open = undefined;
      }
    }
  };
}

function frame(type: number, flags: number, stream: number, payload: Uint8Array = new Uint8Array(0)): Buffer {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(stream, 5);
  return Buffer.concat([head, payload]);
}

function listen(server: Server | http2.Http2Server): Promise<number> {
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      resolve((server.address() as AddressInfo).port);
    });
  });
}

function close(server: Server | http2.Http2Server): Promise<void> {
  return new Promise((resolve) => {
    server.close(() => {
      resolve();
    });
  });
}

/**
 * A node:http2 gRPC server behind a recording relay: every connection's header blocks, and the
 * raw header list node:http2 decoded for each stream, keyed by connection and stream.
 */
interface Recorder {
  readonly port: number;
  /** Per relayed connection, in arrival order: the blocks the client sent. */
  readonly connections: RecordedBlock[][];
  /** node:http2's decoded lists, keyed `${remotePort}/${stream}` of the relay's upstream socket. */
  readonly decoded: Map<string, Fields>;
  /** The relay's upstream local port for each relayed connection (same order as connections). */
  readonly upstreamPorts: number[];
  stop(): Promise<void>;
}

async function startRecorder(): Promise<Recorder> {
  const decoded = new Map<string, Fields>();
  const h2 = http2.createServer();
  h2.on(
    'stream',
    (stream: http2.ServerHttp2Stream, _headers: unknown, _flags: unknown, rawHeaders: string[]) => {
      const fields: Fields = [];
      for (let i = 0; i < rawHeaders.length; i += 2) fields.push([rawHeaders[i]!, rawHeaders[i + 1]!]);
      decoded.set(`${stream.session?.socket.remotePort}/${stream.id}`, fields);
      stream.on('data', () => undefined);
      stream.on('end', () => {
        stream.respond({ ':status': 200, 'content-type': 'application/grpc' }, { waitForTrailers: true });
        stream.on('wantTrailers', () => {
          stream.sendTrailers({ 'grpc-status': '0' });
        });
        stream.end(Buffer.from([0, 0, 0, 0, 2, 8, 1]));
      });
    },
  );
  const upstreamPort = await listen(h2);
  const connections: RecordedBlock[][] = [];
  const upstreamPorts: number[] = [];
  const sockets = new Set<Socket>();
  const relay = createServer((client) => {
    const blocks: RecordedBlock[] = [];
    connections.push(blocks);
    const upstream = connect(upstreamPort, '127.0.0.1');
    sockets.add(client);
    sockets.add(upstream);
    upstream.once('connect', () => {
      upstreamPorts[connections.indexOf(blocks)] = upstream.localPort!;
    });
    const read = frameReader((recorded) => blocks.push(recorded));
    client.on('data', (chunk: Buffer) => {
      read(chunk);
      upstream.write(chunk);
    });
    upstream.pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('close', end);
    upstream.on('close', end);
    client.on('error', end);
    upstream.on('error', end);
  });
  const port = await listen(relay);
  return {
    port,
    connections,
    decoded,
    upstreamPorts,
    stop: async () => {
      for (const socket of sockets) socket.destroy();
      await Promise.all([close(relay), close(h2)]);
    },
  };
}

/** Decodes each connection's blocks in order with one decoder per connection; checks them against node:http2's lists. */
function checkAgainstNode(recorder: Recorder): Map<number, Fields>[] {
  const all: Map<number, Fields>[] = [];
  recorder.connections.forEach((blocks, i) => {
    const decoder = createHpackDecoder();
    const byStream = new Map<number, Fields>();
    for (const { stream, block } of blocks) {
      const fields: Fields = [];
      decoder.decode(block, (name, value) => fields.push([name, value]));
      const expected = recorder.decoded.get(`${recorder.upstreamPorts[i]}/${stream}`);
      assert.ok(expected !== undefined, `node:http2 saw no stream ${stream}`);
      assert.deepEqual(fields, expected, `stream ${stream}`);
      byStream.set(stream, fields);
    }
    all.push(byStream);
  });
  return all;
}

/** Per call: the metadata the clients send. Values vary per call, so literals and indexed fields mix. */
function callMetadata(call: number): Fields {
  return [
    ['x-request-id', `req-${call}-${'0123456789abcdef'.repeat(2)}`],
    ['x-tenant', 'acme-corp'],
    ['x-long', `${'long metadata value that Huffman shortens '.repeat(8)}#${call % 2}`],
    ['authorization', 'Bearer eyJhbGciOiJIUzI1NiJ9.e30.ZRrHA1JJJW8opsbCGfG_HACGpVUMN_a9IV7pAx_Zmeo'],
  ];
}
/** Binary metadata per call (sent under x-trace-bin). */
function callBinary(call: number): Buffer {
  return Buffer.from([0, 1, 2, 0xfe, 0xff, call, 0x80, 0x7f]);
}

function pythonForGrpcio(): string {
  const fromEnv = process.env['VISIONSERVE_GRPCIO_PYTHON'];
  if (fromEnv !== undefined && fromEnv !== '') return fromEnv;
  // Either compatibility venv has the stock grpcio; the lighter KServe one is made when neither exists.
  const kserve = join(ROOT, '.venv-kserve/bin/python');
  const tfserving = join(ROOT, '.venv-compat/bin/python');
  if (existsSync(kserve)) return kserve;
  if (existsSync(tfserving)) return tfserving;
  execFileSync('bash', [join(ROOT, 'compat/kserve/setup.sh')], { stdio: 'inherit' });
  return kserve;
}

/**
 * The stock grpcio client: `calls` unary calls on one channel with callMetadata/callBinary and a
 * deadline; prints each call's initial and trailing metadata (-bin values as hex) as JSON.
 */
const GRPCIO_CLIENT = `
import json, sys, grpc
target, calls = sys.argv[1], int(sys.argv[2])
metadata = json.loads(sys.argv[3])
channel = grpc.insecure_channel(target)
method = channel.unary_unary('/visionserve.test.Echo/Call')
out = []
def show(md):
    return [[k, v.hex() if isinstance(v, bytes) else v] for k, v in md]
for call in range(calls):
    md = [(k, bytes.fromhex(v) if k.endswith('-bin') else v) for k, v in metadata[call]]
    response, info = method.with_call(b'\\x08\\x01', metadata=md, timeout=30 + call)
    out.append({'response': response.hex(), 'initial': show(info.initial_metadata()), 'trailing': show(info.trailing_metadata())})
channel.close()
print(json.dumps(out))
`;

interface GrpcioCall {
  readonly response: string;
  readonly initial: [string, string][];
  readonly trailing: [string, string][];
}

function runGrpcio(port: number, calls: number): Promise<GrpcioCall[]> {
  const metadata = Array.from({ length: calls }, (_, call) => [
    ...callMetadata(call),
    ['x-trace-bin', callBinary(call).toString('hex')],
  ]);
  return new Promise((resolve, reject) => {
    execFile(
      pythonForGrpcio(),
      ['-c', GRPCIO_CLIENT, `127.0.0.1:${port}`, String(calls), JSON.stringify(metadata)],
      { timeout: 60_000, env: { ...process.env, GRPC_ENABLE_FORK_SUPPORT: '0' } },
      (error, stdout, stderr) => {
        if (error) {
          reject(new Error(`grpcio client failed: ${error.message}\n${stderr}`));
          return;
        }
        resolve(JSON.parse(stdout) as GrpcioCall[]);
      },
    );
  });
}

/** `calls` gRPC-shaped requests on one node:http2 session; resolves with each response's headers and trailers. */
interface NodeCall {
  readonly headers: http2.IncomingHttpHeaders;
  readonly trailers: http2.IncomingHttpHeaders;
}

async function runNodeClient(port: number, calls: number): Promise<NodeCall[]> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => undefined);
  const results: NodeCall[] = [];
  try {
    for (let call = 0; call < calls; call++) {
      const request = session.request({
        ':method': 'POST',
        ':path': '/visionserve.test.Echo/Call',
        'content-type': 'application/grpc',
        te: 'trailers',
        'grpc-timeout': `${30 + call}S`,
        ...Object.fromEntries(callMetadata(call)),
        'x-trace-bin': callBinary(call).toString('base64'),
      });
      request.end(Buffer.from([0, 0, 0, 0, 2, 8, 1]));
      results.push(
        await new Promise<NodeCall>((resolve, reject) => {
          let headers: http2.IncomingHttpHeaders = {};
          request.on('response', (h) => {
            headers = h;
          });
          request.on('trailers', (trailers: http2.IncomingHttpHeaders) => {
            resolve({ headers, trailers });
          });
          request.on('data', () => undefined);
          request.on('error', reject);
          request.on('close', () => {
            reject(new Error(`stream closed without trailers (code ${request.rstCode})`));
          });
        }),
      );
    }
  } finally {
    session.close();
  }
  return results;
}

/** Checks that `fields` carry the call's metadata exactly (binary metadata base64, padding optional). */
function assertCallMetadata(fields: Fields, call: number): void {
  for (const [name, value] of callMetadata(call)) {
    assert.deepEqual(
      fields.filter(([n]) => n === name).map(([, v]) => v),
      [value],
      name,
    );
  }
  const trace = fields.filter(([n]) => n === 'x-trace-bin');
  assert.equal(trace.length, 1);
  assert.deepEqual(Buffer.from(trace[0]![1], 'base64'), callBinary(call));
  const timeout = fields.find(([n]) => n === 'grpc-timeout');
  assert.ok(timeout !== undefined && /^\d{1,8}[HMSmun]$/.test(timeout[1]), `grpc-timeout ${timeout?.[1]}`);
}

describe('HPACK decoder against real clients', () => {
  let recorder: Recorder;
  before(async () => {
    recorder = await startRecorder();
  });
  after(async () => {
    await recorder.stop();
  });

  it('node:http2 client: every block decodes to the list node:http2 decoded', async () => {
    const before = recorder.connections.length;
    await runNodeClient(recorder.port, 6);
    assert.equal(recorder.connections.length, before + 1);
    const decoded = checkAgainstNode(recorder)[before]!;
    assert.equal(decoded.size, 6);
    [...decoded.values()].forEach((fields, call) => {
      assertCallMetadata(fields, call);
    });
    // Later blocks are much smaller: the dynamic table is in use.
    const blocks = recorder.connections[before]!;
    assert.ok(blocks[5]!.block.length < blocks[0]!.block.length / 2, 'later blocks reuse the dynamic table');
  });

  it('node:http2 client, random header lists: eviction, Huffman, never-indexed fields decode as node:http2 decoded', async () => {
    const before = recorder.connections.length;
    // A seeded generator: the same lists on every run.
    let seed = 0x2545f491;
    const next = (n: number) => {
      seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
      return (seed >>> 8) % n;
    };
    const text = (length: number, alphabet: string) =>
      Array.from({ length }, () => alphabet[next(alphabet.length)]!).join('');
    const latin1 = Array.from({ length: 256 }, (_, c) => String.fromCharCode(c))
      .filter((c) => c === '\t' || (c >= ' ' && c !== '\u007f'))
      .join('');
    const session = http2.connect(`http://127.0.0.1:${recorder.port}`);
    session.on('error', () => undefined);
    try {
      for (let call = 0; call < 40; call++) {
        const headers: http2.OutgoingHttpHeaders = {
          ':method': 'POST',
          ':path': `/r/${text(next(40), 'abc/%')}`,
        };
        const sensitive: string[] = [];
        for (let i = next(16); i > 0; i--) {
          // Few names, so fields recur and get indexed; values from 0 to 2,000 latin1 characters.
          const name = `x-h${next(12)}`;
          // nghttp2 drops fields whose value starts or ends with SP/HTAB (RFC 9113 §8.2.1): the
          // oracle would not see them.
          headers[name] = next(3) === 0 ? `<${text(next(2000), latin1)}>` : `v${next(6)}`;
          if (next(8) === 0) sensitive.push(name);
        }
        Object.assign(headers, { [http2.sensitiveHeaders]: sensitive });
        const request = session.request(headers);
        request.end();
        request.resume();
        await new Promise((resolve) => request.once('close', resolve));
      }
    } finally {
      session.close();
    }
    const decoded = checkAgainstNode(recorder)[before]!;
    assert.equal(decoded.size, 40);
  });

  it('grpcio client: every block decodes to the list node:http2 decoded', { timeout: 90_000 }, async () => {
    const before = recorder.connections.length;
    const calls = await runGrpcio(recorder.port, 6);
    assert.equal(calls.length, 6);
    const decoded = checkAgainstNode(recorder).slice(before);
    const streams = decoded.flatMap((byStream) => [...byStream.values()]);
    assert.equal(streams.length, 6);
    streams.forEach((fields, call) => {
      assertCallMetadata(fields, call);
      assert.ok(fields.some(([n, v]) => n === 'user-agent' && v.startsWith('grpc-python/')));
    });
    const blocks = recorder.connections.slice(before).flat();
    // grpc core sends custom metadata as literals without indexing (and no Huffman); its own
    // fields come from the dynamic table after the first call.
    assert.ok(blocks[5]!.block.length < blocks[0]!.block.length, 'later blocks reuse the dynamic table');
    assert.ok(blocks[5]!.block[0]! > 0x80 + 61, 'a later block starts with a dynamic table reference');
  });
});

/** Response headers and trailers the raw server sends, and what the clients must see. */
const RESPONSE_HEADERS: Fields = [
  [':status', '200'],
  ['content-type', 'application/grpc'],
  ['grpc-encoding', 'identity'],
  ['grpc-accept-encoding', 'identity,deflate,gzip'],
  ['x-served-by', 'visionserve-hpack-test'],
  ['x-response-bin', Buffer.from([0xde, 0xad, 0xbe, 0xef, 0]).toString('base64')],
];
const RESPONSE_TRAILERS: Fields = [
  ['grpc-status', '0'],
  ['grpc-message', 'all%20good'],
  ['x-long-trailer', 't'.repeat(500)],
];

/** A raw HTTP/2 server that answers every request stream with blocks from encodeHeaderBlock. */
async function startRawServer(): Promise<{ port: number; stop: () => Promise<void> }> {
  const headersBlock = encodeHeaderBlock(RESPONSE_HEADERS);
  const trailersBlock = encodeHeaderBlock(RESPONSE_TRAILERS);
  const message = Buffer.from([0, 0, 0, 0, 2, 8, 1]);
  const sockets = new Set<Socket>();
  const server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    socket.write(frame(FRAME.SETTINGS, 0, 0));
    const decoder = createHpackDecoder();
    const read = frameReader(
      ({ stream, block }) => {
        decoder.decode(block, () => undefined);
        socket.write(
          Buffer.concat([
            frame(FRAME.HEADERS, FLAG.END_HEADERS, stream, headersBlock),
            frame(FRAME.DATA, 0, stream, message),
            frame(FRAME.HEADERS, FLAG.END_HEADERS | FLAG.END_STREAM, stream, trailersBlock),
          ]),
        );
      },
      (type, flags, _stream, payload) => {
        if (type === FRAME.SETTINGS && (flags & FLAG.ACK) === 0)
          socket.write(frame(FRAME.SETTINGS, FLAG.ACK, 0));
        if (type === FRAME.PING && (flags & FLAG.ACK) === 0)
          socket.write(frame(FRAME.PING, FLAG.ACK, 0, payload));
      },
    );
    socket.on('data', read);
  });
  const port = await listen(server);
  return {
    port,
    stop: async () => {
      for (const socket of sockets) socket.destroy();
      await close(server);
    },
  };
}

describe('encodeHeaderBlock blocks seen by real clients', () => {
  let raw: { port: number; stop: () => Promise<void> };
  before(async () => {
    raw = await startRawServer();
  });
  after(async () => {
    await raw.stop();
  });

  it('node:http2 client sees exactly the response headers and trailers', async () => {
    const results = await runNodeClient(raw.port, 3);
    for (const { headers, trailers } of results) {
      // Object.entries leaves out node's http2.sensitiveHeaders symbol key.
      assert.deepEqual(Object.fromEntries(Object.entries(headers)), {
        ...Object.fromEntries(RESPONSE_HEADERS),
        ':status': 200,
      });
      assert.deepEqual(Object.fromEntries(Object.entries(trailers)), Object.fromEntries(RESPONSE_TRAILERS));
    }
  });

  it('grpcio client sees exactly the response metadata and trailers', { timeout: 90_000 }, async () => {
    const calls = await runGrpcio(raw.port, 3);
    for (const call of calls) {
      assert.equal(call.response, '0801');
      // grpcio hides the HTTP/2 and gRPC transport fields; custom metadata remains, -bin decoded.
      assert.deepEqual(call.initial, [
        ['x-served-by', 'visionserve-hpack-test'],
        ['x-response-bin', 'deadbeef00'],
      ]);
      assert.deepEqual(call.trailing, [['x-long-trailer', 't'.repeat(500)]]);
    }
  });
});
