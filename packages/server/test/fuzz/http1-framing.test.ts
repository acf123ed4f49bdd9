/**
 * Fuzz target: raw HTTP/1.1 bytes on a TCP socket to the REST listener (TF Serving REST and
 * KServe v2 on one edge, fake models): request lines and versions, conflicting
 * Content-Length / Transfer-Encoding (smuggling shapes), broken chunked framing, header
 * floods and oversized headers, bare LF / CR line ends, pipelining, bodies split and cut
 * short, byte edits of all of it. Every answer must be a well-formed response that is not a
 * server error, and the listener must keep serving.
 */
import { after, before, describe, it } from 'node:test';
import { connect } from 'node:net';
import fc from 'fast-check';
import { type Tensor, notFound } from '@visionserve/protocol';
import type { ServableAssets } from '../../src/contracts/servable-assets.js';
import type { ModelSpec, PredictRequest } from '../../src/core/inference-service.js';
import type { Signature } from '../../src/core/signature.js';
import { validateInputs, validateOutputFilter } from '../../src/core/validate-inputs.js';
import { createHttpEdge } from '../../src/frontends/http/http-edge.js';
import { type StartedHttpServer, startHttpServer } from '../../src/frontends/http/start-http-server.js';
import { createKServeHttpApi, createKServeService } from '../../src/frontends/kserve/index.js';
import { createInferenceStatistics } from '../../src/core/inference-statistics.js';
import { createTfsRestApi } from '../../src/frontends/tfs-rest/index.js';
import { createJsonLogger } from '../../src/util/logger.js';
import { fakeInferenceService } from '../fakes.js';
import { mutate, mutationArb } from '@visionserve/testkit/arbitraries';
import { fuzzAsync, targetOptions } from '@visionserve/testkit/campaign';
import { DEFAULTS } from '../../src/config/server-config.js';
import { httpServerSettings } from '../../src/compose/config-settings.js';

const HALF: Signature = {
  inputs: { x: { name: 'x', dtype: 'float32', shape: [-1] } },
  outputs: { y: { name: 'y', dtype: 'float32', shape: [-1] } },
  methodName: 'tensorflow/serving/predict',
};

/** How long a connection may take to answer and close after the client's FIN, in ms. */
const SETTLE_MS = 10_000;

interface Exchange {
  /** Status codes of the responses received, in order. */
  readonly statuses: number[];
  readonly text: string;
  /** The server neither answered completely nor closed within SETTLE_MS. */
  readonly hung: boolean;
}

/** Sends `pieces` (a pause of `pauseMs` before each but the first), half-closes, reads until close. */
function exchange(port: number, pieces: readonly Uint8Array[], pauseMs: number): Promise<Exchange> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    const chunks: Buffer[] = [];
    let done = false;
    const finish = (hung: boolean): void => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      const statuses = [...text.matchAll(/(?:^|\r\n)HTTP\/1\.[01] (\d{3}) /g)].map((m) => Number(m[1]));
      resolve({ statuses, text, hung });
    };
    const timer = setTimeout(() => {
      finish(true);
    }, SETTLE_MS);
    socket.on('data', (c: Buffer) => chunks.push(c));
    socket.on('close', () => {
      finish(false);
    });
    socket.on('error', () => {
      finish(false);
    });
    socket.on('connect', () => {
      void (async () => {
        for (let i = 0; i < pieces.length && !socket.destroyed; i++) {
          if (i > 0 && pauseMs > 0) await new Promise((r) => setTimeout(r, pauseMs));
          socket.write(pieces[i]!);
        }
        if (!socket.destroyed) socket.end();
      })();
    });
  });
}

/** One request as parts, so that edits can target the request line, a header or the body. */
interface RequestParts {
  readonly method: string;
  readonly target: string;
  readonly version: string;
  readonly headers: readonly string[];
  readonly body: string;
  readonly eol: string;
}

