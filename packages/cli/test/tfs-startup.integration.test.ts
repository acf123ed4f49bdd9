/**
 * Start-up as TF Serving's: the ports open once the initial models are loaded (a client
 * polling from the first moment sees connection errors, then answers, never NOT_FOUND), a
 * fixed port that is taken fails before the load, zero-padded version directories are
 * versions, TF Serving flags with no meaning here are warned about once and ignored, a bad
 * config file is reported in TF Serving's words, and the gRPC APIs answer on the Unix socket
 * of --grpc_socket_path (real `visionserve serve` processes, real sockets).
 */
import { before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdir, writeFile } from 'node:fs/promises';
import { connect as connectHttp2 } from 'node:http2';
import { createConnection, createServer as createNetServer } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import {
  PredictRequestSchema,
  PredictResponseSchema,
  tensorFromProto,
  tensorToProto,
} from '@visionserve/protocol/tfs-proto';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { CLI, type ServerProcess, startServerProcess } from './helpers/server-process.js';
import { sharedModel } from './helpers/shared.js';

const run = promisify(execFile);

async function freePort(): Promise<number> {
  const server = createNetServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function stop(server: ServerProcess): Promise<void> {
  server.child.kill('SIGTERM');
  await server.exited;
}

/** One gRPC Predict over node:http2 on a Unix domain socket (the client package speaks TCP only). */
async function predictOverUnixSocket(path: string, x: number[]): Promise<number[]> {
  const request = create(PredictRequestSchema, {
    modelSpec: { name: 'half' },
    inputs: {
      x: tensorToProto(
        { dtype: 'float32', shape: [x.length], data: Float32Array.from(x) },
        { asTensorContent: false },
      ),
    },
  });
  const body = toBinary(PredictRequestSchema, request);
  const framed = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), body]);
  framed.writeUInt32BE(body.length, 1);
  const session = connectHttp2('http://localhost', { createConnection: () => createConnection(path) });
  try {
    const stream = session.request({
      ':method': 'POST',
      ':path': '/tensorflow.serving.PredictionService/Predict',
      'content-type': 'application/grpc',
      te: 'trailers',
    });
    const chunks: Buffer[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c));
    const trailers = new Promise<Record<string, unknown>>((resolve) => stream.on('trailers', resolve));
    stream.end(framed);
    await new Promise((resolve) => stream.on('end', resolve));
    assert.equal((await trailers)['grpc-status'], '0');
    const message = Buffer.concat(chunks).subarray(5);
    const response = fromBinary(PredictResponseSchema, message);
    return Array.from(tensorFromProto(response.outputs['y']!, 'y').data as Float32Array);
  } finally {
    session.close();
  }
}

