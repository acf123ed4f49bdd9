/**
 * TF Serving users' inputs on real servers: encoded-image signatures (the seed README's b64
 * input_handler on MobileNetV2), Classify/Regress on ONNX models, FP16 over JSON and gRPC.
 * Accuracy is compared with raw onnxruntime run here on the same preprocessing.
 */
import { after, before, describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import { type Tensor, halfToNumber, numberToHalf } from '@visionserve/protocol';
import {
  ClassificationRequestSchema,
  ClassificationResponseSchema,
  PredictRequestSchema,
  PredictResponseSchema,
  RegressionRequestSchema,
  RegressionResponseSchema,
  tensorFromProto,
  tensorToProto,
} from '@visionserve/protocol/tfs-proto';
import { MOBILENET_V2_VISION_CONFIG } from '@visionserve/vision';
import { imageToTensor } from '@visionserve/vision/image';
import { WARMUP_FILE_PATH, type WarmupReport, encodeWarmupFile } from '@visionserve/server';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { halfPlusTwoFp16Model } from '../src/tools/fixture-models.js';
import { ONNX_ELEM_TYPE, buildOnnxModel } from '../src/tools/onnx-builder.js';
import { allScores, assertSameTopK, runReference } from './helpers/reference.js';
import { argmax, image, imagenetLabels, sharedModel } from './helpers/shared.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { placeMobilenet, request, writeHandler } from './helpers/sagemaker-models.js';
import { type Harness, postJson, startHarness } from './helpers/server-harness.js';

/** The seed README's `input_handler` (SageMaker TFS container), in this server's handler form. */
const B64_INPUT_HANDLER = `
export function input_handler(data, context) {
  if (context.requestContentType === 'application/x-image') {
    const encoded = data.toString('base64');
    return JSON.stringify({ instances: [{ b64: encoded }] });
  }
  throw new Error('Unsupported content type: ' + context.requestContentType);
}
`;

const b64 = (bytes: Uint8Array): string => Buffer.from(bytes).toString('base64');

/** Writes `<base>/1/assets.extra/tf_serving_warmup_requests` with one record per image (image_bytes). */
async function writeImageWarmupFile(base: string, images: readonly Uint8Array[], signatureName?: string) {
  await mkdir(join(base, '1', 'assets.extra'), { recursive: true });
  const record = (bytes: Uint8Array) => ({
    inputs: { image_bytes: { dtype: 'string' as const, shape: [1], data: [bytes] } },
    ...(signatureName === undefined ? {} : { signatureName }),
  });
  await writeFile(join(base, '1', WARMUP_FILE_PATH), encodeWarmupFile(images.map(record)));
}

describe('TF Serving drop-in: encoded images, Classify/Regress, FP16', () => {
  let h: Harness;
  let root: string;
  const warmups: WarmupReport[] = [];
  const mobilenetConfig = {
    ...MOBILENET_V2_VISION_CONFIG,
    imageBytesSignature: { default: true },
  };

  before(async () => {
    root = await tempRepo('vs-dropin-');
    const mobilenet = await placeMobilenet(root);
    await writeFile(join(mobilenet, 'visionserve.json'), JSON.stringify(mobilenetConfig));
    // The same model with the seed README's b64 input handler in front.
    const handled = await placeMobilenet(root, 'mobilenet_handler');
    await writeFile(join(handled, 'visionserve.json'), JSON.stringify(mobilenetConfig));
    await writeHandler(handled, 'inference.mjs', B64_INPUT_HANDLER);
    // TF Serving users' warmup files: image_bytes records (to serving_default, which the
    // encoded-image signature is here, and by name), and one whose JPEG is cut short.
    const warm = await placeMobilenet(root, 'mobilenet_warm');
    await writeFile(join(warm, 'visionserve.json'), JSON.stringify(mobilenetConfig));
    await writeImageWarmupFile(warm, [image('cat_tabby.jpg')]);
    const warmNamed = await placeMobilenet(root, 'mobilenet_warm_named');
    await writeImageWarmupFile(warmNamed, [image('cat_tabby.jpg'), image('cat_tabby.jpg')], 'serving_bytes');
    const badWarm = await placeMobilenet(root, 'mobilenet_bad_warmup');
    await writeImageWarmupFile(badWarm, [image('cat_tabby.jpg').subarray(0, 200)], 'serving_bytes');
    await placeModel(root, 'half_plus_two', 1, halfPlusTwoModel());
    await placeModel(root, 'fp16', 1, halfPlusTwoFp16Model());
    await placeModel(
      root,
      'bf16',
      1,
      buildOnnxModel({
        inputs: [{ name: 'x', dtype: 'bfloat16', shape: ['batch'] }],
        outputs: [{ name: 'y', dtype: 'float32', shape: ['batch'] }],
        nodes: [{ op: 'Cast', inputs: ['x'], outputs: ['y'], attributes: { to: ONNX_ELEM_TYPE.float32 } }],
      }),
    );
    const config = join(root, 'models.config');
    await writeFile(
      config,
      `model_config_list {
        config { name: 'mobilenet' base_path: 'mobilenet' }
        config { name: 'mobilenet_handler' base_path: 'mobilenet_handler' }
        config { name: 'mobilenet_warm' base_path: 'mobilenet_warm' }
        config { name: 'mobilenet_warm_named' base_path: 'mobilenet_warm_named' }
        config { name: 'mobilenet_bad_warmup' base_path: 'mobilenet_bad_warmup' }
        config { name: 'half_plus_two' base_path: 'half_plus_two' }
        config { name: 'fp16' base_path: 'fp16' }
        config { name: 'bf16' base_path: 'bf16' }
      }`,
    );
    // bf16 and mobilenet_bad_warmup cannot load (the tests say why); the server starts anyway.
    h = await startHarness(
      {
        modelConfigFile: config,
        fileSystemPollSeconds: 0,
        sagemakerPort: 0,
        waitForModels: true,
      },
      { onWarmup: (r) => warmups.push(r) },
    );
  });
  after(async () => {
    await h.close();
  });

  /** Raw onnxruntime on the server's own preprocessing of a photo: logits [1, 1000]. */
  async function referenceLogits(file: string): Promise<Tensor> {
    const { tensor } = await imageToTensor(image(file), MOBILENET_V2_VISION_CONFIG.image);
    return (await runReference(sharedModel('mobilenetv2-12-int8.onnx'), { input: tensor }))['output']!;
  }

  function logitsOf(predictions: unknown, row = 0): Float32Array {
    return Float32Array.from((predictions as number[][])[row]!);
  }

  it('serves image_bytes as serving_default; the tensor signature stays reachable', async () => {
    const res = await request(`${h.rest}/v1/models/mobilenet/metadata`);
    const defs = (
      res.json() as {
        metadata: {
          signature_def: { signature_def: Record<string, { inputs: Record<string, { dtype: string }> }> };
        };
      }
    ).metadata.signature_def.signature_def;
    assert.deepEqual(Object.keys(defs).sort(), ['serving_bytes', 'serving_default', 'serving_tensor']);
    assert.equal(defs['serving_default']!.inputs['image_bytes']!.dtype, 'DT_STRING');
    assert.equal(defs['serving_tensor']!.inputs['input']!.dtype, 'DT_FLOAT');
  });

  it('REST predict with {"b64": JPEG} gives the raw onnxruntime answer (top-1 281 for the tabby)', async () => {
    const { status, json } = await postJson(`${h.rest}/v1/models/mobilenet:predict`, {
      instances: [{ b64: b64(image('cat_tabby.jpg')) }],
    });
    assert.equal(status, 200, JSON.stringify(json));
    const served = logitsOf((json as { predictions: unknown }).predictions);
    assert.equal(argmax(served), 281);
    assert.equal(imagenetLabels()[281], 'tabby, tabby cat');
    const reference = await referenceLogits('cat_tabby.jpg');
    const t: Tensor = { dtype: 'float32', shape: [1, 1000], data: served };
    assertSameTopK(allScores(t, { softmax: true }).slice(0, 5), allScores(reference, { softmax: true }));
  });

  it("the seed README's input_handler (b64 -> instances) works unchanged through /invocations", async () => {
    const res = await request(`${h.sagemaker}/invocations`, {
      body: image('cat_tabby.jpg'),
      headers: {
        'Content-Type': 'application/x-image',
        'X-Amzn-SageMaker-Custom-Attributes': 'tfs-model-name=mobilenet_handler',
      },
    });
    assert.equal(res.status, 200, res.text);
    const served = logitsOf((res.json() as { predictions: unknown }).predictions);
    assert.equal(argmax(served), 281);
    const reference = await referenceLogits('cat_tabby.jpg');
    const t: Tensor = { dtype: 'float32', shape: [1, 1000], data: served };
    assertSameTopK(allScores(t, { softmax: true }).slice(0, 5), allScores(reference, { softmax: true }));
  });

  it('gRPC Predict with string_val images batches several photos; each matches raw onnxruntime', async () => {
    const request_ = create(PredictRequestSchema, {
      modelSpec: { name: 'mobilenet', signatureName: 'serving_bytes' },
    });
    request_.inputs['image_bytes'] = tensorToProto(
      { dtype: 'string', shape: [2], data: [image('cat_tabby.jpg'), image('dog_beagle.jpg')] },
      { asTensorContent: false },
    );
    const bytes = await h.grpc.unary(
      '/tensorflow.serving.PredictionService/Predict',
      toBinary(PredictRequestSchema, request_),
    );
    const out = tensorFromProto(fromBinary(PredictResponseSchema, bytes).outputs['output']!, 'output');
    assert.deepEqual(out.shape, [2, 1000]);
    const data = out.data as Float32Array;
    for (const [row, file] of [
      [0, 'cat_tabby.jpg'],
      [1, 'dog_beagle.jpg'],
    ] as const) {
      const reference = await referenceLogits(file);
      const served: Tensor = {
        dtype: 'float32',
        shape: [1, 1000],
        data: data.slice(row * 1000, row * 1000 + 1000),
      };
      assertSameTopK(
        allScores(served, { softmax: true }).slice(0, 5),
        allScores(reference, { softmax: true }),
      );
    }
  });

  it('answers bad image bytes with 400 naming the element, and keeps serving', async () => {
    const { status, json } = await postJson(`${h.rest}/v1/models/mobilenet:predict`, {
      instances: [{ b64: b64(image('cat_tabby.jpg')) }, { b64: b64(Buffer.from('not an image')) }],
    });
    assert.equal(status, 400);
    assert.match((json as { error: string }).error, /Image 1: Unable to decode image/);
    const truncated = image('cat_tabby.jpg').subarray(0, 2000);
    const again = await postJson(`${h.rest}/v1/models/mobilenet:predict`, {
      instances: [{ b64: b64(truncated) }],
    });
    assert.equal(again.status, 400);
    const ok = await postJson(`${h.rest}/v1/models/mobilenet:predict`, {
      signature_name: 'serving_bytes',
      instances: [{ b64: b64(image('cat_chelsea.png')) }],
    });
    assert.equal(ok.status, 200);
  });

  it('Classify on an ONNX image model: encoded-image features, softmaxed scores, labels from the labels file', async () => {
    const { status, json } = await postJson(`${h.rest}/v1/models/mobilenet:classify`, {
      signature_name: 'serving_tensor',
      examples: [{ input: { b64: b64(image('cat_tabby.jpg')) } }],
    });
    assert.equal(status, 200, JSON.stringify(json));
    const classes = (json as { results: [string, number][][] }).results[0]!;
    assert.equal(classes.length, 1000);
    const reference = allScores(await referenceLogits('cat_tabby.jpg'), { softmax: true });
    const best = classes.reduce((a, b) => (b[1] > a[1] ? b : a));
    assert.equal(best[0], 'tabby, tabby cat');
    for (const c of reference.slice(0, 5)) assert.ok(Math.abs(classes[c.class_id]![1] - c.score) < 1e-4);
    assert.ok(Math.abs(classes.reduce((s, c) => s + c[1], 0) - 1) < 1e-3);
  });

  it('Regress and Classify over gRPC and REST map tf.Example features onto inputs by name', async () => {
    const regress = await postJson(`${h.rest}/v1/models/half_plus_two:regress`, {
      examples: [{ x: 1.0 }, { x: 5 }],
    });
    assert.deepEqual(regress, { status: 200, json: { results: [2.5, 4.5] } });
    const withContext = await postJson(`${h.rest}/v1/models/half_plus_two:regress`, {
      context: { x: 3.0 },
      examples: [{}, { x: -2 }],
    });
    assert.deepEqual(withContext.json, { results: [3.5, 1] });
    const req = create(RegressionRequestSchema, {
      modelSpec: { name: 'half_plus_two' },
      input: {
        kind: {
          case: 'exampleList',
          value: {
            examples: [
              { features: { feature: { x: { kind: { case: 'floatList', value: { value: [4] } } } } } },
            ],
          },
        },
      },
    });
    const res = fromBinary(
      RegressionResponseSchema,
      await h.grpc.unary(
        '/tensorflow.serving.PredictionService/Regress',
        toBinary(RegressionRequestSchema, req),
      ),
    );
    assert.deepEqual(
      res.result?.regressions.map((r) => r.value),
      [4],
    );
    assert.equal(res.modelSpec?.signatureName, 'serving_default');
    const classify = fromBinary(
      ClassificationResponseSchema,
      await h.grpc.unary(
        '/tensorflow.serving.PredictionService/Classify',
        toBinary(
          ClassificationRequestSchema,
          create(ClassificationRequestSchema, {
            modelSpec: { name: 'mobilenet', signatureName: 'serving_tensor' },
            input: {
              kind: {
                case: 'exampleList',
                value: {
                  examples: [
                    {
                      features: {
                        feature: {
                          input: { kind: { case: 'bytesList', value: { value: [image('cat_tabby.jpg')] } } },
                        },
                      },
                    },
                  ],
                },
              },
            },
          }),
        ),
      ),
    );
    const classes = classify.result!.classifications[0]!.classes;
    assert.equal(classes.length, 1000);
    assert.equal(classes.reduce((a, b) => (b.score > a.score ? b : a)).label, 'tabby, tabby cat');
  });

  it('Classify honours signature_name on every path: an encoded-image signature reads its own bytes feature', async () => {
    const photo = image('cat_tabby.jpg');
    const reference = allScores(await referenceLogits('cat_tabby.jpg'), { softmax: true });
    const check = (classes: { label: string; score: number }[], where: string): void => {
      assert.equal(classes.length, 1000, where);
      assert.equal(classes.reduce((a, b) => (b.score > a.score ? b : a)).label, 'tabby, tabby cat', where);
      for (const c of reference.slice(0, 5))
        assert.ok(Math.abs(classes[c.class_id]!.score - c.score) < 1e-4, where);
    };
    const pairs = (json: unknown): { label: string; score: number }[] =>
      (json as { results: [string, number][][] }).results[0]!.map(([label, score]) => ({ label, score }));
    // REST, by name and as serving_default (the encoded-image signature is the default here).
    for (const named of [{ signature_name: 'serving_bytes' }, {}]) {
      const rest = await postJson(`${h.rest}/v1/models/mobilenet:classify`, {
        ...named,
        examples: [{ image_bytes: { b64: b64(photo) } }],
      });
      assert.equal(rest.status, 200, JSON.stringify(rest.json));
      check(pairs(rest.json), `REST ${JSON.stringify(named)}`);
    }
    // gRPC.
    const classify = fromBinary(
      ClassificationResponseSchema,
      await h.grpc.unary(
        '/tensorflow.serving.PredictionService/Classify',
        toBinary(
          ClassificationRequestSchema,
          create(ClassificationRequestSchema, {
            modelSpec: { name: 'mobilenet', signatureName: 'serving_bytes' },
            input: {
              kind: {
                case: 'exampleList',
                value: {
                  examples: [
                    {
                      features: {
                        feature: { image_bytes: { kind: { case: 'bytesList', value: { value: [photo] } } } },
                      },
                    },
                  ],
                },
              },
            },
          }),
        ),
      ),
    );
    assert.equal(classify.modelSpec?.signatureName, 'serving_bytes');
    check(classify.result!.classifications[0]!.classes, 'gRPC');
    // /invocations (SageMaker's tfs-method=classify).
    const invoked = await request(`${h.sagemaker}/invocations`, {
      body: JSON.stringify({
        signature_name: 'serving_bytes',
        examples: [{ image_bytes: { b64: b64(photo) } }],
      }),
      headers: {
        'Content-Type': 'application/json',
        'X-Amzn-SageMaker-Custom-Attributes': 'tfs-model-name=mobilenet,tfs-method=classify',
      },
    });
    assert.equal(invoked.status, 200, invoked.text);
    check(pairs(invoked.json()), '/invocations');
    // The bytes feature missing: named as TF names a missing feature, not the tensor signature's input.
    const missing = await postJson(`${h.rest}/v1/models/mobilenet:classify`, {
      signature_name: 'serving_bytes',
      examples: [{ input: 1.0 }],
    });
    assert.equal(missing.status, 400);
    assert.match(
      (missing.json as { error: string }).error,
      /^Feature: image_bytes \(data type: string\) is required/,
    );
  });

  it('answers a missing or mistyped feature as TF Serving does (INVALID_ARGUMENT, TF wording)', async () => {
    const missing = await postJson(`${h.rest}/v1/models/half_plus_two:regress`, { examples: [{ y: 1.0 }] });
    assert.equal(missing.status, 400);
    assert.equal(
      (missing.json as { error: string }).error,
      'Name: <unknown>, Feature: x (data type: float) is required but could not be found.',
    );
    const mistyped = await postJson(`${h.rest}/v1/models/half_plus_two:regress`, { examples: [{ x: 'a' }] });
    assert.equal(mistyped.status, 400);
    assert.match(
      (mistyped.json as { error: string }).error,
      /Data types don't match\. Data type: string but expected type: float/,
    );
    const req = create(RegressionRequestSchema, {
      modelSpec: { name: 'half_plus_two' },
      input: { kind: { case: 'exampleList', value: { examples: [{}] } } },
    });
    await assert.rejects(
      h.grpc.unary('/tensorflow.serving.PredictionService/Regress', toBinary(RegressionRequestSchema, req)),
      (e: { code: number; message: string }) =>
        e.code === 3 && /Feature: x \(data type: float\) is required/.test(e.message),
    );
  });

  it('tfs-method=regress on /invocations takes tf.Examples', async () => {
    const res = await request(`${h.sagemaker}/invocations`, {
      body: JSON.stringify({ examples: [{ x: 2.0 }] }),
      headers: {
        'Content-Type': 'application/json',
        'X-Amzn-SageMaker-Custom-Attributes': 'tfs-model-name=half_plus_two,tfs-method=regress',
      },
    });
    assert.equal(res.status, 200, res.text);
    assert.deepEqual(res.json(), { results: [3] });
  });

  it('FP16: JSON numbers in and out over REST, half_val over gRPC, DT_HALF in metadata', async () => {
    const row = await postJson(`${h.rest}/v1/models/fp16:predict`, { instances: [1.0, 2.0, 5.0, -0.3] });
    assert.equal(row.status, 200, JSON.stringify(row.json));
    // Each answer is the float16 of 0.5 * x + 2, written as the shortest text that reads back as it.
    const expected = [1.0, 2.0, 5.0, -0.3].map((x) => numberToHalf(halfToNumber(numberToHalf(x)) * 0.5 + 2));
    const served = (row.json as { predictions: number[] }).predictions;
    assert.deepEqual(served.map(numberToHalf), expected);
    assert.deepEqual(served, [2.5, 3, 4.5, 1.85]);
    const columnar = await postJson(`${h.rest}/v1/models/fp16:predict`, { inputs: { x: [65504, 1e-8] } });
    assert.equal(columnar.status, 200);
    const req = create(PredictRequestSchema, { modelSpec: { name: 'fp16' } });
    req.inputs['x'] = tensorToProto(
      { dtype: 'float16', shape: [3], data: Uint16Array.from([1, 2, 5], numberToHalf) },
      { asTensorContent: false },
    );
    assert.equal(req.inputs['x'].halfVal.length, 3);
    const out = fromBinary(
      PredictResponseSchema,
      await h.grpc.unary(
        '/tensorflow.serving.PredictionService/Predict',
        toBinary(PredictRequestSchema, req),
      ),
    ).outputs['y']!;
    assert.equal(out.halfVal.length, 3);
    assert.deepEqual(out.halfVal.map(halfToNumber), [2.5, 3, 4.5]);
    const meta = await request(`${h.rest}/v1/models/fp16/metadata`);
    assert.match(meta.text, /"dtype":"DT_HALF"/);
  });

  it('KServe v2: BYTES images to the encoded-image signature, FP16 as JSON numbers', async () => {
    // KServe JSON carries BYTES as text; a JPEG travels in the binary data extension.
    const jpeg = image('cat_tabby.jpg');
    const header = Buffer.from(
      JSON.stringify({
        inputs: [
          {
            name: 'image_bytes',
            shape: [1],
            datatype: 'BYTES',
            parameters: { binary_data_size: jpeg.length + 4 },
          },
        ],
        outputs: [{ name: 'output' }],
      }),
    );
    const length = Buffer.alloc(4);
    length.writeUInt32LE(jpeg.length);
    const res = await fetch(`${h.rest}/v2/models/mobilenet/infer`, {
      method: 'POST',
      headers: {
        'content-type': 'application/octet-stream',
        'inference-header-content-length': String(header.length),
      },
      body: Buffer.concat([header, length, jpeg]),
    });
    const text = await res.text();
    assert.equal(res.status, 200, text);
    const out = (JSON.parse(text) as { outputs: { name: string; shape: number[]; data: number[] }[] })
      .outputs[0]!;
    assert.deepEqual(out.shape, [1, 1000]);
    const reference = await referenceLogits('cat_tabby.jpg');
    const served: Tensor = { dtype: 'float32', shape: [1, 1000], data: Float32Array.from(out.data) };
    assertSameTopK(allScores(served, { softmax: true }).slice(0, 5), allScores(reference, { softmax: true }));
    const fp16 = await postJson(`${h.rest}/v2/models/fp16/infer`, {
      inputs: [{ name: 'x', shape: [3], datatype: 'FP16', data: [1, 2, 5] }],
    });
    assert.equal(fp16.status, 200, JSON.stringify(fp16.json));
    const y = (fp16.json as { outputs: { datatype: string; data: number[] }[] }).outputs[0]!;
    assert.equal(y.datatype, 'FP16');
    assert.deepEqual(y.data, [2.5, 3, 4.5]);
  });

  it('bfloat16 models fail to load with a message that says why (onnxruntime-node has no bfloat16)', async () => {
    const status = (await request(`${h.rest}/v1/models/bf16`)).json() as {
      model_version_status: { state: string; status: { error_code: string; error_message: string } }[];
    };
    const v = status.model_version_status[0]!;
    assert.equal(v.state, 'END');
    assert.equal(v.status.error_code, 'UNIMPLEMENTED');
    assert.match(v.status.error_message, /bfloat16 .*onnxruntime-node/);
  });

  it('warmup files with image_bytes records replay through the decoder; a truncated JPEG fails the load', async () => {
    const byModel = Object.fromEntries(warmups.map((r) => [r.modelName, r]));
    assert.deepEqual(
      [byModel['mobilenet_warm'], byModel['mobilenet_warm_named']].map((r) => [r?.kind, r?.records, r?.runs]),
      [
        ['file', 1, 1],
        ['file', 2, 2],
      ],
    );
    assert.equal(byModel['mobilenet']?.kind, 'built-in', 'no warmup file: zero tensors');
    const { status, json } = await postJson(`${h.rest}/v1/models/mobilenet_warm_named/versions/1:predict`, {
      signature_name: 'serving_bytes',
      instances: [{ b64: b64(image('cat_tabby.jpg')) }],
    });
    assert.equal(status, 200, JSON.stringify(json));
    assert.equal(argmax(logitsOf((json as { predictions: unknown }).predictions)), 281);
    const bad = (await request(`${h.rest}/v1/models/mobilenet_bad_warmup`)).json() as {
      model_version_status: { state: string; status: { error_code: string; error_message: string } }[];
    };
    const v = bad.model_version_status[0]!;
    assert.equal(v.state, 'END');
    assert.equal(v.status.error_code, 'INVALID_ARGUMENT');
    assert.match(
      v.status.error_message,
      /^Warmup request 0 of assets.extra\/tf_serving_warmup_requests failed: Image 0: /,
    );
  });
});
