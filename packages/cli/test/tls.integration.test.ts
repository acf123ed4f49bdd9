/**
 * TLS on every listener from TF Serving's SSLConfig: curl with --cacert on the REST and
 * SageMaker ports, gRPC over TLS, plaintext refused, mutual TLS with client_verify, a
 * rotated certificate served without restart, and the management guard by client identity.
 * (The stock Python gRPC client over TLS is in compat/tfserving/test_tls.py.)
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, readFile, writeFile } from 'node:fs/promises';
import { connect } from 'node:http2';
import { connect as tlsConnect } from 'node:tls';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { startHarness, type Harness } from './helpers/server-harness.js';
import { type TestCerts, makeTestCerts } from './helpers/test-certs.js';

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
