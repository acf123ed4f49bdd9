/**
 * KServe v2 (Open Inference Protocol) over HTTP and gRPC against the real server with real
 * models: our clients, the CLI and raw sockets. Accuracy is compared with raw onnxruntime run here.
 */
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { copyFile, mkdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { gzipSync } from 'node:zlib';
import {
  Code,
  type KServeGrpcClient,
  type KServeHttpClient,
  ServingError,
  type Tensor,
  createKServeGrpcClient,
  createKServeHttpClient,
  createTfsRestClient,
  decodeDetections,
  parseClassificationEntry,
} from '@visionserve/client';
import { imageToTensor } from '@visionserve/client/image';
import { MOBILENET_V2_VISION_CONFIG, TFOD_DETECTOR_VISION_CONFIG } from '@visionserve/vision';
import { DTYPE_ECHO_INPUTS, dtypeEchoModel } from '../src/tools/fixture-models.js';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { allScores, assertSameTopK, runReference } from './helpers/reference.js';
import { type Harness, rawHttp, startHarness } from './helpers/server-harness.js';
import { MODELS, REPO_ROOT, image, sharedModel } from './helpers/shared.js';

const isCode = (code: Code) => (e: unknown) => e instanceof ServingError && e.code === code;
const decoder = new TextDecoder();

describe('KServe v2 HTTP API against a real server', () => {
  let h: Harness;
  let client: KServeHttpClient;
  let grpcClient: KServeGrpcClient;
  let cat: Tensor;
  let soccer: Tensor;
  let root: string;

  before(async () => {
    root = await tempRepo('vs-kserve-');
    const mobilenet = await placeModel(root, 'mobilenet', 1, sharedModel('mobilenetv2-12-int8.onnx'));
    await writeFile(join(mobilenet, 'visionserve.json'), JSON.stringify(MOBILENET_V2_VISION_CONFIG));
    await copyFile(join(MODELS, 'imagenet_synset.txt'), join(mobilenet, 'imagenet_synset.txt'));
    await placeModel(root, 'detector', 1, sharedModel('yolox_nano_tfod.onnx'));
    await placeModel(root, 'dtype_echo', 1, dtypeEchoModel());
    // In the model root but not configured: loadable by name.
    await placeModel(root, 'half_plus_two', 1, halfPlusTwoModel());
    await mkdir(join(root, 'empty'));
    await writeFile(
      join(root, 'models.config'),
      `model_config_list {
        config { name: 'mobilenet' base_path: 'mobilenet' }
        config { name: 'detector' base_path: 'detector' }
        config { name: 'dtype_echo' base_path: 'dtype_echo' }
      }`,
    );
    h = await startHarness({
      modelConfigFile: join(root, 'models.config'),
      fileSystemPollSeconds: 0,
      modelRoots: [root],
      kserveModelControlMode: 'explicit',
      // Small enough that the gzip bomb below is quick to build.
      restMaxBodyBytes: 32 * 1024 * 1024,
    });
    client = createKServeHttpClient({ baseUrl: h.rest, defaultTimeoutMs: 60_000 });
    grpcClient = createKServeGrpcClient({
      address: `127.0.0.1:${h.server.ports.grpc!}`,
      defaultTimeoutMs: 60_000,
    });
    cat = (await imageToTensor(image('cat_tabby.jpg'), MOBILENET_V2_VISION_CONFIG.image)).tensor;
    soccer = (await imageToTensor(image('scene_soccer.jpg'), TFOD_DETECTOR_VISION_CONFIG.image)).tensor;
  });
  after(async () => {
    client.close();
    grpcClient.close();
    await h.close();
    await rm(root, { recursive: true, force: true });
  });

  it('MobileNetV2 classifies the tabby cat (281) over binary and JSON tensors, like raw onnxruntime', async () => {
    const reference = allScores(
      (await runReference(sharedModel('mobilenetv2-12-int8.onnx'), { input: cat })).output!,
      { softmax: true },
    );
    for (const binary of [true, false]) {
      const r = await client.infer(
        'mobilenet',
        { input: cat },
        { binaryInputs: binary, binaryOutputs: binary },
      );
      assert.deepEqual(r.model, { name: 'mobilenet', version: 1 });
      const output = r.outputs['output']!;
      assert.deepEqual(output.shape, [1, 1000]);
      const served = allScores(output, { softmax: true }).slice(0, 5);
      assertSameTopK(served, reference);
      assert.equal(served[0]!.class_id, 281);
      if (binary) assert.ok(r.wire.requestBytes > 600_000 && r.wire.requestBytes < 603_000);
    }
  });

  it('classification extension: top-3 "value:index:label" strings from the labels file', async () => {
    const logits = (await runReference(sharedModel('mobilenetv2-12-int8.onnx'), { input: cat })).output!;
    for (const binary of [true, false]) {
      const r = await client.infer(
        'mobilenet',
        { input: cat },
        { outputs: [{ name: 'output', classification: 3, binary }] },
      );
      const t = r.outputs['output']!;
      assert.equal(t.dtype, 'string');
      assert.deepEqual(t.shape, [1, 3]);
      const entries = (t.data as Uint8Array[]).map((b) => decoder.decode(b));
      for (const e of entries) assert.match(e, /^-?\d+\.\d{6}:\d+:.+$/);
      const parsed = entries.map(parseClassificationEntry);
      assert.equal(parsed[0]!.index, 281);
      assert.match(parsed[0]!.label!, /tabby/);
      assert.ok(parsed[0]!.score >= parsed[1]!.score && parsed[1]!.score >= parsed[2]!.score);
      for (const p of parsed) {
        assert.ok(Math.abs(p.score - (logits.data as Float32Array)[p.index]!) < 1e-4, `logit of ${p.index}`);
      }
    }
  });

  it('the TF-OD YOLOX detects the three players and the ball in scene_soccer.jpg, like raw onnxruntime', async () => {
    const r = await client.infer('detector', { input_tensor: soccer });
    const reference = await runReference(sharedModel('yolox_nano_tfod.onnx'), { input_tensor: soccer });
    const [served] = decodeDetections(
      r.outputs,
      { kind: 'detection', scoreThreshold: 0.5 },
      undefined,
      undefined,
    );
    const [expected] = decodeDetections(
      reference,
      { kind: 'detection', scoreThreshold: 0.5 },
      undefined,
      undefined,
    );
    const classes = served!.detections.map((d) => d.class_id).sort((a, b) => a - b);
    assert.deepEqual(
      classes,
      expected!.detections.map((d) => d.class_id).sort((a, b) => a - b),
    );
    assert.ok(classes.filter((c) => c === 1).length >= 3, `persons in ${classes.join(',')}`);
    assert.ok(classes.includes(37), 'sports ball');
    served!.detections.forEach((d, i) => {
      assert.ok(Math.abs(d.score - expected!.detections[i]!.score) < 1e-3);
    });
    const only = await client.infer('detector', { input_tensor: soccer }, { outputs: ['num_detections'] });
    assert.deepEqual(Object.keys(only.outputs), ['num_detections']);
  });

  it('every datatype round-trips through a real model, as binary and as JSON', async () => {
    const enc = new TextEncoder();
    const inputs: Record<string, Tensor> = {
      bool: { dtype: 'bool', shape: [1, 2], data: Uint8Array.of(1, 0) },
      uint8: { dtype: 'uint8', shape: [1, 2], data: Uint8Array.of(0, 255) },
      uint16: { dtype: 'uint16', shape: [1, 2], data: Uint16Array.of(0, 65535) },
      uint32: { dtype: 'uint32', shape: [1, 2], data: Uint32Array.of(0, 4294967295) },
      uint64: { dtype: 'uint64', shape: [1, 2], data: BigUint64Array.of(0n, 2n ** 53n - 1n) },
      int8: { dtype: 'int8', shape: [1, 2], data: Int8Array.of(-128, 127) },
      int16: { dtype: 'int16', shape: [1, 2], data: Int16Array.of(-32768, 32767) },
      int32: { dtype: 'int32', shape: [1, 2], data: Int32Array.of(-2147483648, 2147483647) },
      int64: { dtype: 'int64', shape: [1, 2], data: BigInt64Array.of(-(2n ** 53n) + 1n, 2n ** 53n - 1n) },
      fp16: { dtype: 'float16', shape: [1, 2], data: Uint16Array.of(0x3c00, 0xc500) },
      fp32: { dtype: 'float32', shape: [1, 2], data: Float32Array.of(0.1, -1e30) },
      fp64: { dtype: 'float64', shape: [1, 2], data: Float64Array.of(0.1, -1e300) },
      bytes: {
        dtype: 'string',
        shape: [1, 2],
        data: [enc.encode(''), enc.encode('h\u00e9llo \u4e16\u754c')],
      },
    };
    assert.deepEqual(Object.keys(inputs).sort(), Object.keys(DTYPE_ECHO_INPUTS).sort());
    for (const binary of [true, false]) {
      const r = await client.infer('dtype_echo', inputs, { binaryInputs: binary, binaryOutputs: binary });
      for (const [name, t] of Object.entries(inputs)) {
        const out = r.outputs[`${name}_out`]!;
        assert.equal(out.dtype, t.dtype, name);
        assert.deepEqual(out.shape, [1, 2], name);
        if (t.dtype === 'string') {
          const text = (d: Tensor['data']): string[] => (d as Uint8Array[]).map((b) => decoder.decode(b));
          assert.deepEqual(text(out.data), text(t.data), name);
        } else
          assert.deepEqual(
            [...(out.data as ArrayLike<unknown> & Iterable<unknown>)],
            [...(t.data as Iterable<unknown>)],
            name,
          );
      }
    }
    // Uint64 beyond 2^53 travels exactly in binary.
    const big = await client.infer('dtype_echo', {
      ...inputs,
      uint64: { dtype: 'uint64', shape: [1, 2], data: BigUint64Array.of(2n ** 64n - 1n, 1n) },
    });
    assert.deepEqual([...(big.outputs['uint64_out']!.data as BigUint64Array)], [2n ** 64n - 1n, 1n]);
  });

  it('health, server and model metadata, configuration and readiness', async () => {
    assert.equal(await client.serverLive(), true);
    assert.equal(await client.serverReady(), true);
    const server = await client.serverMetadata();
    assert.equal(server.name, 'visionserve');
    assert.ok(
      server.extensions.includes('binary_tensor_data') && server.extensions.includes('classification'),
    );
    assert.deepEqual(await client.modelMetadata({ name: 'mobilenet', version: 1 }), {
      name: 'mobilenet',
      versions: ['1'],
      platform: 'onnxruntime_onnx',
      inputs: [{ name: 'input', datatype: 'FP32', shape: [-1, 3, 224, 224] }],
      outputs: [{ name: 'output', datatype: 'FP32', shape: [-1, 1000] }],
    });
    const config = await client.modelConfig('mobilenet');
    assert.ok((config['max_batch_size'] as number) > 0);
    assert.deepEqual((config['input'] as { dims: number[]; format: string }[])[0], {
      name: 'input',
      data_type: 'TYPE_FP32',
      format: 'FORMAT_NCHW',
      dims: [3, 224, 224],
      is_shape_tensor: false,
      optional: false,
    });
    assert.equal(
      (config['output'] as { label_filename: string }[])[0]!.label_filename,
      'imagenet_synset.txt',
    );
    const detector = await client.modelConfig('detector');
    assert.equal(detector['max_batch_size'], 0);
    assert.deepEqual((detector['input'] as { dims: number[] }[])[0]!.dims, [1, -1, -1, 3]);
    assert.equal(await client.modelReady('mobilenet'), true);
    assert.equal(await client.modelReady({ name: 'mobilenet', version: 2 }), false);
    assert.equal(await client.modelReady('nope'), false);
    await assert.rejects(client.modelMetadata('nope'), isCode(Code.NOT_FOUND));
    await assert.rejects(client.infer('mobilenet', { wrong: cat }), isCode(Code.INVALID_ARGUMENT));
    await assert.rejects(
      client.infer('mobilenet', {
        input: { dtype: 'float32', shape: [1, 3, 224], data: new Float32Array(672) },
      }),
      isCode(Code.INVALID_ARGUMENT),
    );
  });

  it('statistics count requests per version', async () => {
    const before = (await client.statistics({ name: 'detector', version: 1 })).model_stats[0]!;
    await client.infer('detector', { input_tensor: soccer }, { outputs: ['num_detections'] });
    await assert.rejects(
      client.infer('detector', {
        input_tensor: { dtype: 'float32', shape: [1, 2, 2, 3], data: new Float32Array(12) },
      }),
    );
    const after = (await client.statistics({ name: 'detector', version: 1 })).model_stats[0]!;
    const stats = (m: Record<string, unknown>): Record<string, { count: number; ns: number }> =>
      m['inference_stats'] as Record<string, { count: number; ns: number }>;
    assert.equal(after['version'], '1');
    assert.equal(stats(after)['success']!.count - stats(before)['success']!.count, 1);
    // The malformed request never reached the model: not a failure (as in Triton).
    assert.equal(stats(after)['fail']!.count - stats(before)['fail']!.count, 0);
    assert.equal(stats(after)['queue']!.count - stats(before)['queue']!.count, 1);
    assert.ok(stats(after)['compute_infer']!.ns > stats(before)['compute_infer']!.ns);
    assert.ok((after['last_inference'] as number) > 0);
    const all = await client.statistics();
    assert.deepEqual(all.model_stats.map((m) => m['name']).sort(), ['detector', 'dtype_echo', 'mobilenet']);
  });

  it('repository: index, load by name from the model root, unload, load again', async () => {
    let index = await client.repositoryIndex();
    assert.deepEqual(
      index.find((e) => e.name === 'half_plus_two'),
      { name: 'half_plus_two' },
    );
    assert.deepEqual(
      index.find((e) => e.name === 'mobilenet'),
      { name: 'mobilenet', version: '1', state: 'READY' },
    );
    await assert.rejects(
      client.infer('half_plus_two', { x: { dtype: 'float32', shape: [1], data: Float32Array.of(2) } }),
      isCode(Code.NOT_FOUND),
    );
    await client.loadModel('half_plus_two');
    const r = await client.infer('half_plus_two', {
      x: { dtype: 'float32', shape: [3], data: Float32Array.of(1, 2, 5) },
    });
    assert.deepEqual([...(r.outputs['y']!.data as Float32Array)], [2.5, 3, 4.5]);
    await client.unloadModel('half_plus_two');
    assert.equal(await client.modelReady('half_plus_two'), false);
    index = await client.repositoryIndex();
    assert.deepEqual(
      index.find((e) => e.name === 'half_plus_two'),
      { name: 'half_plus_two', state: 'UNAVAILABLE', reason: 'unloaded' },
    );
    assert.deepEqual(
      (await client.repositoryIndex({ ready: true })).map((e) => e.name),
      ['detector', 'dtype_echo', 'mobilenet'],
    );
    await assert.rejects(client.loadModel('empty'), isCode(Code.NOT_FOUND));
    assert.equal(await client.modelReady('empty'), false);
    await assert.rejects(client.loadModel('nowhere'), isCode(Code.NOT_FOUND));
  });

  it('unknown models are answered before the body is sent', async () => {
    const answer = await rawHttp(
      h.server.ports.rest!,
      'POST /v2/models/nope/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 3000000\r\n\r\n',
      /\r\n\r\n.*nope/s,
    );
    assert.match(answer, /^HTTP\/1\.1 404 /);
    assert.match(answer, /"error":"[^"]*nope/);
  });

  it('hostile bodies over a real socket get 4xx and the server keeps serving', async () => {
    const post = async (body: Uint8Array | string, headers: Record<string, string> = {}): Promise<number> =>
      (await fetch(`${h.rest}/v2/models/mobilenet/infer`, { method: 'POST', body, headers })).status;
    const huge = JSON.stringify({
      inputs: [{ name: 'input', shape: [2147483647], datatype: 'FP32', parameters: { binary_data_size: 4 } }],
    });
    assert.equal(await post(`${huge}abcd`, { 'Inference-Header-Content-Length': String(huge.length) }), 400);
    assert.equal(await post(huge, { 'Inference-Header-Content-Length': '99999999' }), 400);
    const lies = JSON.stringify({
      inputs: [
        {
          name: 'input',
          shape: [1, 3, 224, 224],
          datatype: 'FP32',
          parameters: { binary_data_size: 602112 },
        },
      ],
    });
    assert.equal(await post(`${lies}short`, { 'Inference-Header-Content-Length': String(lies.length) }), 400);
    assert.equal(
      await post(gzipSync(Buffer.alloc(40 * 1024 * 1024, 32)), { 'Content-Encoding': 'gzip' }),
      413,
    );
    assert.equal(await post('{"inputs":[{"name":"input","shape":[1],"datatype":"BF16","data":[1]}]}'), 400);
    assert.equal(await client.serverLive(), true);
    const r = await client.infer(
      'mobilenet',
      { input: cat },
      { outputs: [{ name: 'output', classification: 1 }] },
    );
    assert.match(decoder.decode((r.outputs['output']!.data as Uint8Array[])[0]), /:281:/);
  });

  it('visionserve predict --protocol kserve-http prints the tabby', async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        join(REPO_ROOT, 'packages', 'cli', 'bin', 'visionserve.js'),
        'predict',
        join(REPO_ROOT, '..', 'shared', 'images', 'cat_tabby.jpg'),
        '--protocol',
        'kserve-http',
        '--kserve',
        h.rest,
        '--model',
        'mobilenet',
        '--labels',
        join(MODELS, 'imagenet_synset.txt'),
        '--json',
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    const out = JSON.parse(stdout) as { protocol: string; classes: { class_id: number; label: string }[] };
    assert.equal(out.protocol, 'kserve-http');
    assert.equal(out.classes[0]!.class_id, 281);
    assert.match(out.classes[0]!.label, /tabby/);
  });

  it('gRPC: MobileNetV2 classifies the tabby cat (281) like raw onnxruntime; classification with labels', async () => {
    const logits = (await runReference(sharedModel('mobilenetv2-12-int8.onnx'), { input: cat })).output!;
    const r = await grpcClient.infer('mobilenet', { input: cat }, { id: 'cat' });
    assert.deepEqual(r.model, { name: 'mobilenet', version: 1 });
    assert.equal(r.id, 'cat');
    assert.ok(r.wire.requestBytes > 602_112 && r.wire.requestBytes < 602_300, `${r.wire.requestBytes} B`);
    const served = allScores(r.outputs['output']!, { softmax: true }).slice(0, 5);
    assertSameTopK(served, allScores(logits, { softmax: true }));
    assert.equal(served[0]!.class_id, 281);
    const top = await grpcClient.infer(
      { name: 'mobilenet', version: 1 },
      { input: cat },
      { outputs: [{ name: 'output', classification: 3 }] },
    );
    const parsed = (top.outputs['output']!.data as Uint8Array[]).map((b) =>
      parseClassificationEntry(decoder.decode(b)),
    );
    assert.deepEqual(top.outputs['output']!.shape, [1, 3]);
    assert.equal(parsed[0]!.index, 281);
    assert.match(parsed[0]!.label!, /tabby/);
    for (const p of parsed) {
      assert.ok(Math.abs(p.score - (logits.data as Float32Array)[p.index]!) < 1e-4, `logit of ${p.index}`);
    }
  });

  it('gRPC: the TF-OD YOLOX detects the players and the ball like raw onnxruntime; output selection', async () => {
    const r = await grpcClient.infer('detector', { input_tensor: soccer });
    const reference = await runReference(sharedModel('yolox_nano_tfod.onnx'), { input_tensor: soccer });
    const options = { kind: 'detection', scoreThreshold: 0.5 } as const;
    const [served] = decodeDetections(r.outputs, options, undefined, undefined);
    const [expected] = decodeDetections(reference, options, undefined, undefined);
    const classes = served!.detections.map((d) => d.class_id).sort((a, b) => a - b);
    assert.deepEqual(
      classes,
      expected!.detections.map((d) => d.class_id).sort((a, b) => a - b),
    );
    assert.ok(classes.filter((c) => c === 1).length >= 3, `persons in ${classes.join(',')}`);
    assert.ok(classes.includes(37), 'sports ball');
    const only = await grpcClient.infer(
      'detector',
      { input_tensor: soccer },
      { outputs: ['detection_scores', 'num_detections'] },
    );
    assert.deepEqual(Object.keys(only.outputs), ['detection_scores', 'num_detections']);
  });

  it('gRPC: every datatype round-trips through a real model (uint64 beyond 2^53 exactly)', async () => {
    const enc = new TextEncoder();
    const inputs: Record<string, Tensor> = {
      bool: { dtype: 'bool', shape: [1, 2], data: Uint8Array.of(1, 0) },
      uint8: { dtype: 'uint8', shape: [1, 2], data: Uint8Array.of(0, 255) },
      uint16: { dtype: 'uint16', shape: [1, 2], data: Uint16Array.of(0, 65535) },
      uint32: { dtype: 'uint32', shape: [1, 2], data: Uint32Array.of(0, 4294967295) },
      uint64: { dtype: 'uint64', shape: [1, 2], data: BigUint64Array.of(2n ** 64n - 1n, 1n) },
      int8: { dtype: 'int8', shape: [1, 2], data: Int8Array.of(-128, 127) },
      int16: { dtype: 'int16', shape: [1, 2], data: Int16Array.of(-32768, 32767) },
      int32: { dtype: 'int32', shape: [1, 2], data: Int32Array.of(-2147483648, 2147483647) },
      int64: { dtype: 'int64', shape: [1, 2], data: BigInt64Array.of(-(2n ** 63n), 2n ** 63n - 1n) },
      fp16: { dtype: 'float16', shape: [1, 2], data: Uint16Array.of(0x3c00, 0xc500) },
      fp32: { dtype: 'float32', shape: [1, 2], data: Float32Array.of(0.1, -1e30) },
      fp64: { dtype: 'float64', shape: [1, 2], data: Float64Array.of(0.1, -1e300) },
      bytes: {
        dtype: 'string',
        shape: [1, 2],
        data: [enc.encode(''), enc.encode('h\u00e9llo \u4e16\u754c')],
      },
    };
    const r = await grpcClient.infer('dtype_echo', inputs);
    for (const [name, t] of Object.entries(inputs)) {
      const out = r.outputs[`${name}_out`]!;
      assert.equal(out.dtype, t.dtype, name);
      assert.deepEqual(out.shape, [1, 2], name);
      if (t.dtype === 'string') {
        const text = (d: Tensor['data']): string[] => (d as Uint8Array[]).map((b) => decoder.decode(b));
        assert.deepEqual(text(out.data), text(t.data), name);
      } else
        assert.deepEqual(
          [...(out.data as ArrayLike<unknown> & Iterable<unknown>)],
          [...(t.data as Iterable<unknown>)],
          name,
        );
    }
    // ONNX string tensors carry text: bytes that are not UTF-8, or hold a NUL, are refused
    // rather than run altered (over either binding).
    for (const bad of [Uint8Array.of(0x61, 0, 0x62), Uint8Array.of(0xff, 0xfe)]) {
      const hostile = { ...inputs, bytes: { dtype: 'string' as const, shape: [1, 2], data: [bad, bad] } };
      await assert.rejects(
        grpcClient.infer('dtype_echo', hostile),
        (e: ServingError) => e.code === Code.INVALID_ARGUMENT && /not UTF-8 text/.test(e.message),
      );
      await assert.rejects(
        client.infer('dtype_echo', hostile),
        (e: ServingError) => e.code === Code.INVALID_ARGUMENT && /not UTF-8 text/.test(e.message),
      );
    }
  });

  it('gRPC: health, metadata, configuration, readiness and errors with Triton codes', async () => {
    assert.equal(await grpcClient.serverLive(), true);
    assert.equal(await grpcClient.serverReady(), true);
    assert.ok((await grpcClient.serverMetadata()).extensions.includes('statistics'));
    assert.deepEqual(await grpcClient.modelMetadata({ name: 'mobilenet', version: 1 }), {
      name: 'mobilenet',
      versions: ['1'],
      platform: 'onnxruntime_onnx',
      inputs: [{ name: 'input', datatype: 'FP32', shape: [-1, 3, 224, 224] }],
      outputs: [{ name: 'output', datatype: 'FP32', shape: [-1, 1000] }],
    });
    const config = await grpcClient.modelConfig('mobilenet');
    assert.equal(config['name'], 'mobilenet');
    assert.deepEqual((config['input'] as { dims: string[] }[])[0]!.dims, ['3', '224', '224']);
    assert.equal(await grpcClient.modelReady('mobilenet'), true);
    await assert.rejects(grpcClient.modelReady('nope'), isCode(Code.NOT_FOUND));
    await assert.rejects(grpcClient.infer('nope', { input: cat }), isCode(Code.NOT_FOUND));
    await assert.rejects(grpcClient.infer('mobilenet', { wrong: cat }), isCode(Code.INVALID_ARGUMENT));
    await assert.rejects(
      grpcClient.infer('mobilenet', { input: { dtype: 'int32', shape: [1], data: Int32Array.of(1) } }),
      isCode(Code.INVALID_ARGUMENT),
    );
    // A declared shape far beyond the bytes sent, over a real socket: refused, nothing allocated.
    await assert.rejects(
      grpcClient.infer('mobilenet', {
        input: { dtype: 'float32', shape: [2147483647], data: new Float32Array(1) },
      }),
      isCode(Code.INVALID_ARGUMENT),
    );
  });

  it('statistics count every request to a model whatever its protocol, and every model run', async () => {
    const stats = async (): Promise<{ s: Record<string, { count: number }>; e: number; n: number }> => {
      const m = (await client.statistics({ name: 'detector', version: 1 })).model_stats[0]!;
      return {
        s: m['inference_stats'] as Record<string, { count: number }>,
        e: m['execution_count'] as number,
        n: m['inference_count'] as number,
      };
    };
    const before = await stats();
    await client.infer('detector', { input_tensor: soccer }, { outputs: ['num_detections'] });
    await grpcClient.infer('detector', { input_tensor: soccer }, { outputs: ['num_detections'] });
    const tfs = createTfsRestClient({ baseUrl: h.rest });
    try {
      await tfs.predict('detector', { input_tensor: soccer });
    } finally {
      tfs.close();
    }
    const after = await stats();
    assert.equal(after.s['success']!.count - before.s['success']!.count, 3);
    assert.equal(after.s['queue']!.count - before.s['queue']!.count, 3);
    assert.equal(after.e - before.e, 3);
    assert.equal(after.n - before.n, 3);
    const viaGrpc = (await grpcClient.statistics({ name: 'detector' })).model_stats[0]!;
    assert.equal(viaGrpc['version'], '1');
    assert.ok(Number(viaGrpc['execution_count']) >= after.e);
  });

  it('gRPC: repository index, load by name, unload', async () => {
    assert.deepEqual(
      (await grpcClient.repositoryIndex()).find((e) => e.name === 'half_plus_two'),
      { name: 'half_plus_two', state: 'UNAVAILABLE', reason: 'unloaded' },
    );
    await grpcClient.loadModel('half_plus_two');
    const r = await grpcClient.infer('half_plus_two', {
      x: { dtype: 'float32', shape: [2], data: Float32Array.of(0, 4) },
    });
    assert.deepEqual([...(r.outputs['y']!.data as Float32Array)], [2, 4]);
    await grpcClient.unloadModel('half_plus_two');
    await assert.rejects(grpcClient.modelReady('half_plus_two'), isCode(Code.NOT_FOUND));
    await assert.rejects(grpcClient.loadModel('nowhere'), isCode(Code.NOT_FOUND));
  });

  it('visionserve predict --protocol kserve-grpc prints the tabby', async () => {
    const { stdout } = await promisify(execFile)(
      process.execPath,
      [
        join(REPO_ROOT, 'packages', 'cli', 'bin', 'visionserve.js'),
        'predict',
        join(REPO_ROOT, '..', 'shared', 'images', 'cat_tabby.jpg'),
        '--protocol',
        'kserve-grpc',
        '--kserve-grpc',
        `127.0.0.1:${h.server.ports.grpc!}`,
        '--model',
        'mobilenet',
        '--labels',
        join(MODELS, 'imagenet_synset.txt'),
        '--json',
      ],
      { encoding: 'utf8', timeout: 60_000 },
    );
    const out = JSON.parse(stdout) as { protocol: string; classes: { class_id: number; label: string }[] };
    assert.equal(out.protocol, 'kserve-grpc');
    assert.equal(out.classes[0]!.class_id, 281);
    assert.match(out.classes[0]!.label, /tabby/);
  });
});
