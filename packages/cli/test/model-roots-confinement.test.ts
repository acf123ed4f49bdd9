/**
 * One confinement for every load by name under the model roots (`--model_roots`): the KServe
 * repository extension over HTTP and gRPC, and the SageMaker multi-model endpoint. A model
 * directory, a version directory or a model file that is a symlink out of the roots is refused
 * with a 4xx (gRPC's matching code) on each path and is never served; the same model placed
 * inside the roots loads on each path.
 */
import assert from 'node:assert/strict';
import { mkdir, rm, symlink } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import {
  Code,
  type KServeGrpcClient,
  type KServeHttpClient,
  ServingError,
  createKServeGrpcClient,
  createKServeHttpClient,
} from '@visionserve/client';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { type Harness, startHarness } from './helpers/server-harness.js';
import { request } from './helpers/sagemaker-models.js';

/** Layouts under the root that escape it, and the code each load must answer. */
const ESCAPES = [
  // The model directory itself: not a model directory of the roots at all.
  { name: 'dir_link', code: Code.NOT_FOUND, http: 404 },
  // root/version_link/1 -> outside/evil/1
  { name: 'version_link', code: Code.PERMISSION_DENIED, http: 403 },
  // root/file_link/1/model.onnx -> outside/evil/1/model.onnx
  { name: 'file_link', code: Code.PERMISSION_DENIED, http: 403 },
] as const;

const json = { 'Content-Type': 'application/json' };
const x = { x: { dtype: 'float32' as const, shape: [1], data: Float32Array.of(2) } };

function hasCode(code: Code): (e: unknown) => boolean {
  return (e: unknown) => {
    assert.ok(e instanceof ServingError, String(e));
    assert.equal(Code[e.code], Code[code], e.message);
    return true;
  };
}

describe('model roots: symlinks out of the roots are refused on every load path', () => {
  let h: Harness;
  let root: string;
  let outside: string;
  let http: KServeHttpClient;
  let grpc: KServeGrpcClient;

  before(async () => {
    root = await tempRepo('vs-roots-');
    outside = await tempRepo('vs-roots-outside-');
    const evil = await placeModel(outside, 'evil', 1, halfPlusTwoModel());
    await symlink(evil, join(root, 'dir_link'));
    await mkdir(join(root, 'version_link'));
    await symlink(join(evil, '1'), join(root, 'version_link', '1'));
    await mkdir(join(root, 'file_link', '1'), { recursive: true });
    await symlink(join(evil, '1', 'model.onnx'), join(root, 'file_link', '1', 'model.onnx'));
    await placeModel(root, 'inside', 1, halfPlusTwoModel());
    h = await startHarness({
      fileSystemPollSeconds: 0,
      modelRoots: [root],
      kserveModelControlMode: 'explicit',
      sagemakerPort: 0,
      sagemakerMultiModel: true,
      instances: 1,
    });
    http = createKServeHttpClient({ baseUrl: h.rest, defaultTimeoutMs: 60_000 });
    grpc = createKServeGrpcClient({ address: `127.0.0.1:${h.server.ports.grpc!}`, defaultTimeoutMs: 60_000 });
  });
  after(async () => {
    http.close();
    grpc.close();
    await h.close();
    await rm(root, { recursive: true, force: true });
    await rm(outside, { recursive: true, force: true });
  });

  it('KServe HTTP /v2/repository/models/{name}/load', async () => {
    for (const escape of ESCAPES) {
      const res = await request(`${h.rest}/v2/repository/models/${escape.name}/load`, {
        method: 'POST',
        body: '{}',
        headers: json,
      });
      assert.equal(res.status, escape.http, `${escape.name}: ${res.text}`);
      if (escape.code === Code.PERMISSION_DENIED) assert.match(res.text, /outside the model directory/);
      await assert.rejects(http.infer(escape.name, x), hasCode(Code.NOT_FOUND), 'never served');
    }
    await http.loadModel('inside');
    assert.deepEqual([...((await http.infer('inside', x)).outputs['y']!.data as Float32Array)], [3]);
    await http.unloadModel('inside');
  });

  it('KServe gRPC RepositoryModelLoad', async () => {
    for (const escape of ESCAPES) {
      await assert.rejects(grpc.loadModel(escape.name), hasCode(escape.code), escape.name);
      await assert.rejects(grpc.infer(escape.name, x), hasCode(Code.NOT_FOUND), 'never served');
    }
    await grpc.loadModel('inside');
    assert.deepEqual([...((await grpc.infer('inside', x)).outputs['y']!.data as Float32Array)], [3]);
    await grpc.unloadModel('inside');
  });

  it('SageMaker multi-model POST /models', async () => {
    const load = (name: string): Promise<Awaited<ReturnType<typeof request>>> =>
      request(`${h.sagemaker}/models`, {
        body: JSON.stringify({ model_name: `sm_${name}`, url: join(root, name) }),
        headers: json,
      });
    for (const escape of ESCAPES) {
      const res = await load(escape.name);
      assert.equal(res.status, escape.http, `${escape.name}: ${res.text}`);
    }
    assert.deepEqual((await request(`${h.sagemaker}/models`)).json(), {}, 'nothing was left loaded');
    const ok = await load('inside');
    assert.equal(ok.status, 200, ok.text);
    assert.equal((await request(`${h.sagemaker}/models/sm_inside`, { method: 'DELETE' })).status, 200);
  });
});
