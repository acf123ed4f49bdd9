/**
 * TLS on every listener from TF Serving's SSLConfig: curl with --cacert on the REST and
 * SageMaker ports, gRPC over TLS, plaintext refused, mutual TLS with client_verify, a
 * rotated certificate served without restart, and the management guard by client identity.
 * Our client library over TLS on every protocol, with a private CA and a client certificate.
 * (The stock Python gRPC client over TLS is in compat/tfserving/test_tls.py.)
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { createPrivateKey } from 'node:crypto';
import { copyFile, readFile, writeFile } from 'node:fs/promises';
import { connect, createSecureServer } from 'node:http2';
import {
  type Server,
  type TLSSocket,
  connect as tlsConnect,
  createServer as createTlsServer,
} from 'node:tls';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { promisify } from 'node:util';
import {
  type ClientTlsOptions,
  Code,
  ServingError,
  createInvocationsClient,
  createKServeGrpcClient,
  createKServeHttpClient,
  createTfsGrpcClient,
  createTfsRestClient,
  tensor,
} from '@visionserve/client';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { startHarness, type Harness } from './helpers/server-harness.js';
import { REPO_ROOT } from './helpers/shared.js';
import { type TestCerts, makeTestCerts } from '../src/tools/test-certs.js';

const run = promisify(execFile);

async function curl(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run('curl', ['-sS', '--max-time', '10', ...args]);
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

/**
 * `visionserve predict` on the half_plus_two test model's JSON input, with mutual TLS: `args`
 * name the addresses (and any other flag), `tls` the CA, certificate and key files.
 */
function predictHalf(
  input: string,
  args: string[],
  tls: { ca: string; cert: string; key: string },
): Promise<{ stdout: string; stderr: string }> {
  return run(
    process.execPath,
    [
      join(REPO_ROOT, 'packages', 'cli', 'bin', 'visionserve.js'),
      'predict',
      input,
      ...args,
      '--model',
      'half',
      '--task',
      'raw',
      '--json',
      '--ca',
      tls.ca,
      '--cert',
      tls.cert,
      '--key',
      tls.key,
    ],
    { encoding: 'utf8', timeout: 60_000 },
  );
}

/** The serial number of the certificate a TLS listener presents now. */
function servedSerial(port: number, ca: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect(
      { host: '127.0.0.1', port, ca, servername: 'localhost', ALPNProtocols: ['h2', 'http/1.1'] },
      () => {
        const serial = socket.getPeerCertificate().serialNumber;
        socket.end();
        resolve(serial);
      },
    );
    socket.on('error', reject);
  });
}

/** One gRPC call's status over TLS with node:http2 (a gRPC client needs no more for a status check). */
function grpcStatus(
  port: number,
  tls: { ca: string; key?: string; cert?: string },
  path: string,
  metadata = {},
): Promise<string> {
  return new Promise((resolve, reject) => {
    const session = connect(`https://127.0.0.1:${port}`, { ...tls, servername: 'localhost' });
    session.on('error', reject);
    const stream = session.request({
      ':method': 'POST',
      ':path': path,
      'content-type': 'application/grpc',
      te: 'trailers',
      ...metadata,
    });
    let status: string | undefined;
    stream.on('response', (headers) => {
      const value: string | string[] | undefined = headers['grpc-status'];
      if (value !== undefined) status = String(value);
    });
    stream.on('trailers', (trailers: Record<string, string | string[] | undefined>) => {
      status = String(trailers['grpc-status']);
    });
    stream.on('error', reject);
    stream.on('close', () => {
      session.close();
      resolve(status ?? 'none');
    });
    stream.resume();
    // An empty ReloadConfigRequest / GetModelStatusRequest message.
    stream.end(Buffer.from([0, 0, 0, 0, 0]));
  });
}

/** half_plus_two's answer to `x`, computed as float32 like the model. */
function halfPlusTwo(x: Float32Array): Float32Array {
  return x.map((v) => Math.fround(Math.fround(v * 0.5) + 2));
}

/** `n` float32 values that are not all alike. */
function ramp(n: number): Float32Array {
  return Float32Array.from({ length: n }, (_, i) => (i % 1000) - 500 + i / n);
}

function isCode(code: Code): (error: unknown) => boolean {
  return (error) => {
    assert.ok(error instanceof ServingError, String(error));
    assert.equal(error.code, code, error.message);
    return true;
  };
}

