/**
 * The KServe v2 gRPC binding (inference.GRPCInferenceService) on our gRPC transport, driven by
 * an independent gRPC stack (grpc-js) over a real socket, with a fake core: every RPC,
 * Triton's status codes, raw and typed contents, classification, statistics, the repository,
 * and hostile ModelInfer messages.
 */
import assert from 'node:assert/strict';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { deflateSync, gzipSync } from 'node:zlib';
import * as grpc from '@grpc/grpc-js';
import {
  type DescMessage,
  type MessageInitShape,
  type MessageShape,
  create,
  fromBinary,
  toBinary,
} from '@bufbuild/protobuf';
import type { Tensor } from '@visionserve/protocol';
import { encodeBytesElements } from '@visionserve/protocol/kserve';
import {
  ModelConfigRequestSchema,
  ModelConfigResponseSchema,
  ModelInferRequestSchema,
  ModelInferResponseSchema,
  ModelMetadataRequestSchema,
  ModelMetadataResponseSchema,
  ModelReadyRequestSchema,
  ModelReadyResponseSchema,
  ModelStatisticsRequestSchema,
  ModelStatisticsResponseSchema,
  RepositoryIndexRequestSchema,
  RepositoryIndexResponseSchema,
  RepositoryModelLoadRequestSchema,
  RepositoryModelLoadResponseSchema,
  RepositoryModelUnloadRequestSchema,
  RepositoryModelUnloadResponseSchema,
  ServerLiveRequestSchema,
  ServerLiveResponseSchema,
  ServerMetadataRequestSchema,
  ServerMetadataResponseSchema,
  ServerReadyRequestSchema,
  ServerReadyResponseSchema,
  decodeModelInferResponse,
  encodeModelInferRequest,
} from '@visionserve/protocol/kserve-proto';
import { createInferenceStatistics } from '../src/core/inference-statistics.js';
import { type RunningGrpcServer, startGrpcServer } from '../src/frontends/grpc/index.js';
import { createKServeGrpcService, createKServeService } from '../src/frontends/kserve/index.js';
import { findModelDirectory, listModelDirectories } from '../src/repository/model-roots.js';
import { createManagementPolicy } from '../src/security/management-policy.js';
import { createJsonLogger } from '../src/util/logger.js';
import { CLS, ECHO, HALF, LABELS, addFake, registry, seen, service } from './kserve-fakes.js';
import { DEFAULTS } from '../src/config/server-config.js';
import { grpcServerSettings } from '../src/compose/config-settings.js';

const SERVICE = '/inference.GRPCInferenceService/';
const statistics = createInferenceStatistics();
const logs: string[] = [];
let server: RunningGrpcServer;
let controlNone: RunningGrpcServer;
let client: grpc.Client;
let clientNone: grpc.Client;
let roots: string;
let kserveService: ReturnType<typeof createKServeService>;
let kserveOptions: Parameters<typeof createKServeService>[0];
let connect: (port: number) => grpc.Client;

const asBuffer = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

interface CallOptions {
  readonly client?: grpc.Client;
  readonly deadlineMs?: number;
  /** Request metadata (e.g. authorization). */
  readonly metadata?: Readonly<Record<string, string>>;
}

/** One unary call with protobuf-es messages. */
function rpc<I extends DescMessage, O extends DescMessage>(
  method: string,
  input: I,
  output: O,
  request: MessageInitShape<I>,
  options: CallOptions = {},
): Promise<MessageShape<O>> {
  return raw(method, output, asBuffer(toBinary(input, create(input, request))), options);
}

/** One unary call sending `bytes` as the request message. */
function raw<O extends DescMessage>(
  method: string,
  output: O,
  bytes: Buffer,
  options: CallOptions = {},
): Promise<MessageShape<O>> {
  const metadata = new grpc.Metadata();
  for (const [key, value] of Object.entries(options.metadata ?? {})) metadata.set(key, value);
  return new Promise((resolve, reject) => {
    (options.client ?? client).makeUnaryRequest(
      SERVICE + method,
      (b: Buffer) => b,
      (b: Buffer) => fromBinary(output, b),
      bytes,
      metadata,
      options.deadlineMs === undefined ? {} : { deadline: Date.now() + options.deadlineMs },
      (error, response) => {
        if (error) reject(error);
        else resolve(response!);
      },
    );
  });
}

async function rejectsWith(promise: Promise<unknown>, code: grpc.status, details?: RegExp): Promise<void> {
  await assert.rejects(promise, (e: unknown) => {
    const error = e as grpc.ServiceError;
    assert.equal(error.code, code, `got ${grpc.status[error.code]}: ${error.details}`);
    if (details) assert.match(error.details, details);
    return true;
  });
}