function render(r: RequestParts): Buffer {
  return Buffer.from(
    `${r.method} ${r.target} ${r.version}${r.eol}${r.headers.map((h) => `${h}${r.eol}`).join('')}${r.eol}${r.body}`,
    'latin1',
  );
}

const PREDICT = '{"instances": [1.0, 2.5, -3]}';
const KSERVE = '{"inputs":[{"name":"x","shape":[2],"datatype":"FP32","data":[1,2]}]}';

/** Valid requests to start from. */
const baseArb: fc.Arbitrary<RequestParts> = fc.constantFrom<RequestParts>(
  {
    method: 'GET',
    target: '/v1/models/half',
    version: 'HTTP/1.1',
    headers: ['Host: x'],
    body: '',
    eol: '\r\n',
  },
  {
    method: 'GET',
    target: '/v1/models/half/metadata',
    version: 'HTTP/1.1',
    headers: ['Host: x'],
    body: '',
    eol: '\r\n',
  },
  {
    method: 'POST',
    target: '/v1/models/half:predict',
    version: 'HTTP/1.1',
    headers: ['Host: x', 'Content-Type: application/json', `Content-Length: ${PREDICT.length}`],
    body: PREDICT,
    eol: '\r\n',
  },
  {
    method: 'POST',
    target: '/v1/models/half:predict',
    version: 'HTTP/1.1',
    headers: ['Host: x', 'Transfer-Encoding: chunked'],
    body: `5\r\n${PREDICT.slice(0, 5)}\r\n${(PREDICT.length - 5).toString(16)}\r\n${PREDICT.slice(5)}\r\n0\r\n\r\n`,
    eol: '\r\n',
  },
  {
    method: 'POST',
    target: '/v2/models/half/infer',
    version: 'HTTP/1.1',
    headers: ['Host: x', `Content-Length: ${KSERVE.length}`],
    body: KSERVE,
    eol: '\r\n',
  },
  { method: 'GET', target: '/v2/health/ready', version: 'HTTP/1.0', headers: [], body: '', eol: '\r\n' },
);

/** Headers that break framing or parsers. */
const hostileHeaderArb = fc.oneof(
  fc.constantFrom(
    'Content-Length: 0',
    'Content-Length: 5',
    'Content-Length: 99999999999999999999',
    'Content-Length: -1',
    'Content-Length: 1e3',
    'Content-Length: 0x10',
    'Content-Length: 4, 4',
    'Content-Length:  7 ',
    'Transfer-Encoding: chunked',
    'Transfer-Encoding: chunked, gzip',
    'Transfer-Encoding: gzip, chunked',
    'Transfer-Encoding: xchunked',
    'Transfer-Encoding : chunked',
    ' Transfer-Encoding: chunked',
    'Transfer-Encoding:\tchunked',
    'Content-Encoding: gzip',
    'Content-Encoding: br',
    'Expect: 100-continue',
    'Expect: 200-ok',
    'Connection: close',
    'Connection: keep-alive, Upgrade',
    'Upgrade: h2c',
    'Upgrade: websocket',
    'HTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA',
    'Host: a, b',
    'Host:',
    'X-Folded: a\r\n b',
    'NoColonHere',
    ': empty-name',
    'X-Nul: a\u0000b',
    'X-Ctl: \u0001\u007f',
    'X-High: \u00ff\u00fe',
    'Inference-Header-Content-Length: 3',
    'Accept-Encoding: gzip;q=2, *;q=-1',
    `X-Long: ${'a'.repeat(20_000)}`,
    `${'X'.repeat(300)}: y`,
  ),
  fc
    .integer({ min: 100, max: 3000 })
    .map((n) => Array.from({ length: n }, (_, i) => `X-H${i}: v`).join('\r\n')),
);

