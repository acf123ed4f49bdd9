/**
 * The smaller edges of issue 31 (item 8) against the real server over real sockets: the next
 * request on a keep-alive connection after a refused body, the console API's malformed names
 * and base paths, a corrupt model's load error, gRPC-web's expired deadline, and failed
 * requests in the access log by default.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { create, toBinary } from '@bufbuild/protobuf';
import { PredictRequestSchema, tensorToProto } from '@visionserve/protocol/tfs-proto';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { type ServerProcess, startServerProcess } from './helpers/server-process.js';

/** Writes `requests` on one connection, the next once the previous answer's head is in; the heads and the close. */
function onOneConnection(port: number, requests: readonly Buffer[]): Promise<string[]> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    let sent = 0;
    // Status lines and Connection headers in order (a body without a line end runs into the next status line).
    const heads = (): string[] => text.match(/HTTP\/1\.1 \d+[^\r]*|Connection: [^\r]*/g) ?? [];
    const next = (): void => {
      if (sent < requests.length) socket.write(requests[sent++]!);
    };
    socket.on('connect', next);
    socket.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      if (heads().filter((h) => h.startsWith('HTTP')).length === sent) next();
    });
    socket.on('error', (e: NodeJS.ErrnoException) => {
      text += `\r\n[${e.code ?? 'error'}]`;
    });
    socket.on('close', () => {
      resolve([...heads(), ...(text.includes('[ECONNRESET]') ? ['reset'] : [])]);
    });
    setTimeout(() => socket.end(), 3000).unref();
  });
}

function get(
  port: number,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    httpRequest({ host: '127.0.0.1', port, path, headers, agent: false }, (res) => {
      let body = '';
      res.on('data', (d: Buffer) => (body += d.toString()));
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, body });
      });
    })
      .on('error', reject)
      .end();
  });
}

function post(port: number, path: string, body: Buffer | string, headers: Record<string, string> = {}) {
  return new Promise<{ status: number; body: Buffer; headers: Record<string, unknown> }>(
    (resolve, reject) => {
      const req = httpRequest(
        {
          host: '127.0.0.1',
          port,
          path,
          method: 'POST',
          agent: false,
          headers: { 'Content-Length': String(body.length), ...headers },
        },
        (res) => {
          const parts: Buffer[] = [];
          res.on('data', (d: Buffer) => parts.push(d));
          res.on('end', () => {
            resolve({ status: res.statusCode ?? 0, body: Buffer.concat(parts), headers: res.headers });
          });
        },
      );
      req.on('error', reject);
      req.end(body);
    },
  );
}