/** ModelInfer with the client codec (raw contents, as tritonclient sends them). */
async function infer(
  init: Parameters<typeof encodeModelInferRequest>[0],
): Promise<ReturnType<typeof decodeModelInferResponse>> {
  const bytes = Buffer.concat(encodeModelInferRequest(init));
  const response = await raw('ModelInfer', ModelInferResponseSchema, bytes);
  // tritonclient reads raw_output_contents[i] for output i: one entry per output, always.
  assert.equal(response.rawOutputContents.length, response.outputs.length);
  return decodeModelInferResponse(toBinary(ModelInferResponseSchema, response));
}

const inferRaw = (init: MessageInitShape<typeof ModelInferRequestSchema>): Promise<unknown> =>
  rpc('ModelInfer', ModelInferRequestSchema, ModelInferResponseSchema, init);

const f32 = (...values: number[]): Tensor => ({
  dtype: 'float32',
  shape: [values.length],
  data: Float32Array.from(values),
});
const values = (t: Tensor | undefined): number[] => Array.from(t!.data as ArrayLike<number>);

before(async () => {
  roots = await mkdtemp(join(tmpdir(), 'vs-kserve-grpc-roots-'));
  await mkdir(join(roots, 'extra', '1'), { recursive: true });
  addFake('half', HALF);
  addFake('cls', CLS, LABELS);
  addFake('echo', ECHO);
  addFake('boom', HALF);
  addFake('slow', HALF);
  const logger = createJsonLogger({ level: 'debug', write: (line) => logs.push(line) });
  const options = {
    service,
    registry,
    statistics,
    modelControl: DEFAULTS.kserveModelControlMode,
    dynamicBatching: DEFAULTS.enableBatching,
    roots: {
      list: () => listModelDirectories([roots]),
      resolve: (n: string) => findModelDirectory([roots], n),
    },
    serverVersion: '9.9.9',
    maxBatchSize: 8,
    instanceCount: 2,
    logger,
  };
  kserveOptions = { ...options, modelControl: 'explicit' };
  const kserve = createKServeService(kserveOptions);
  kserveService = kserve;
  server = await startGrpcServer({
    ...grpcServerSettings(DEFAULTS),
    host: '127.0.0.1',
    port: 0,
    logger,
    services: [createKServeGrpcService({ kserve })],
  });
  controlNone = await startGrpcServer({
    ...grpcServerSettings(DEFAULTS),
    host: '127.0.0.1',
    port: 0,
    logger,
    services: [createKServeGrpcService({ kserve: createKServeService(options) })],
  });
  connect = (port: number): grpc.Client =>
    new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
      'grpc.max_receive_message_length': -1,
      'grpc.max_send_message_length': -1,
    });
  client = connect(server.port);
  clientNone = connect(controlNone.port);
});

after(async () => {
  client.close();
  clientNone.close();
  await server.close(0);
  await controlNone.close(0);
  await rm(roots, { recursive: true, force: true });
});

void describe('KServe v2 gRPC: health and metadata', () => {
  void it('answers ServerLive, ServerReady and ServerMetadata', async () => {
    assert.equal((await rpc('ServerLive', ServerLiveRequestSchema, ServerLiveResponseSchema, {})).live, true);
    assert.equal(
      (await rpc('ServerReady', ServerReadyRequestSchema, ServerReadyResponseSchema, {})).ready,
      true,
    );
    const md = await rpc('ServerMetadata', ServerMetadataRequestSchema, ServerMetadataResponseSchema, {});
    assert.equal(md.name, 'visionserve');
    assert.equal(md.version, '9.9.9');
    assert.ok(md.extensions.includes('statistics') && md.extensions.includes('model_repository'));
  });

  void it('ModelReady: true, false while loading, NOT_FOUND for an unknown model (Triton)', async () => {
    const ready = (name: string, version = ''): Promise<boolean> =>
      rpc('ModelReady', ModelReadyRequestSchema, ModelReadyResponseSchema, { name, version }).then(
        (r) => r.ready,
      );
    assert.equal(await ready('half'), true);
    assert.equal(await ready('half', '1'), true);
    assert.equal(await ready('cls', '2'), false);
    await rejectsWith(ready('nope'), grpc.status.NOT_FOUND, /nope/);
    await rejectsWith(ready('half', 'latest'), grpc.status.INVALID_ARGUMENT, /version string/);
  });

  void it('ModelMetadata and ModelConfig as the inference messages; UNAVAILABLE while loading', async () => {
    const md = await rpc('ModelMetadata', ModelMetadataRequestSchema, ModelMetadataResponseSchema, {
      name: 'cls',
    });
    assert.equal(md.name, 'cls');
    assert.deepEqual(md.versions, ['1']);
    assert.equal(md.platform, 'onnxruntime_onnx');
    assert.deepEqual(
      md.inputs.map((t) => [t.name, t.datatype, t.shape]),
      [['x', 'FP32', [-1n, 4n]]],
    );
    const { config } = await rpc('ModelConfig', ModelConfigRequestSchema, ModelConfigResponseSchema, {
      name: 'cls',
      version: '1',
    });
    assert.equal(config!.name, 'cls');
    assert.equal(config!.maxBatchSize, 8);
    assert.deepEqual(config!.input[0]!.dims, [4n]);
    assert.equal(config!.output[0]!.labelFilename, 'labels.txt');
    assert.equal(config!.instanceGroup[0]!.count, 2);
    await rejectsWith(
      rpc('ModelConfig', ModelConfigRequestSchema, ModelConfigResponseSchema, { name: 'cls', version: '2' }),
      grpc.status.UNAVAILABLE,
      /^Request for unknown model: 'cls' version 2 is not at ready state$/,
    );
    await rejectsWith(
      rpc('ModelMetadata', ModelMetadataRequestSchema, ModelMetadataResponseSchema, { name: 'nope' }),
      grpc.status.NOT_FOUND,
      /^Request for unknown model: 'nope' is not found$/,
    );
    await rejectsWith(
      rpc('ModelMetadata', ModelMetadataRequestSchema, ModelMetadataResponseSchema, {
        name: 'cls',
        version: '7',
      }),
      grpc.status.NOT_FOUND,
      /^Request for unknown model: 'cls' version 7 is not found$/,
    );
  });
});