/** Chunked bodies that lie: sizes past the data, huge or negative sizes, extensions, trailers, no terminator. */
const hostileChunkedArb = fc.constantFrom(
  '5\r\nabc\r\n0\r\n\r\n',
  'ffffffffffffffff\r\nabc\r\n0\r\n\r\n',
  '-1\r\nabc\r\n0\r\n\r\n',
  '3;ext=1;x="y"\r\nabc\r\n0\r\n\r\n',
  '3\r\nabc\r\n0\r\nX-Trailer: 1\r\n\r\n',
  '3\nabc\n0\n\n',
  '3\r\nabcdef\r\n0\r\n\r\n',
  '0\r\n',
  ' 3\r\nabc\r\n0\r\n\r\n',
  '3 \r\nabc\r\n0\r\n\r\n',
  '0x3\r\nabc\r\n0\r\n\r\n',
  `${'0'.repeat(100)}3\r\nabc\r\n0\r\n\r\n`,
  '3\r\nabc',
);

const editArb: fc.Arbitrary<(r: RequestParts) => RequestParts> = fc.oneof(
  fc
    .constantFrom('get', 'GET ', 'POSTX', 'DELETE', 'PUT', 'CONNECT', 'TRACE', 'PRI', 'M'.repeat(100), '')
    .map((method) => (r: RequestParts) => ({ ...r, method })),
  fc
    .constantFrom(
      '*',
      'http://x/v1/models/half',
      '/v1/models/half?x=%',
      '/%00',
      '//',
      '/v1/models/%2e%2e/%2e%2e',
      '/v1/models/half/versions/99999999999999999999',
      `/v1/models/${'a'.repeat(10_000)}`,
      '/v2/models/half/infer#frag',
      '/v1/models/ha lf',
      '',
      'x',
    )
    .map((target) => (r: RequestParts) => ({ ...r, target })),
  fc
    .constantFrom(
      'HTTP/1.0',
      'HTTP/2.0',
      'HTTP/1.2',
      'HTTP/9.9',
      'HTTP/1.1 extra',
      '',
      'http/1.1',
      'HTTP/1.1\u0000',
    )
    .map((version) => (r: RequestParts) => ({ ...r, version })),
  hostileHeaderArb.map((h) => (r: RequestParts) => ({ ...r, headers: [...r.headers, h] })),
  fc.nat().map((i) => (r: RequestParts) => ({
    ...r,
    headers: r.headers.filter((_, j) => r.headers.length === 0 || j !== i % r.headers.length),
  })),
  hostileChunkedArb.map((body) => (r: RequestParts) => ({
    ...r,
    headers: [...r.headers.filter((h) => !/^Content-Length/i.test(h)), 'Transfer-Encoding: chunked'],
    body,
  })),
  fc.integer({ min: -8, max: 8 }).map((delta) => (r: RequestParts) => ({
    ...r,
    body: delta < 0 ? r.body.slice(0, delta) : r.body + 'x'.repeat(delta),
  })),
  fc.constantFrom('\n', '\r', '\n\r').map((eol) => (r: RequestParts) => ({ ...r, eol })),
);

const requestArb: fc.Arbitrary<Buffer> = fc
  .tuple(baseArb, fc.array(editArb, { maxLength: 3 }), fc.array(mutationArb, { maxLength: 2 }), fc.boolean())
  .map(([base, edits, mutations, mutateBytes]) => {
    const bytes = render(edits.reduce((r, edit) => edit(r), base));
    return mutateBytes ? Buffer.from(mutate(bytes, mutations)) : bytes;
  });

/** Server errors a client's bytes must never cause; 501/503/505 are refusals, not faults. */
const FAULTS = new Set([500, 502, 504]);