describe('small edges (real server)', () => {
  let server: ServerProcess;
  let rest: number;
  let sagemaker: number;
  let root: string;

  before(async () => {
    root = await tempRepo();
    await placeModel(root, 'half_plus_two', 1, halfPlusTwoModel());
    // A model file cut short: onnxruntime cannot parse it.
    const whole = halfPlusTwoModel();
    await placeModel(root, 'corrupt', 1, whole.subarray(0, Math.floor(whole.length / 2)));
    const token = join(root, 'admin-token');
    await writeFile(token, 'sesame\n');
    const config = join(root, 'models.config');
    await writeFile(
      config,
      `model_config_list {\n config { name: 'half_plus_two' base_path: '${join(root, 'half_plus_two')}' model_platform: 'tensorflow' }\n}\n`,
    );
    server = await startServerProcess([
      `--model_config_file=${config}`,
      `--model_roots=${root}`,
      '--kserve_model_control_mode=explicit',
      '--sagemaker_port=0',
      '--sagemaker_multi_model=true',
      `--admin_token_file=${token}`,
    ]);
    rest = server.ports.rest!;
    sagemaker = server.ports.sagemaker!;
  });
  after(() => {
    server?.child.kill('SIGKILL');
  });

  it('answers the next request on a keep-alive connection after a 405 or 415 to a request with a body', async () => {
    const status = Buffer.from(
      'GET /v1/models/half_plus_two HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n',
    );
    const body = Buffer.alloc(200_000, 0x78);
    const withBody = (head: string): Buffer =>
      Buffer.concat([Buffer.from(`${head}\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n`), body]);
    // 405 from the edge (a KServe path that takes GET) and from the KServe API's own router.
    for (const head of ['POST /v2/health/live HTTP/1.1', 'PUT /v2/models/half_plus_two/infer HTTP/1.1']) {
      const heads = await onOneConnection(rest, [
        withBody(`${head}\r\nContent-Type: application/json`),
        status,
      ]);
      assert.deepEqual(
        heads.slice(0, 4),
        ['HTTP/1.1 405 Method Not Allowed', 'Connection: keep-alive', 'HTTP/1.1 200 OK', 'Connection: close'],
        head,
      );
    }
    // 415 on /invocations.
    const sm = Buffer.from('GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n');
    const heads = await onOneConnection(sagemaker, [
      withBody(
        'POST /invocations HTTP/1.1\r\nContent-Type: text/weird\r\nX-Amzn-SageMaker-Custom-Attributes: tfs-model-name=half_plus_two',
      ),
      sm,
    ]);
    assert.deepEqual(heads.slice(0, 3), [
      'HTTP/1.1 415 Unsupported Media Type',
      'Connection: keep-alive',
      'HTTP/1.1 200 OK',
    ]);
    // A chunked body never ended: answered with Connection: close (not drained forever).
    const chunked = await onOneConnection(rest, [
      Buffer.from(
        'POST /v2/health/live HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123456789abcdef\r\n',
      ),
    ]);
    assert.deepEqual(chunked.slice(0, 2), ['HTTP/1.1 405 Method Not Allowed', 'Connection: close']);
  });

  it('console API: 400 for a malformed percent-encoding, base paths only with the admin token', async () => {
    const bad = await get(rest, '/console/api/labels/%ZZ/1');
    assert.equal(bad.status, 400, bad.body);
    assert.match(bad.body, /Malformed percent-encoding/);
    const anyone = JSON.parse((await get(rest, '/console/api/models')).body) as {
      models: { basePath: unknown }[];
    };
    assert.ok(anyone.models.length > 0);
    for (const m of anyone.models) assert.equal(m.basePath, null);
    assert.ok(!JSON.stringify(anyone).includes(root));
    const admin = JSON.parse(
      (await get(rest, '/console/api/models', { Authorization: 'Bearer sesame' })).body,
    ) as { models: { name: string; basePath: unknown }[] };
    assert.equal(admin.models.find((m) => m.name === 'half_plus_two')!.basePath, join(root, 'half_plus_two'));
  });

  it("a corrupt model's load is refused without host paths (KServe: 400 FAILED_PRECONDITION), and requests to it get 4xx", async () => {
    const auth = { Authorization: 'Bearer sesame', 'Content-Type': 'application/json' };
    const kserve = await post(rest, '/v2/repository/models/corrupt/load', '{}', auth);
    assert.equal(kserve.status, 400, kserve.body.toString());
    assert.match(kserve.body.toString(), /failed to load 'corrupt'.*Protobuf parsing failed/);
    const mme = await post(
      sagemaker,
      '/models',
      JSON.stringify({ model_name: 'corrupt2', url: join(root, 'corrupt') }),
      auth,
    );
    // The SageMaker container answers a failed load 500; without host paths too.
    assert.equal(mme.status, 500, mme.body.toString());
    for (const answer of [kserve.body.toString(), mme.body.toString()]) {
      assert.ok(!answer.includes(root), answer);
      assert.ok(!/(^|[\s:'"])\/[\w.-]+\//.test(answer), `a host path in: ${answer}`);
    }
    // A request to it: 4xx, never 500.
    const predict = await post(rest, '/v1/models/corrupt:predict', '{"instances":[1]}');
    assert.ok(predict.status >= 400 && predict.status < 500, `${predict.status} ${predict.body.toString()}`);
  });

  it('gRPC-web: an expired deadline is grpc-status 4, in an HTTP 200', async () => {
    const request = create(PredictRequestSchema, { modelSpec: { name: 'half_plus_two' } });
    request.inputs['x'] = tensorToProto(
      { dtype: 'float32', shape: [3], data: new Float32Array([1, 2, 5]) },
      { asTensorContent: false },
    );
    const message = toBinary(PredictRequestSchema, request);
    const frame = Buffer.alloc(5 + message.length);
    frame.writeUInt32BE(message.length, 1);
    frame.set(message, 5);
    const path = '/tensorflow.serving.PredictionService/Predict';
    // Many at once with a deadline that has passed on arrival or soon after, while the model is busy.
    const answers = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        post(rest, path, frame, {
          'Content-Type': 'application/grpc-web+proto',
          'grpc-timeout': i % 2 === 0 ? '1n' : '2m',
        }),
      ),
    );
    for (const [i, a] of answers.entries()) {
      assert.equal(a.status, 200, a.body.toString());
      const trailer = a.body.toString('latin1');
      const header = a.headers['grpc-status'];
      const status =
        typeof header === 'string' ? header : (/grpc-status:\s*(\d+)/.exec(trailer)?.[1] ?? 'none');
      // Expired on arrival: DEADLINE_EXCEEDED. 2 ms: answered, past it (4), or refused as one
      // that cannot finish in time (UNAVAILABLE, as the gRPC port answers).
      if (i % 2 === 0) assert.equal(status, '4', trailer);
      else assert.ok(['0', '4', '14'].includes(status), `grpc-status ${status}`);
    }
  });

  it('failed requests (400, 404, 415) are in the access log at the default settings', async () => {
    const id = `edge-${Date.now()}`;
    await post(rest, '/v1/models/half_plus_two:predict', 'not json', { 'x-request-id': `${id}-400` });
    await get(rest, '/v1/models/nope', { 'x-request-id': `${id}-404` });
    await post(sagemaker, '/invocations', 'x', {
      'Content-Type': 'text/weird',
      'x-request-id': `${id}-415`,
      'X-Amzn-SageMaker-Custom-Attributes': 'tfs-model-name=half_plus_two',
    });
    await new Promise((r) => setTimeout(r, 300));
    const lines = server
      .output()
      .split('\n')
      .filter((l) => l.includes('"msg":"access"') && l.includes(id))
      .map((l) => JSON.parse(l) as { requestId: string; status: string });
    assert.deepEqual(lines.map((l) => [l.requestId, l.status]).sort(), [
      [`${id}-400`, '400'],
      [`${id}-404`, '404'],
      [`${id}-415`, '415'],
    ]);
  });
});