void describe('KServe v2 gRPC: ModelInfer', () => {
  void it('raw contents in, raw contents out (one per output), id and version echoed', async () => {
    const result = await infer({
      modelName: 'half',
      id: 'req-1',
      inputs: [{ name: 'x', tensor: f32(0, 2, -4) }],
    });
    assert.equal(result.modelName, 'half');
    assert.equal(result.modelVersion, '1');
    assert.equal(result.id, 'req-1');
    assert.deepEqual(
      result.outputs.map((o) => o.name),
      ['y'],
    );
    assert.deepEqual(values(result.outputs[0]!.tensor), [2, 3, 0]);
  });

  void it('places the first raw input 8-byte aligned and hands the message buffer over (no copy)', async () => {
    for (const id of ['', 'x', 'abc', 'seven77']) {
      await infer({ modelName: 'half', id, inputs: [{ name: 'x', tensor: f32(1, 2, 3, 4, 5) }] });
      const request = seen.at(-1)!;
      const x = request.inputs['x']!.data as Float32Array;
      assert.equal(x.byteOffset % 8, 0, `id ${JSON.stringify(id)}: aligned`);
      assert.ok(x.buffer.byteLength > x.byteLength, 'a view of the request message, not a copy');
      assert.deepEqual(request.ownedBuffers, [x.buffer]);
    }
  });

  void it('typed contents in (every numeric family and BYTES), raw contents out', async () => {
    const result = await inferRaw({
      modelName: 'half',
      inputs: [{ name: 'x', datatype: 'FP32', shape: [2n], contents: { fp32Contents: [4, 6] } }],
    });
    const decoded = decodeModelInferResponse(toBinary(ModelInferResponseSchema, result as never));
    assert.deepEqual(values(decoded.outputs[0]!.tensor), [4, 5]);
    const echo = await rpc('ModelInfer', ModelInferRequestSchema, ModelInferResponseSchema, {
      modelName: 'echo',
      inputs: [
        { name: 'b', datatype: 'BOOL', shape: [2n], contents: { boolContents: [true, false] } },
        { name: 's', datatype: 'BYTES', shape: [1n], contents: { bytesContents: [Buffer.from('hi')] } },
        { name: 'l', datatype: 'UINT64', shape: [1n], contents: { uint64Contents: [2n ** 60n] } },
      ],
      outputs: [{ name: 'b_out' }, { name: 's_out' }, { name: 'l_out' }],
    });
    const out = decodeModelInferResponse(toBinary(ModelInferResponseSchema, echo));
    assert.deepEqual(values(out.outputs[0]!.tensor), [1, 0]);
    assert.equal(Buffer.from((out.outputs[1]!.tensor.data as Uint8Array[])[0]!).toString(), 'hi');
    assert.equal((out.outputs[2]!.tensor.data as BigUint64Array)[0], 2n ** 60n);
    assert.deepEqual(
      Buffer.from(echo.rawOutputContents[1]!),
      Buffer.from(encodeBytesElements([Buffer.from('hi')])),
    );
  });

  void it('every datatype raw: BOOL, BYTES, FP16, UINT64 round-trip with output selection', async () => {
    const result = await infer({
      modelName: 'echo',
      inputs: [
        { name: 'b', tensor: { dtype: 'bool', shape: [3], data: Uint8Array.of(1, 0, 1) } },
        { name: 's', tensor: { dtype: 'string', shape: [2], data: [Buffer.from('a'), Buffer.from('')] } },
        { name: 'h', tensor: { dtype: 'float16', shape: [1], data: Uint16Array.of(0x3c00) } },
        { name: 'l', tensor: { dtype: 'uint64', shape: [1], data: BigUint64Array.of(2n ** 63n) } },
      ],
      outputs: [{ name: 'l_out' }, { name: 's_out' }, { name: 'h_out' }],
    });
    assert.deepEqual(
      result.outputs.map((o) => [o.name, o.tensor.dtype]),
      [
        ['l_out', 'uint64'],
        ['s_out', 'string'],
        ['h_out', 'float16'],
      ],
    );
    assert.equal((result.outputs[0]!.tensor.data as BigUint64Array)[0], 2n ** 63n);
    assert.deepEqual(
      (result.outputs[1]!.tensor.data as Uint8Array[]).map((b) => Buffer.from(b).toString()),
      ['a', ''],
    );
    assert.deepEqual(values(result.outputs[2]!.tensor), [0x3c00]);
  });

  void it('classification: BYTES "value:index:label" per batch item, in raw contents', async () => {
    const x: Tensor = {
      dtype: 'float32',
      shape: [2, 4],
      data: Float32Array.of(0.1, 0.9, 0.3, 0.2, 5, 1, 7, 2),
    };
    const result = await infer({
      modelName: 'cls',
      inputs: [{ name: 'x', tensor: x }],
      outputs: [{ name: 'scores', classification: 2 }],
    });
    const t = result.outputs[0]!.tensor;
    assert.equal(t.dtype, 'string');
    assert.deepEqual(t.shape, [2, 2]);
    assert.deepEqual(
      (t.data as Uint8Array[]).map((b) => Buffer.from(b).toString()),
      ['0.900000:1:one', '0.300000:2:two', '7.000000:2:two', '5.000000:0:zero'],
    );
    await rejectsWith(
      inferRaw({
        modelName: 'cls',
        inputs: [{ name: 'x', datatype: 'FP32', shape: [1n, 4n], contents: { fp32Contents: [1, 2, 3, 4] } }],
        outputs: [
          {
            name: 'scores',
            parameters: { classification: { parameterChoice: { case: 'stringParam', value: '2' } } },
          },
        ],
      }),
      grpc.status.INVALID_ARGUMENT,
      /int64_param/,
    );
  });

  void it("answers Triton's codes: NOT_FOUND, INVALID_ARGUMENT, INTERNAL without details, DEADLINE_EXCEEDED", async () => {
    await rejectsWith(
      infer({ modelName: 'nope', inputs: [{ name: 'x', tensor: f32(1) }] }),
      grpc.status.NOT_FOUND,
    );
    await rejectsWith(
      infer({ modelName: 'half', modelVersion: '7', inputs: [{ name: 'x', tensor: f32(1) }] }),
      grpc.status.NOT_FOUND,
    );
    await rejectsWith(
      infer({ modelName: 'half', inputs: [{ name: 'q', tensor: f32(1) }] }),
      grpc.status.INVALID_ARGUMENT,
      /unexpected inference input 'q'/,
    );
    await rejectsWith(
      infer({
        modelName: 'half',
        inputs: [{ name: 'x', tensor: { dtype: 'int32', shape: [1], data: Int32Array.of(1) } }],
      }),
      grpc.status.INVALID_ARGUMENT,
      /data-type is 'INT32'/,
    );
    await rejectsWith(
      infer({ modelName: 'half', inputs: [{ name: 'x', tensor: f32(1) }], outputs: [{ name: 'zz' }] }),
      grpc.status.INVALID_ARGUMENT,
      /unexpected inference output 'zz'/,
    );
    await rejectsWith(
      infer({ modelName: 'boom', inputs: [{ name: 'x', tensor: f32(1) }] }),
      grpc.status.INTERNAL,
      /^Internal error$/,
    );
    assert.ok(!logs.some((l) => l.includes('secret') && !l.includes('"level":"error"')));
    const started = Date.now();
    await assert.rejects(
      raw(
        'ModelInfer',
        ModelInferResponseSchema,
        Buffer.concat(
          encodeModelInferRequest({ modelName: 'slow', inputs: [{ name: 'x', tensor: f32(1) }] }),
        ),
        { deadlineMs: 200 },
      ),
      (e: grpc.ServiceError) => e.code === grpc.status.DEADLINE_EXCEEDED,
    );
    assert.ok(Date.now() - started < 10_000);
  });
});