/**
 * Every client of the library against the TLS listeners with `tls`: TF Serving gRPC (both
 * HTTP/2 implementations) and REST, KServe gRPC and HTTP (binary, 8 MB each way), /invocations.
 */
async function everyClientAnswers(
  ports: { grpc: number; rest: number; sagemaker?: number },
  tls: ClientTlsOptions,
): Promise<void> {
  const big = ramp(2 * 1024 * 1024);
  const small = Float32Array.from([1, 2, 3]);
  for (const transport of ['lean', 'node'] as const) {
    const grpc = createTfsGrpcClient({ address: `https://localhost:${ports.grpc}`, tls, transport });
    try {
      const r = await grpc.predict('half', { x: tensor(big) }, { encoding: 'tensor_content' });
      assert.deepEqual(r.outputs.y!.data, halfPlusTwo(big), transport);
    } finally {
      grpc.close();
    }
  }
  // "host:port" with TLS options is TLS too.
  const kgrpc = createKServeGrpcClient({ address: `127.0.0.1:${ports.grpc}`, tls });
  try {
    const r = await kgrpc.infer({ name: 'half' }, { x: tensor(big) });
    assert.deepEqual(r.outputs.y!.data, halfPlusTwo(big));
  } finally {
    kgrpc.close();
  }
  const rest = createTfsRestClient({ baseUrl: `https://127.0.0.1:${ports.rest}`, tls });
  const khttp = createKServeHttpClient({ baseUrl: `https://localhost:${ports.rest}`, tls });
  try {
    const r = await rest.predict('half', { x: tensor(small) });
    assert.deepEqual(r.outputs.y!.data, halfPlusTwo(small));
    // Twice: the second call reuses the kept-alive TLS connection.
    for (let i = 0; i < 2; i++) {
      const k = await khttp.infer({ name: 'half' }, { x: tensor(big) });
      assert.deepEqual(k.outputs.y!.data, halfPlusTwo(big));
    }
  } finally {
    rest.close();
    khttp.close();
  }
  if (ports.sagemaker !== undefined) {
    const sm = createInvocationsClient({ baseUrl: `https://127.0.0.1:${ports.sagemaker}`, tls });
    try {
      const answer = (await sm.invoke({ instances: [1, 2] })).json();
      assert.deepEqual(answer, { predictions: [2.5, 3] });
    } finally {
      sm.close();
    }
  }
}