describe('fuzz: HTTP/1.1 framing on the REST listener', () => {
  let server: StartedHttpServer;
  const logs: string[] = [];

  before(async () => {
    const resolve = (spec: ModelSpec): { version: number; signature: Signature } => {
      if (spec.name !== 'half') throw notFound(`Servable not found for request: Latest(${spec.name})`);
      if (spec.version !== undefined && spec.version !== 1) {
        throw notFound(`Servable not found for request: Specific(${spec.name}, ${spec.version})`);
      }
      return { version: 1, signature: HALF };
    };
    const service = fakeInferenceService<ServableAssets>({
      resolve,
      run(req: PredictRequest) {
        validateInputs(HALF, req.inputs);
        validateOutputFilter(HALF, req.outputFilter);
        const x = req.inputs['x']!;
        const y: Tensor = {
          dtype: 'float32',
          shape: x.shape,
          data: (x.data as Float32Array).map((v) => v / 2),
        };
        return Promise.resolve({
          model: { name: 'half', version: 1, signatureName: 'serving_default' },
          outputs: { y },
        });
      },
      status(spec) {
        resolve(spec);
        return [{ version: 1, state: 'AVAILABLE' }];
      },
      modelNames: () => ['half'],
    });
    const logger = createJsonLogger({ level: 'warn', write: (line) => logs.push(line) });
    const kserve = createKServeService({
      modelControl: DEFAULTS.kserveModelControlMode,
      dynamicBatching: DEFAULTS.enableBatching,
      service,
      registry: {
        modelConfig: () => undefined,
        addModel: () => Promise.reject(new Error('not in this test')),
        removeModel: () => Promise.reject(new Error('not in this test')),
      },
      statistics: createInferenceStatistics(),
      serverVersion: '0.0.0',
      maxBatchSize: 0,
      instanceCount: 1,
      logger,
    });
    server = await startHttpServer({
      ...httpServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      headersTimeoutMs: 5_000,
      requestTimeoutMs: 8_000,
      edge: createHttpEdge({
        apis: [
          createTfsRestApi({ service, bodyLimitBytes: 64 * 1024, requestTimeoutMs: 5_000 }),
          createKServeHttpApi({ kserve, bodyLimitBytes: 64 * 1024, requestTimeoutMs: 5_000 }),
        ],
        logger,
        notFoundMessage: (method, path) => `No handler for ${method} ${path}`,
      }),
    });
  });

  after(async () => {
    await server.close(0);
  });

  it(
    'http1-framing/hostile: raw request bytes get well-formed non-fault answers, and the listener keeps serving',
    targetOptions('http1-framing/hostile', 300_000),
    async (t) => {
      const statuses = new Map<string, number>();
      const note = (key: string): void => {
        statuses.set(key, (statuses.get(key) ?? 0) + 1);
      };
      await fuzzAsync(
        t,
        'http1-framing/hostile',
        fc.asyncProperty(
          fc.array(requestArb, { minLength: 1, maxLength: 3 }),
          fc.integer({ min: 1, max: 4 }),
          fc.constantFrom(0, 0, 0, 1, 5),
          async (requests, splits, pauseMs) => {
            const bytes = Buffer.concat(requests);
            const size = Math.ceil(bytes.length / splits);
            const pieces = Array.from({ length: splits }, (_, i) =>
              bytes.subarray(i * size, (i + 1) * size),
            ).filter((p) => p.length > 0);
            const reply = await exchange(server.port, pieces, pauseMs);
            if (reply.hung) throw new Error(`no answer and no close within ${SETTLE_MS} ms`);
            if (reply.statuses.length === 0) note('none');
            for (const status of reply.statuses) {
              note(String(status));
              if (FAULTS.has(status)) {
                throw new Error(
                  `answered ${status}: ${reply.text.slice(0, 400)}\nlog: ${logs.slice(-2).join('\n')}`,
                );
              }
            }
            const health = await exchange(
              server.port,
              [Buffer.from('GET /v1/models/half HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')],
              0,
            );
            if (health.statuses[0] !== 200) {
              throw new Error(`the listener stopped serving: ${health.text.slice(0, 200) || '(nothing)'}`);
            }
          },
        ),
        200,
        () =>
          `; answers ${[...statuses.entries()]
            .sort()
            .map(([s, n]) => `${s}x${n}`)
            .join(' ')}`,
        false,
      );
      const errors = logs.filter((l) => /"level":"error"/.test(l));
      if (errors.length > 0) throw new Error(`error logs: ${errors.slice(0, 3).join('\n')}`);
    },
  );
});