void describe('KServe v2 gRPC: hostile ModelInfer messages', () => {
  const halfInput = { name: 'x', datatype: 'FP32', shape: [2n] };
  const cases: [string, MessageInitShape<typeof ModelInferRequestSchema> | Buffer, RegExp][] = [
    [
      'undecodable bytes',
      Buffer.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f, 1]),
      /Malformed inference.ModelInferRequest/,
    ],
    ['a truncated message', Buffer.from([0x2a, 0x10, 0x0a]), /Malformed/],
    [
      'more raw contents than inputs',
      { modelName: 'half', inputs: [halfInput], rawInputContents: [new Uint8Array(8), new Uint8Array(8)] },
      /2 raw_input_contents for 1 inputs/,
    ],
    [
      'fewer raw contents than inputs',
      {
        modelName: 'echo',
        inputs: [halfInput, { name: 'y', datatype: 'FP32', shape: [1n] }],
        rawInputContents: [new Uint8Array(8)],
      },
      /1 raw_input_contents for 2 inputs/,
    ],
    [
      'raw contents and typed contents together',
      {
        modelName: 'half',
        inputs: [{ ...halfInput, contents: { fp32Contents: [1, 2] } }],
        rawInputContents: [new Uint8Array(8)],
      },
      /contents must not be given/,
    ],
    ['an input without data', { modelName: 'half', inputs: [halfInput] }, /no data/],
    [
      'raw bytes that do not match the shape',
      { modelName: 'half', inputs: [halfInput], rawInputContents: [new Uint8Array(12)] },
      /12 bytes of binary data, but FP32 shape \[2\] takes 8/,
    ],
    [
      'raw bytes that do not match the datatype',
      {
        modelName: 'half',
        inputs: [{ ...halfInput, datatype: 'FP64' }],
        rawInputContents: [new Uint8Array(8)],
      },
      /FP64 shape \[2\] takes 16/,
    ],
    [
      'a huge declared shape over a few bytes',
      {
        modelName: 'half',
        inputs: [{ ...halfInput, shape: [1n << 30n, 1n << 30n] }],
        rawInputContents: [new Uint8Array(8)],
      },
      /too many elements/,
    ],
    [
      'a declared element count far beyond the bytes',
      {
        modelName: 'half',
        inputs: [{ ...halfInput, shape: [100_000_000n] }],
        rawInputContents: [new Uint8Array(8)],
      },
      /takes 400000000/,
    ],
    [
      'a negative dimension',
      { modelName: 'half', inputs: [{ ...halfInput, shape: [-2n] }], rawInputContents: [new Uint8Array(8)] },
      /invalid dimension -2/,
    ],
    [
      'too many dimensions',
      {
        modelName: 'half',
        inputs: [{ ...halfInput, shape: Array.from({ length: 65 }, () => 1n) }],
        rawInputContents: [new Uint8Array(4)],
      },
      /more than 64 dimensions/,
    ],
    [
      'an unknown datatype',
      {
        modelName: 'half',
        inputs: [{ ...halfInput, datatype: 'FP8' }],
        rawInputContents: [new Uint8Array(8)],
      },
      /unknown datatype "FP8"/,
    ],
    [
      'a BYTES length prefix past the end',
      {
        modelName: 'echo',
        inputs: [{ name: 's', datatype: 'BYTES', shape: [1n] }],
        rawInputContents: [Uint8Array.of(0xff, 0xff, 0xff, 0x7f, 1, 2)],
      },
      /declares 2147483647 bytes but only 2 remain/,
    ],
    [
      'BYTES elements fewer than the shape',
      {
        modelName: 'echo',
        inputs: [{ name: 's', datatype: 'BYTES', shape: [1000n] }],
        rawInputContents: [encodeBytesElements([Buffer.from('a')])],
      },
      /cannot hold 1000 elements/,
    ],
    [
      'typed values of another datatype',
      { modelName: 'half', inputs: [{ ...halfInput, contents: { intContents: [1, 2] } }] },
      /int_contents, but datatype FP32 takes fp32_contents/,
    ],
    [
      'typed values fewer than the shape',
      { modelName: 'half', inputs: [{ ...halfInput, contents: { fp32Contents: [1] } }] },
      /1 values in fp32_contents, but shape \[2\] has 2 elements/,
    ],
    [
      'typed integers out of range',
      {
        modelName: 'echo',
        inputs: [{ name: 'b', datatype: 'UINT8', shape: [1n], contents: { uintContents: [300] } }],
      },
      /does not fit UINT8/,
    ],
    [
      'typed contents for FP16',
      { modelName: 'echo', inputs: [{ name: 'h', datatype: 'FP16', shape: [1n], contents: {} }] },
      /FP16 cannot be sent as typed contents/,
    ],
    [
      'a duplicate input',
      {
        modelName: 'half',
        inputs: [halfInput, halfInput],
        rawInputContents: [new Uint8Array(8), new Uint8Array(8)],
      },
      /appears more than once/,
    ],
    [
      'a parameter without a value',
      {
        modelName: 'half',
        parameters: { p: {} },
        inputs: [halfInput],
        rawInputContents: [new Uint8Array(8)],
      },
      /parameter 'p' has no value/,
    ],
  ];
  for (const [what, message, expected] of cases) {
    void it(`refuses ${what} with INVALID_ARGUMENT`, async () => {
      const bytes = Buffer.isBuffer(message)
        ? message
        : asBuffer(toBinary(ModelInferRequestSchema, create(ModelInferRequestSchema, message)));
      await rejectsWith(
        raw('ModelInfer', ModelInferResponseSchema, bytes),
        grpc.status.INVALID_ARGUMENT,
        expected,
      );
    });
  }

  void it('stays up and serves after all of them', async () => {
    const result = await infer({ modelName: 'half', inputs: [{ name: 'x', tensor: f32(2) }] });
    assert.deepEqual(values(result.outputs[0]!.tensor), [3]);
    assert.equal(server.inFlight, 0);
  });
});