describe('TLS on every listener (server certificate only)', () => {
  let h: Harness;
  let dir: string;
  let certs: TestCerts;
  let sslConfig: string;
  before(async () => {
    dir = await tempRepo('vs-tls-');
    certs = await makeTestCerts(dir, 'a-');
    const base = await placeModel(dir, 'half', 1, halfPlusTwoModel());
    // Paths instead of inline PEM (both are accepted), so that the files can be rotated.
    await copyFile(certs.serverKey, join(dir, 'live.key'));
    await copyFile(certs.serverCert, join(dir, 'live.pem'));
    sslConfig = join(dir, 'ssl.config');
    await writeFile(sslConfig, 'server_key: "live.key"\nserver_cert: "live.pem"\nclient_verify: false\n');
    h = await startHarness({
      modelName: 'half',
      modelBasePath: base,
      sagemakerPort: 0,
      sslConfigFile: sslConfig,
      sslConfigPollSeconds: 0,
    });
  });
  after(() => h.close());

  const restPort = (): number => h.server.ports.rest!;
  const smPort = (): number => h.server.ports.sagemaker!;

  it('curl --cacert works on the REST and SageMaker ports; plaintext is refused', async () => {
    const body = ['-H', 'Content-Type: application/json', '-d', '{"instances": [1.0, 2.0, 5.0]}'];
    const rest = await curl([
      '--cacert',
      certs.ca,
      ...body,
      `https://127.0.0.1:${restPort()}/v1/models/half:predict`,
    ]);
    assert.equal(rest.code, 0, rest.stderr);
    assert.deepEqual((JSON.parse(rest.stdout) as { predictions: number[] }).predictions, [2.5, 3, 4.5]);
    const sm = await curl(['--cacert', certs.ca, ...body, `https://localhost:${smPort()}/invocations`]);
    assert.equal(sm.code, 0, sm.stderr);
    assert.match(sm.stdout, /predictions/);
    assert.equal(
      (await curl(['--cacert', certs.ca, `https://127.0.0.1:${restPort()}/readyz`])).stdout,
      '{"status":"ready"}',
    );
    // Plaintext HTTP on a TLS port, and TLS without trusting the CA, fail.
    assert.notEqual((await curl([`http://127.0.0.1:${restPort()}/readyz`])).code, 0);
    assert.notEqual((await curl([`https://127.0.0.1:${smPort()}/ping`])).code, 0);
  });

  it('gRPC over TLS answers; a plaintext gRPC client is refused', async () => {
    assert.equal(
      await grpcStatus(
        h.server.ports.grpc!,
        { ca: await readFile(certs.ca, 'utf8') },
        '/tensorflow.serving.ModelService/GetModelStatus',
      ),
      '3',
    );
    await assert.rejects(h.grpc.unary('/tensorflow.serving.ModelService/GetModelStatus', new Uint8Array()));
  });

  it('the client library speaks TLS on every protocol, trusting the private CA', async () => {
    const ca = await readFile(certs.ca, 'utf8');
    await everyClientAnswers({ grpc: h.server.ports.grpc!, rest: restPort(), sagemaker: smPort() }, { ca });
  });

  it('the client library refuses certificates it cannot verify, and TLS options on http://', async () => {
    const other = await makeTestCerts(dir, 'o-');
    const wrongCa = { ca: await readFile(other.ca, 'utf8') };
    const grpcPort = h.server.ports.grpc!;
    for (const transport of ['lean', 'node'] as const) {
      const grpc = createTfsGrpcClient({ address: `https://127.0.0.1:${grpcPort}`, tls: wrongCa, transport });
      await assert.rejects(grpc.getModelStatus('half'), isCode(Code.UNAVAILABLE));
      grpc.close();
    }
    const cases: [string, ClientTlsOptions | undefined, RegExp][] = [
      ['a CA that did not sign it', wrongCa, /certificate/],
      // Node's public roots do not know the test CA.
      ['no CA given', undefined, /certificate/],
      // The certificate names localhost and 127.0.0.1 only.
      [
        'another name',
        { ca: await readFile(certs.ca, 'utf8'), servername: 'other.example' },
        /other\.example/,
      ],
    ];
    for (const [what, tls, message] of cases) {
      const rest = createTfsRestClient({
        baseUrl: `https://127.0.0.1:${restPort()}`,
        ...(tls ? { tls } : {}),
      });
      await assert.rejects(rest.getModelStatus('half'), (error) => {
        isCode(Code.UNAVAILABLE)(error);
        assert.match((error as Error).message, message, what);
        return true;
      });
      rest.close();
    }
    // TLS options with a plaintext URL are a mistake, not a silent plaintext connection.
    assert.throws(
      () => createTfsRestClient({ baseUrl: `http://127.0.0.1:${restPort()}`, tls: wrongCa }),
      isCode(Code.INVALID_ARGUMENT),
    );
    for (const transport of ['lean', 'node'] as const)
      assert.throws(
        () => createTfsGrpcClient({ address: `http://127.0.0.1:${grpcPort}`, tls: wrongCa, transport }),
        isCode(Code.INVALID_ARGUMENT),
      );
  });

  it('the client library fails clearly when a TLS server does not agree to HTTP/2, sending it nothing', async () => {
    let received: Buffer[] = [];
    const server = createTlsServer({
      key: await readFile(certs.serverKey),
      cert: await readFile(certs.serverCert),
      // No ALPN at all (a server that offers only http/1.1 ends the handshake itself).
    });
    server.on('secureConnection', (socket) => {
      socket.on('data', (bytes: Buffer) => {
        received.push(bytes);
      });
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    try {
      for (const transport of ['lean', 'node'] as const) {
        received = [];
        const grpc = createTfsGrpcClient({
          address: `https://127.0.0.1:${port}`,
          tls: { ca: await readFile(certs.ca) },
          transport,
          metadata: { authorization: 'Bearer secret' },
        });
        try {
          await assert.rejects(grpc.getModelStatus('half', { timeoutMs: 5000 }), (error) => {
            isCode(Code.UNAVAILABLE)(error);
            assert.match((error as Error).message, /did not accept h2/, transport);
            return true;
          });
        } finally {
          grpc.close();
        }
        // Give any stray bytes time to arrive: the request (and its credentials) never left.
        await new Promise((resolve) => setTimeout(resolve, 200));
        const bytes = Buffer.concat(received);
        if (transport === 'lean') {
          assert.equal(bytes.length, 0, 'nothing at all');
        } else {
          // node:http2 sends its preface and SETTINGS before it lets us check ALPN: no HEADERS.
          assert.ok(bytes.subarray(0, 24).toString('latin1').startsWith('PRI * HTTP/2.0'));
          for (let at = 24; at + 9 <= bytes.length; at += 9 + bytes.readUIntBE(at, 3)) {
            assert.notEqual(bytes[at + 3], 1, 'a HEADERS frame left');
          }
        }
      }
    } finally {
      server.close();
    }
  });

  it('the client library checks the server name over gRPC too', async () => {
    const ca = await readFile(certs.ca, 'utf8');
    for (const transport of ['lean', 'node'] as const) {
      const grpc = createTfsGrpcClient({
        address: `https://127.0.0.1:${h.server.ports.grpc!}`,
        tls: { ca, servername: 'other.example' },
        transport,
      });
      await assert.rejects(grpc.getModelStatus('half', { timeoutMs: 5000 }), (error) => {
        isCode(Code.UNAVAILABLE)(error);
        assert.match((error as Error).message, /other\.example/, transport);
        return true;
      });
      grpc.close();
    }
  });

  it('the client library resumes TLS sessions on its new connections', async () => {
    const key = await readFile(certs.serverKey);
    const cert = await readFile(certs.serverCert);
    const ca = await readFile(certs.ca, 'utf8');
    const listen = async (server: Server): Promise<number> => {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return (server.address() as AddressInfo).port;
    };
    // HTTP/1.1: every answer closes its connection, so every call opens a new one.
    const h1Reused: boolean[] = [];
    const h1 = createTlsServer({ key, cert }, (socket) => {
      h1Reused.push(socket.isSessionReused());
      socket.on('error', () => undefined);
      socket.once('data', () => {
        const body = '{"model_version_status":[]}';
        socket.end(
          `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`,
        );
      });
    });
    // HTTP/2: the server ends each connection after one answer (GOAWAY), so each call opens a new one.
    const h2Reused: boolean[] = [];
    const h2 = createSecureServer({ key, cert });
    h2.on('secureConnection', (socket: TLSSocket) => {
      h2Reused.push(socket.isSessionReused());
    });
    h2.on('stream', (stream) => {
      stream.respond(
        { ':status': 200, 'content-type': 'application/grpc', 'grpc-status': '12' },
        { endStream: true },
      );
      stream.session?.close();
    });
    const h1Port = await listen(h1);
    const h2Port = await listen(h2);
    const rest = createTfsRestClient({ baseUrl: `https://127.0.0.1:${h1Port}`, tls: { ca } });
    const grpc = createTfsGrpcClient({ address: `https://127.0.0.1:${h2Port}`, tls: { ca } });
    try {
      for (let i = 0; i < 3; i++) {
        await rest.getModelStatus('m');
        await assert.rejects(grpc.getModelStatus('m'), isCode(Code.UNIMPLEMENTED));
      }
      assert.deepEqual(h1Reused, [false, true, true]);
      assert.deepEqual(h2Reused, [false, true, true]);
    } finally {
      rest.close();
      grpc.close();
      h1.close();
      h2.close();
    }
  });

  it('a rotated certificate is served without restart', async () => {
    const ca = await readFile(certs.ca, 'utf8');
    const before = await servedSerial(restPort(), ca);
    const next = await makeTestCerts(dir, 'b-');
    // Same names, new CA: rotate both files (a secret volume update does this).
    await copyFile(next.serverKey, join(dir, 'live.key'));
    await copyFile(next.serverCert, join(dir, 'live.pem'));
    assert.equal(await h.server.reloadTls(), true);
    const nextCa = await readFile(next.ca, 'utf8');
    for (const port of [restPort(), smPort(), h.server.ports.grpc!]) {
      const serial = await servedSerial(port, nextCa);
      assert.notEqual(serial, before);
    }
    const rest = await curl(['--cacert', next.ca, `https://127.0.0.1:${restPort()}/healthz`]);
    assert.equal(rest.code, 0, rest.stderr);
    // A broken file keeps the current certificate.
    await writeFile(join(dir, 'live.pem'), 'not a certificate');
    assert.equal(await h.server.reloadTls(), false);
    assert.equal((await curl(['--cacert', next.ca, `https://127.0.0.1:${restPort()}/healthz`])).code, 0);
  });
});

describe('mutual TLS (client_verify) and the management guard by client identity', () => {
  let h: Harness;
  let certs: TestCerts;
  let stranger: TestCerts;
  before(async () => {
    const dir = await tempRepo('vs-mtls-');
    certs = await makeTestCerts(dir, 'm-', 'admin-client');
    stranger = await makeTestCerts(dir, 's-', 'someone');
    const base = await placeModel(dir, 'half', 1, halfPlusTwoModel());
    const pem = async (file: string): Promise<string> => JSON.stringify(await readFile(file, 'utf8'));
    const sslConfig = join(dir, 'ssl.config');
    // TF Serving's form: PEM text inline. The CA bundle trusts both client CAs.
    const bundle = join(dir, 'bundle.pem');
    await writeFile(bundle, (await readFile(certs.ca, 'utf8')) + (await readFile(stranger.ca, 'utf8')));
    await writeFile(
      sslConfig,
      `server_key: ${await pem(certs.serverKey)}\nserver_cert: ${await pem(certs.serverCert)}\ncustom_ca: ${await pem(bundle)}\nclient_verify: true\n`,
    );
    h = await startHarness({
      modelName: 'half',
      modelBasePath: base,
      sslConfigFile: sslConfig,
      adminClientNames: ['admin-client'],
    });
  });
  after(() => h.close());

  it('refuses clients without a certificate and accepts those with one', async () => {
    const restUrl = `https://127.0.0.1:${h.server.ports.rest!}/v1/models/half`;
    assert.notEqual((await curl(['--cacert', certs.ca, restUrl])).code, 0);
    const ok = await curl([
      '--cacert',
      certs.ca,
      '--cert',
      certs.clientCert,
      '--key',
      certs.clientKey,
      restUrl,
    ]);
    assert.equal(ok.code, 0, ok.stderr);
    assert.match(ok.stdout, /AVAILABLE/);
  });

  it('the client library presents a client certificate when the server asks for one', async () => {
    const ca = await readFile(certs.ca, 'utf8');
    const ports = { grpc: h.server.ports.grpc!, rest: h.server.ports.rest! };
    await everyClientAnswers(ports, {
      ca,
      cert: await readFile(certs.clientCert, 'utf8'),
      key: await readFile(certs.clientKey, 'utf8'),
    });
    // Without one the server ends the handshake.
    const grpc = createTfsGrpcClient({ address: `https://127.0.0.1:${ports.grpc}`, tls: { ca } });
    const rest = createTfsRestClient({ baseUrl: `https://127.0.0.1:${ports.rest}`, tls: { ca } });
    try {
      await assert.rejects(grpc.getModelStatus('half'), isCode(Code.UNAVAILABLE));
      await assert.rejects(rest.getModelStatus('half'), isCode(Code.UNAVAILABLE));
    } finally {
      grpc.close();
      rest.close();
    }
  });

  it('visionserve predict takes --ca, --cert and --key on every protocol', async () => {
    const dir = await tempRepo('vs-mtls-predict-');
    const input = join(dir, 'x.json');
    await writeFile(input, JSON.stringify({ instances: [1, 2, 3] }));
    for (const protocol of ['grpc', 'rest', 'kserve-grpc', 'kserve-http']) {
      const { stdout } = await predictHalf(
        input,
        [
          '--protocol',
          protocol,
          '--server',
          'localhost',
          '--grpc',
          `localhost:${h.server.ports.grpc!}`,
          '--kserve-grpc',
          `localhost:${h.server.ports.grpc!}`,
          '--rest',
          `https://localhost:${h.server.ports.rest!}`,
          '--kserve',
          `https://localhost:${h.server.ports.rest!}`,
        ],
        { ca: certs.ca, cert: certs.clientCert, key: certs.clientKey },
      );
      assert.match(stdout, /2\.5/, protocol);
    }
  });

  it('an encrypted client key works with its passphrase; a wrong one or a mismatched key is refused up front', async () => {
    const ca = await readFile(certs.ca, 'utf8');
    const cert = await readFile(certs.clientCert, 'utf8');
    const passphrase = 'correct horse';
    const key = createPrivateKey(await readFile(certs.clientKey)).export({
      type: 'pkcs8',
      format: 'pem',
      cipher: 'aes-256-cbc',
      passphrase,
    }) as string;
    const address = `https://127.0.0.1:${h.server.ports.grpc!}`;
    const grpc = createTfsGrpcClient({ address, tls: { ca, cert, key, passphrase } });
    try {
      assert.match(JSON.stringify(await grpc.getModelStatus('half')), /AVAILABLE/);
    } finally {
      grpc.close();
    }
    // Refused when the client is made (INVALID_ARGUMENT), on every client, before any connection.
    const strangerKey = await readFile(stranger.clientKey, 'utf8');
    const refused: [string, ClientTlsOptions, RegExp][] = [
      ['wrong passphrase', { ca, cert, key, passphrase: 'wrong' }, /cannot be used: .*decrypt/i],
      ['no passphrase', { ca, cert, key }, /cannot be used/],
      ['key of another certificate', { ca, cert, key: strangerKey }, /cannot be used: .*mismatch/i],
      ['a CA that is not PEM', { ca: 'not a certificate' }, /no PEM certificate/],
    ];
    for (const [what, tls, message] of refused) {
      const matches = (error: unknown): boolean => {
        assert.ok(error instanceof ServingError, what);
        assert.equal(error.code, Code.INVALID_ARGUMENT, what);
        assert.match(error.message, message, what);
        return true;
      };
      assert.throws(() => createTfsGrpcClient({ address, tls }), matches);
      assert.throws(() => createTfsGrpcClient({ address, tls, transport: 'node' }), matches);
      assert.throws(
        () => createTfsRestClient({ baseUrl: `https://127.0.0.1:${h.server.ports.rest!}`, tls }),
        matches,
      );
    }
    // visionserve predict reads the passphrase from a file (kept off the command line).
    const dir = await tempRepo('vs-mtls-pass-');
    const input = join(dir, 'x.json');
    const keyFile = join(dir, 'client.key');
    const passFile = join(dir, 'pass');
    await writeFile(input, JSON.stringify({ instances: [1, 2, 3] }));
    await writeFile(keyFile, key);
    const predict = (extra: string[]): Promise<{ stdout: string }> =>
      predictHalf(input, ['--grpc', `localhost:${h.server.ports.grpc!}`, ...extra], {
        ca: certs.ca,
        cert: certs.clientCert,
        key: keyFile,
      });
    await writeFile(passFile, `${passphrase}\n`);
    assert.match((await predict(['--key-passphrase-file', passFile])).stdout, /2\.5/);
    await writeFile(passFile, 'wrong\n');
    await assert.rejects(
      predict(['--key-passphrase-file', passFile]),
      (error: { code: number; stderr: string }) => {
        assert.notEqual(error.code, 0);
        assert.match(error.stderr, /cannot be used: .*decrypt/i);
        return true;
      },
    );
  });

  it('HandleReloadConfigRequest is allowed for the named client only', async () => {
    const ca = await readFile(certs.ca, 'utf8');
    const path = '/tensorflow.serving.ModelService/HandleReloadConfigRequest';
    const admin = {
      ca,
      key: await readFile(certs.clientKey, 'utf8'),
      cert: await readFile(certs.clientCert, 'utf8'),
    };
    const other = {
      ca,
      key: await readFile(stranger.clientKey, 'utf8'),
      cert: await readFile(stranger.clientCert, 'utf8'),
    };
    assert.equal(await grpcStatus(h.server.ports.grpc!, other, path), '7'); // PERMISSION_DENIED
    // The admin passes the guard; the empty config then fails validation, not permission.
    assert.notEqual(await grpcStatus(h.server.ports.grpc!, admin, path), '7');
  });

  it('KServe gRPC RepositoryModelUnload is allowed for the named client only', async () => {
    const ca = await readFile(certs.ca, 'utf8');
    const path = '/inference.GRPCInferenceService/RepositoryModelUnload';
    const admin = {
      ca,
      key: await readFile(certs.clientKey, 'utf8'),
      cert: await readFile(certs.clientCert, 'utf8'),
    };
    const other = {
      ca,
      key: await readFile(stranger.clientKey, 'utf8'),
      cert: await readFile(stranger.clientCert, 'utf8'),
    };
    assert.equal(await grpcStatus(h.server.ports.grpc!, other, path), '7'); // PERMISSION_DENIED
    // The admin passes the guard; model control mode none then answers UNAVAILABLE, as in Triton.
    assert.equal(await grpcStatus(h.server.ports.grpc!, admin, path), '14');
  });
});