describe('start-up as TF Serving', () => {
  let root: string;
  before(async () => {
    root = await tempRepo('vs-tfs-startup-');
    await placeModel(root, 'mobilenet', 1, sharedModel('mobilenetv2-12-int8.onnx'));
    // TF Serving's testdata layout: <base>/00000123; names that are not numbers are ignored.
    await placeModel(root, 'half', '00000123', halfPlusTwoModel());
    await placeModel(root, 'half', 'v2', halfPlusTwoModel());
    await writeFile(
      join(root, 'models.config'),
      `model_config_list {
        config { name: 'mobilenet' base_path: 'mobilenet' }
        config { name: 'half' base_path: 'half' }
      }`,
    );
  });

  it('opens the ports once the initial models are in: before that, connection errors, never NOT_FOUND', async () => {
    const rest = await freePort();
    const starting = startServerProcess([
      `--model_config_file=${join(root, 'models.config')}`,
      `--rest_api_port=${rest}`,
    ]);
    const answers: (number | string)[] = [];
    let server: ServerProcess | undefined;
    void starting.then((s) => (server = s));
    // Poll from the first moment until the first HTTP answer (and a little after).
    while (answers.filter((a) => typeof a === 'number').length < 3) {
      try {
        const res = await fetch(`http://127.0.0.1:${rest}/v1/models/mobilenet/metadata`);
        answers.push(res.status);
        await res.arrayBuffer();
      } catch (error) {
        answers.push(String((error as { cause?: { code?: string } }).cause?.code ?? error));
        if (server === undefined) await new Promise((resolve) => setTimeout(resolve, 10));
        else await new Promise((resolve) => setImmediate(resolve));
      }
    }
    server ??= await starting;
    try {
      assert.ok(answers.includes('ECONNREFUSED'), `the port was closed during the load: ${answers.join()}`);
      const statuses = answers.filter((a): a is number => typeof a === 'number');
      assert.deepEqual(new Set(statuses), new Set([200]), answers.join());
      const out = server.output();
      assert.ok(out.indexOf('"Servable version available"') < out.indexOf('"grpc server listening"'));
    } finally {
      await stop(server);
    }
  });

  it('reads <base>/00000123 as version 123 and serves it from that directory', async () => {
    const server = await startServerProcess([`--model_config_file=${join(root, 'models.config')}`]);
    try {
      const res = await fetch(`http://127.0.0.1:${server.ports.rest!}/v1/models/half`);
      assert.deepEqual(await res.json(), {
        model_version_status: [
          { version: '123', state: 'AVAILABLE', status: { error_code: 'OK', error_message: '' } },
        ],
      });
      const predict = await fetch(
        `http://127.0.0.1:${server.ports.rest!}/v1/models/half/versions/123:predict`,
        {
          method: 'POST',
          body: '{"instances": [1.0, 6.0]}',
        },
      );
      assert.deepEqual(await predict.json(), { predictions: [2.5, 5] });
      assert.match(server.output(), /"path":"[^"]*\/half\/00000123"/);
    } finally {
      await stop(server);
    }
  });

  it('a fixed port that is taken fails at once, before any model loads', async () => {
    const blocker = createNetServer();
    const port = await new Promise<number>((resolve) => {
      blocker.listen(0, '127.0.0.1', () => {
        resolve((blocker.address() as { port: number }).port);
      });
    });
    try {
      const failed = await run(process.execPath, [
        CLI,
        'serve',
        '--host=127.0.0.1',
        '--port=0',
        `--rest_api_port=${port}`,
        '--sagemaker_port=-1',
        `--model_config_file=${join(root, 'models.config')}`,
      ]).then(
        () => assert.fail('the server started on a taken port'),
        (e: unknown) => e as { code: number; stderr: string },
      );
      assert.equal(failed.code, 2);
      assert.match(failed.stderr, new RegExp(`--rest_api_port=${port}: the port is already in use`));
      assert.doesNotMatch(failed.stderr, /Loading servable version/);
    } finally {
      blocker.close();
    }
  });

  it("accepts TF Serving's main.cc flags that mean nothing here, warns once each, and serves", async () => {
    const ignored = [
      '--num_load_threads=4',
      '--enable_profiler',
      '--saved_model_tags',
      'serve',
      '--num_load_threads=8',
    ];
    const server = await startServerProcess([
      `--model_config_file=${join(root, 'models.config')}`,
      ...ignored,
    ]);
    try {
      const out = server.output();
      assert.equal(
        out.split('--num_load_threads: a TF Serving flag with no effect here, ignored').length - 1,
        1,
      );
      assert.equal(out.split('--enable_profiler: a TF Serving flag with no effect here').length - 1, 1);
      assert.match(out, /"flag":"saved_model_tags=serve"/);
      const res = await fetch(`http://127.0.0.1:${server.ports.rest!}/v1/models/half`);
      assert.equal(res.status, 200);
    } finally {
      await stop(server);
    }
  });

  it("--version prints the version and exits 0, as tensorflow_model_server's", async () => {
    const { stdout } = await run(process.execPath, [CLI, 'serve', '--version']);
    assert.match(stdout, /^visionserve \(TensorFlow ModelServer compatible\): \d+\.\d+\.\d+/);
  });

  it("reports a bad config file in TF Serving's words", async () => {
    const bad = join(root, 'bad.config');
    await writeFile(bad, "model_config_list {\n  config { name 'a' }\n}\n");
    const failed = await run(process.execPath, [
      CLI,
      'serve',
      '--host=127.0.0.1',
      '--port=0',
      '--rest_api_port=0',
      '--sagemaker_port=-1',
      `--model_config_file=${bad}`,
    ]).then(
      () => assert.fail('started on a bad config file'),
      (e: unknown) => e as { code: number; stderr: string },
    );
    assert.notEqual(failed.code, 0);
    assert.match(failed.stderr, /Error parsing text-format tensorflow\.serving\.ModelServerConfig: 2:17: /);
    assert.ok(failed.stderr.includes(`Invalid protobuf file: '${bad}'`), failed.stderr);
  });

  for (const transport of ['lean', 'node']) {
    it(`serves gRPC on --grpc_socket_path beside the TCP port (${transport} transport), and removes the socket on exit`, async () => {
      const path = join(root, `grpc-${transport}.sock`);
      const server = await startServerProcess([
        `--model_config_file=${join(root, 'models.config')}`,
        `--grpc_socket_path=${path}`,
        `--grpc_transport=${transport}`,
      ]);
      try {
        assert.deepEqual(await predictOverUnixSocket(path, [1, 6]), [2.5, 5]);
      } finally {
        await stop(server);
      }
      assert.ok(!(await readdir(root)).includes(`grpc-${transport}.sock`));
    });
  }
});