void describe('KServe v2 gRPC: statistics and repository', () => {
  void it('ModelStatistics from the core recorder; "" asks for every model', async () => {
    statistics.recordSuccess('half', 1, {
      items: 1,
      totalNs: 9,
      inputNs: 1,
      queueNs: 2,
      inferNs: 5,
      outputNs: 1,
    });
    statistics.recordExecution('half', 1, { batchSize: 1, computeNs: 4 });
    const one = await rpc('ModelStatistics', ModelStatisticsRequestSchema, ModelStatisticsResponseSchema, {
      name: 'half',
    });
    assert.equal(one.modelStats.length, 1);
    const s = one.modelStats[0]!;
    assert.equal(s.version, '1');
    assert.ok(s.inferenceCount >= 1n && s.executionCount >= 1n);
    assert.ok(s.inferenceStats!.queue!.ns >= 2n);
    assert.equal(s.batchStats[0]!.batchSize, 1n);
    const all = await rpc('ModelStatistics', ModelStatisticsRequestSchema, ModelStatisticsResponseSchema, {});
    assert.ok(all.modelStats.some((m) => m.name === 'echo'));
    await rejectsWith(
      rpc('ModelStatistics', ModelStatisticsRequestSchema, ModelStatisticsResponseSchema, { name: 'nope' }),
      grpc.status.NOT_FOUND,
    );
  });

  void it('RepositoryIndex, RepositoryModelUnload and RepositoryModelLoad; Triton codes for what is not supported', async () => {
    const index = async (ready = false): Promise<{ name: string; state: string }[]> =>
      (
        await rpc('RepositoryIndex', RepositoryIndexRequestSchema, RepositoryIndexResponseSchema, { ready })
      ).models.map((m) => ({ name: m.name, state: m.state }));
    assert.ok((await index()).some((m) => m.name === 'extra' && m.state === ''));
    assert.ok((await index(true)).every((m) => m.state === 'READY'));
    await rpc(
      'RepositoryModelUnload',
      RepositoryModelUnloadRequestSchema,
      RepositoryModelUnloadResponseSchema,
      {
        modelName: 'slow',
        parameters: { unload_dependents: { parameterChoice: { case: 'boolParam', value: false } } },
      },
    );
    assert.deepEqual(
      (await index()).find((m) => m.name === 'slow'),
      { name: 'slow', state: 'UNAVAILABLE' },
    );
    await rpc('RepositoryModelLoad', RepositoryModelLoadRequestSchema, RepositoryModelLoadResponseSchema, {
      modelName: 'slow',
    });
    assert.deepEqual(
      (await index()).find((m) => m.name === 'slow'),
      { name: 'slow', state: 'READY' },
    );
    await rejectsWith(
      rpc('RepositoryIndex', RepositoryIndexRequestSchema, RepositoryIndexResponseSchema, {
        repositoryName: 'r',
      }),
      grpc.status.UNIMPLEMENTED,
      /repository_name/,
    );
    await rejectsWith(
      rpc('RepositoryModelLoad', RepositoryModelLoadRequestSchema, RepositoryModelLoadResponseSchema, {
        modelName: 'x',
        parameters: { config: { parameterChoice: { case: 'stringParam', value: '{}' } } },
      }),
      grpc.status.UNIMPLEMENTED,
      /not supported/,
    );
    await rejectsWith(
      rpc('RepositoryModelLoad', RepositoryModelLoadRequestSchema, RepositoryModelLoadResponseSchema, {
        modelName: '../etc',
      }),
      grpc.status.INVALID_ARGUMENT,
      /Invalid model name/,
    );
    await rejectsWith(
      rpc('RepositoryModelUnload', RepositoryModelUnloadRequestSchema, RepositoryModelUnloadResponseSchema, {
        modelName: 'ghost',
      }),
      grpc.status.NOT_FOUND,
    );
    await rejectsWith(
      rpc('RepositoryModelUnload', RepositoryModelUnloadRequestSchema, RepositoryModelUnloadResponseSchema, {
        modelName: 'half',
        parameters: { unload_dependents: { parameterChoice: { case: 'stringParam', value: 'no' } } },
      }),
      grpc.status.INVALID_ARGUMENT,
      /bool_param/,
    );
    await rejectsWith(
      rpc(
        'RepositoryModelLoad',
        RepositoryModelLoadRequestSchema,
        RepositoryModelLoadResponseSchema,
        { modelName: 'half' },
        { client: clientNone },
      ),
      grpc.status.UNAVAILABLE,
      /explicit/,
    );
    await rejectsWith(
      raw('CudaSharedMemoryStatus', ServerLiveResponseSchema, Buffer.alloc(0)),
      grpc.status.UNIMPLEMENTED,
    );
  });
});

void describe('KServe v2 gRPC: compressed request messages', () => {
  /** A raw gRPC call over node:http2 with a compressed message (grpc-js cannot send chosen bytes compressed). */
  const compressedCall = async (
    port: number,
    encoding: string,
    message: Uint8Array,
  ): Promise<{ status: string; message: string; body: Buffer }> => {
    const http2 = await import('node:http2');
    const session = http2.connect(`http://127.0.0.1:${port}`);
    try {
      return await new Promise((resolve, reject) => {
        const stream = session.request({
          ':method': 'POST',
          ':path': SERVICE + 'ModelInfer',
          'content-type': 'application/grpc',
          'grpc-encoding': encoding,
          te: 'trailers',
        });
        const chunks: Buffer[] = [];
        let status = '';
        let text = '';
        stream.on('response', (h) => {
          status = String(h['grpc-status'] ?? status);
          text = String(h['grpc-message'] ?? text);
        });
        stream.on('trailers', (h: Record<string, string | undefined>) => {
          status = h['grpc-status'] ?? status;
          text = h['grpc-message'] ?? text;
        });
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          resolve({ status, message: decodeURIComponent(text), body: Buffer.concat(chunks) });
        });
        stream.on('error', reject);
        const prefix = Buffer.alloc(5);
        prefix[0] = 1;
        prefix.writeUInt32BE(message.byteLength, 1);
        stream.end(Buffer.concat([prefix, message]));
      });
    } finally {
      session.close();
    }
  };
  const request = Buffer.concat(
    encodeModelInferRequest({ modelName: 'half', inputs: [{ name: 'x', tensor: f32(2, 4, 6) }] }),
  );

  void it('gzip and deflate (zlib) messages decode, aligned, like identity ones', async () => {
    for (const [encoding, bytes] of [
      ['gzip', gzipSync(request)],
      ['deflate', deflateSync(request)],
    ] as const) {
      const r = await compressedCall(server.port, encoding, bytes);
      assert.equal(r.status, '0', `${encoding}: ${r.message}`);
      const decoded = decodeModelInferResponse(r.body.subarray(5));
      assert.deepEqual(values(decoded.outputs[0]!.tensor), [3, 4, 5]);
      assert.equal((seen.at(-1)!.inputs['x']!.data as Float32Array).byteOffset % 8, 0);
    }
  });

  void it('refuses unknown encodings, corrupt data and bombs past the message limit; keeps serving', async () => {
    const snappy = await compressedCall(server.port, 'snappy', gzipSync(request));
    assert.equal(snappy.status, String(grpc.status.UNIMPLEMENTED));
    const corrupt = await compressedCall(server.port, 'gzip', Buffer.from('not gzip at all'));
    assert.equal(corrupt.status, String(grpc.status.INTERNAL));
    assert.match(corrupt.message, /decompress/);
    const small = await startGrpcServer({
      ...grpcServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      logger: createJsonLogger({ level: 'silent' }),
      maxMessageBytes: 1 << 20,
      services: [createKServeGrpcService({ kserve: kserveService })],
    });
    try {
      // 64 MiB of zeros in about 64 KiB.
      const bomb = await compressedCall(small.port, 'gzip', gzipSync(Buffer.alloc(64 << 20)));
      assert.equal(bomb.status, String(grpc.status.RESOURCE_EXHAUSTED), bomb.message);
    } finally {
      await small.close(0);
    }
    const again = await infer({ modelName: 'half', inputs: [{ name: 'x', tensor: f32(0) }] });
    assert.deepEqual(values(again.outputs[0]!.tensor), [2]);
  });
});

void describe('KServe v2 gRPC: management guard on the repository extension', () => {
  const token = 'kserve-admin-token';
  let guarded: RunningGrpcServer;
  let disabled: RunningGrpcServer;
  let guardedClient: grpc.Client;
  let disabledClient: grpc.Client;
  const guardLogs: string[] = [];
  before(async () => {
    const logger = createJsonLogger({ level: 'debug', write: (line) => guardLogs.push(line) });
    const tokenFile = join(roots, 'admin.token');
    await writeFile(tokenFile, `${token}\n`);
    // One KServe service (one registry) behind two guards, as the composition root builds it.
    const kserve = createKServeService(kserveOptions);
    guarded = await startGrpcServer({
      ...grpcServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      logger,
      services: [
        createKServeGrpcService({ kserve, managementGuard: createManagementPolicy({ tokenFile, logger }) }),
      ],
    });
    disabled = await startGrpcServer({
      ...grpcServerSettings(DEFAULTS),
      host: '127.0.0.1',
      port: 0,
      logger,
      services: [
        createKServeGrpcService({
          kserve,
          managementGuard: createManagementPolicy({ disabled: true, tokenFile, logger }),
        }),
      ],
    });
    guardedClient = connect(guarded.port);
    disabledClient = connect(disabled.port);
  });
  after(async () => {
    guardedClient.close();
    disabledClient.close();
    await guarded.close(0);
    await disabled.close(0);
  });

  const load = (
    c: grpc.Client,
    metadata: Record<string, string> = {},
    modelName = 'extra',
  ): Promise<unknown> =>
    rpc(
      'RepositoryModelLoad',
      RepositoryModelLoadRequestSchema,
      RepositoryModelLoadResponseSchema,
      { modelName },
      { client: c, metadata },
    );
  const unload = (
    c: grpc.Client,
    metadata: Record<string, string> = {},
    modelName = 'extra',
  ): Promise<unknown> =>
    rpc(
      'RepositoryModelUnload',
      RepositoryModelUnloadRequestSchema,
      RepositoryModelUnloadResponseSchema,
      { modelName },
      { client: c, metadata },
    );
  const isLoaded = (name: string): boolean => registry.modelConfig(name) !== undefined;

  void it('load and unload: PERMISSION_DENIED without the token or with a wrong one, OK with it', async () => {
    assert.equal(isLoaded('extra'), false);
    await rejectsWith(load(guardedClient), grpc.status.PERMISSION_DENIED, /load model is not permitted/);
    await rejectsWith(
      load(guardedClient, { authorization: 'Bearer wrong' }),
      grpc.status.PERMISSION_DENIED,
      /Authorization: Bearer/,
    );
    // A refused call changes nothing, even for a name that does not exist or is hostile.
    await rejectsWith(load(guardedClient, {}, '../etc'), grpc.status.PERMISSION_DENIED);
    assert.equal(isLoaded('extra'), false);
    await load(guardedClient, { authorization: `Bearer ${token}` });
    assert.equal(isLoaded('extra'), true);
    await rejectsWith(unload(guardedClient), grpc.status.PERMISSION_DENIED, /unload model is not permitted/);
    assert.equal(isLoaded('extra'), true);
    await unload(guardedClient, { authorization: `bearer ${token}` });
    assert.equal(isLoaded('extra'), false);
    // The token never reaches the logs.
    assert.ok(guardLogs.some((l) => l.includes('management call refused')));
    assert.ok(guardLogs.every((l) => !l.includes(token) && !l.includes('wrong')));
  });

  void it('only load and unload are guarded: index, metadata and inference stay open', async () => {
    const index = await rpc(
      'RepositoryIndex',
      RepositoryIndexRequestSchema,
      RepositoryIndexResponseSchema,
      {},
      { client: guardedClient },
    );
    assert.ok(index.models.some((m) => m.name === 'half'));
    const ready = await rpc(
      'ModelReady',
      ModelReadyRequestSchema,
      ModelReadyResponseSchema,
      { name: 'half' },
      { client: guardedClient },
    );
    assert.equal(ready.ready, true);
    const bytes = Buffer.concat(
      encodeModelInferRequest({ modelName: 'half', inputs: [{ name: 'x', tensor: f32(1, 2) }] }),
    );
    const response = await raw('ModelInfer', ModelInferResponseSchema, bytes, { client: guardedClient });
    assert.equal(response.outputs.length, 1);
  });

  void it('--disable_model_management refuses load and unload even with the token', async () => {
    const auth = { authorization: `Bearer ${token}` };
    await rejectsWith(load(disabledClient, auth), grpc.status.PERMISSION_DENIED, /disabled/);
    await rejectsWith(unload(disabledClient, auth, 'half'), grpc.status.PERMISSION_DENIED, /disabled/);
    assert.equal(isLoaded('half'), true);
  });
});
