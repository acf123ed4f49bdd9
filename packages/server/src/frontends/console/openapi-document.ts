/**
 * The OpenAPI 3.1 contract of every HTTP API visionserve serves, written once: TF Serving
 * REST, KServe v2 / Open Inference Protocol, health and metrics, the console's endpoints and
 * gRPC-web on the REST port; the SageMaker endpoint (its own port) as path items with their
 * own `servers`. Served at `/openapi.json`; CI validates it with an OpenAPI validator, and the
 * integration tests validate every HTTP response they receive against it.
 *
 * Schemas say what clients may rely on (required fields and their types); objects stay open
 * (extra fields allowed) where the protocol lets servers add fields.
 */

export interface OpenApiDocumentOptions {
  /** The server's version (info.version). */
  readonly version: string;
  /** Path of the Prometheus page (--monitoring_config_file), or undefined when metrics are off. Default: TF Serving's. */
  readonly metricsPath?: string | undefined;
  /** Path of the web console (--console_path). */
  readonly consolePath: string;
}

type Json = Record<string, unknown>;

const ref = (name: string): Json => ({ $ref: `#/components/schemas/${name}` });
const json = (schema: Json, description: string): Json => ({
  description,
  content: { 'application/json': { schema } },
});
const jsonBody = (schema: Json, required = true): Json => ({
  required,
  content: { 'application/json': { schema } },
});
const error = (description: string): Json => json(ref('Error'), description);
/** The error answers every model operation may give. */
const modelErrors = (extra: Json = {}): Json => ({
  '400': error('Malformed request or invalid argument'),
  '404': error('Model, version or label not found'),
  '413': error('Request body over the limit'),
  '415': error('Unsupported Content-Type'),
  '503': error('Overloaded or the model is unavailable (Retry-After)'),
  '4XX': error('Other client errors'),
  '5XX': error('Server error'),
  ...extra,
});

const modelParam: Json = {
  name: 'model',
  in: 'path',
  required: true,
  schema: { type: 'string' },
  description: 'Model name',
};
const versionParam: Json = {
  name: 'version',
  in: 'path',
  required: true,
  schema: { type: 'string', pattern: '^[0-9]+$' },
  description: 'Model version (a number)',
};
const labelParam: Json = {
  name: 'label',
  in: 'path',
  required: true,
  schema: { type: 'string' },
  description: 'Version label (e.g. stable, canary)',
};

/** TF Serving REST operations on a model, a version and a label. */
function tfsPaths(): Json {
  const out: Json = {};
  const variants: [string, Json[], string][] = [
    ['/v1/models/{model}', [modelParam], 'the model'],
    ['/v1/models/{model}/versions/{version}', [modelParam, versionParam], 'one version'],
    ['/v1/models/{model}/labels/{label}', [modelParam, labelParam], 'the version a label names'],
  ];
  for (const [base, parameters, what] of variants) {
    const suffix = base.replace(/[^a-z]/g, '_');
    out[base] = {
      get: {
        tags: ['TF Serving REST'],
        operationId: `tfsGetModelStatus${suffix}`,
        summary: `Status of ${what} (GetModelStatus)`,
        parameters,
        responses: modelErrors({ '200': json(ref('TfsModelStatus'), 'Version states') }),
      },
    };
    out[`${base}/metadata`] = {
      get: {
        tags: ['TF Serving REST'],
        operationId: `tfsGetModelMetadata${suffix}`,
        summary: `Signatures of ${what} (GetModelMetadata)`,
        parameters,
        responses: modelErrors({ '200': json(ref('TfsModelMetadata'), 'Model spec and signature_def') }),
      },
    };
    out[`${base}:predict`] = {
      post: {
        tags: ['TF Serving REST'],
        operationId: `tfsPredict${suffix}`,
        summary: `Predict on ${what}`,
        description:
          'Row format (`instances`) or columnar format (`inputs`); binary values as `{"b64": "..."}`. The answer is `predictions` for the row format and `outputs` for the columnar one. Request bodies may be gzip-encoded.',
        parameters,
        requestBody: jsonBody(ref('TfsPredictRequest')),
        responses: modelErrors({ '200': json(ref('TfsPredictResponse'), 'Model outputs') }),
      },
    };
    for (const op of ['classify', 'regress'] as const) {
      out[`${base}:${op}`] = {
        post: {
          tags: ['TF Serving REST'],
          operationId: `tfs${op}${suffix}`,
          summary: `${op === 'classify' ? 'Classify' : 'Regress'} on ${what} (not supported for ONNX models: 501)`,
          parameters,
          requestBody: jsonBody({ type: 'object' }),
          responses: modelErrors({
            '200': json({ type: 'object', required: ['results'] }, 'Results'),
            '501': error('Not supported'),
          }),
        },
      };
    }
  }
  out['/v1/models'] = {
    get: {
      tags: ['TF Serving REST'],
      operationId: 'tfsListModels',
      summary: 'No model named: TF Serving answers an error',
      responses: modelErrors(),
    },
  };
  return out;
}

/** KServe v2 server-level paths: metadata, health, statistics, repository index. */
function kserveServerPaths(): Json {
  const tags = ['KServe v2'];
  return {
    '/v2': {
      get: {
        tags,
        operationId: 'kserveServerMetadata',
        summary: 'Server metadata',
        responses: {
          '200': json(ref('KServeServerMetadata'), 'Name, version and extensions'),
          '4XX': error('Client error'),
        },
      },
    },
    '/v2/health/live': {
      get: {
        tags,
        operationId: 'kserveLive',
        summary: 'Server liveness',
        responses: {
          '200': json({ type: 'object', properties: { live: { type: 'boolean' } } }, 'Live'),
          '400': json({ type: 'object', properties: { live: { type: 'boolean' } } }, 'Not live'),
        },
      },
    },
    '/v2/health/ready': {
      get: {
        tags,
        operationId: 'kserveReady',
        summary: 'Server readiness',
        responses: {
          '200': json({ type: 'object', properties: { ready: { type: 'boolean' } } }, 'Ready'),
          '400': json({ type: 'object', properties: { ready: { type: 'boolean' } } }, 'Not ready'),
        },
      },
    },
    '/v2/models/stats': {
      get: {
        tags,
        operationId: 'kserveAllStatistics',
        summary: 'Inference statistics of every model version',
        responses: modelErrors({ '200': json(ref('KServeStatistics'), 'Statistics') }),
      },
    },
    '/v2/repository/index': {
      post: {
        tags: ['KServe v2', 'Model management'],
        operationId: 'kserveRepositoryIndex',
        summary: 'Models in the repository and their state',
        requestBody: jsonBody({ type: 'object', properties: { ready: { type: 'boolean' } } }, false),
        responses: modelErrors({
          '200': json({ type: 'array', items: ref('KServeRepositoryEntry') }, 'Index'),
        }),
      },
    },
  };
}

/** KServe v2 paths of one model, or of one of its versions (`base`). */
function kserveModelPaths(base: string, parameters: Json[]): Json {
  const tags = ['KServe v2'];
  const out: Json = {};
  const suffix = base.includes('versions') ? 'Version' : '';
  out[base] = {
    get: {
      tags,
      operationId: `kserveModelMetadata${suffix}`,
      summary: 'Model metadata (inputs, outputs, datatypes, shapes)',
      parameters,
      responses: modelErrors({ '200': json(ref('KServeModelMetadata'), 'Metadata') }),
    },
  };
  out[`${base}/ready`] = {
    get: {
      tags,
      operationId: `kserveModelReady${suffix}`,
      summary: 'Model readiness',
      parameters,
      responses: modelErrors({
        '200': json(
          {
            type: 'object',
            required: ['ready'],
            properties: { name: { type: 'string' }, ready: { type: 'boolean' } },
          },
          'Ready',
        ),
      }),
    },
  };
  out[`${base}/config`] = {
    get: {
      tags,
      operationId: `kserveModelConfig${suffix}`,
      summary: 'Model configuration (Triton model config shape)',
      parameters,
      responses: modelErrors({ '200': json({ type: 'object' }, 'Configuration') }),
    },
  };
  out[`${base}/stats`] = {
    get: {
      tags,
      operationId: `kserveModelStatistics${suffix}`,
      summary: 'Inference statistics',
      parameters,
      responses: modelErrors({ '200': json(ref('KServeStatistics'), 'Statistics') }),
    },
  };
  out[`${base}/infer`] = {
    post: {
      tags,
      operationId: `kserveInfer${suffix}`,
      summary: 'Inference (JSON, or JSON header + binary tensor data)',
      description:
        'With binary data, the body is the JSON header followed by raw tensor bytes and `Inference-Header-Content-Length` gives the JSON length (both ways). gzip and deflate encodings are accepted.',
      parameters,
      requestBody: {
        required: true,
        content: {
          'application/json': { schema: ref('KServeInferRequest') },
          'application/octet-stream': {
            schema: { type: 'string', contentMediaType: 'application/octet-stream' },
          },
        },
      },
      responses: modelErrors({
        '200': {
          description: 'Outputs',
          headers: {
            'Inference-Header-Content-Length': {
              description: 'Length of the JSON header when binary data follows',
              schema: { type: 'integer' },
            },
          },
          content: {
            'application/json': { schema: ref('KServeInferResponse') },
            'application/octet-stream': {
              schema: { type: 'string', contentMediaType: 'application/octet-stream' },
            },
          },
        },
        '501': error('Unsupported content encoding'),
      }),
    },
  };
  return out;
}

/** KServe v2 repository load and unload (explicit model control). */
function kserveRepositoryPaths(): Json {
  const out: Json = {};
  for (const action of ['load', 'unload'] as const) {
    out[`/v2/repository/models/{model}/${action}`] = {
      post: {
        tags: ['KServe v2', 'Model management'],
        operationId: `kserveRepository${action}`,
        summary: `${action === 'load' ? 'Load' : 'Unload'} a model (explicit model control; behind the management guard)`,
        parameters: [modelParam],
        requestBody: jsonBody({ type: 'object' }, false),
        responses: modelErrors({
          '200': json({ type: 'object' }, 'Done'),
          '401': error('Missing or wrong admin token'),
          '403': error('Management refused'),
        }),
      },
    };
  }
  return out;
}

/** KServe v2 (Open Inference Protocol) over HTTP. */
function kservePaths(): Json {
  return {
    ...kserveServerPaths(),
    ...kserveModelPaths('/v2/models/{model}', [modelParam]),
    ...kserveModelPaths('/v2/models/{model}/versions/{version}', [modelParam, versionParam]),
    ...kserveRepositoryPaths(),
  };
}

/** Health probes and metrics on every HTTP listener. */
function opsPaths(metricsPath: string | undefined): Json {
  const tags = ['Health and metrics'];
  const out: Json = {
    '/healthz': {
      get: {
        tags,
        operationId: 'healthz',
        summary: 'Liveness: 200 whenever the event loop answers',
        responses: {
          '200': json(
            { type: 'object', required: ['status'], properties: { status: { const: 'alive' } } },
            'Alive',
          ),
        },
      },
    },
    '/readyz': {
      get: {
        tags,
        operationId: 'readyz',
        summary: 'Readiness: every configured model has an AVAILABLE version and the server is not draining',
        responses: {
          '200': json(
            { type: 'object', required: ['status'], properties: { status: { const: 'ready' } } },
            'Ready',
          ),
          '503': json(
            {
              type: 'object',
              required: ['status', 'reason'],
              properties: {
                status: { const: 'not ready' },
                reason: { type: 'string' },
                models: { type: 'array' },
              },
            },
            'Not ready, with the reason',
          ),
        },
      },
    },
  };
  if (metricsPath !== undefined) {
    out[metricsPath] = {
      get: {
        tags,
        operationId: 'metrics',
        summary: 'Prometheus metrics (with --monitoring_config_file)',
        responses: {
          '200': {
            description: 'Prometheus text exposition',
            content: { 'text/plain': { schema: { type: 'string' } } },
          },
        },
      },
    };
  }
  return out;
}

/** The console, its data endpoints and the docs. */
const htmlPage = (description: string): Json => ({
  description,
  content: { 'text/html': { schema: { type: 'string' } } },
});
const staticAsset: Json = {
  description: 'A static file',
  content: {
    'text/html': { schema: { type: 'string' } },
    'text/javascript': { schema: { type: 'string' } },
    'text/css': { schema: { type: 'string' } },
    'text/plain': { schema: { type: 'string' } },
    'application/json': {},
    'image/*': { schema: { type: 'string' } },
  },
};

/** The console's HTML pages and static files. */
function consoleStaticPaths(consolePath: string): Json {
  const tags = ['Console'];
  return {
    '/openapi.json': {
      get: {
        tags,
        operationId: 'openapi',
        summary: 'This document',
        responses: { '200': json({ type: 'object', required: ['openapi'] }, 'OpenAPI 3.1') },
      },
    },
    '/docs': {
      get: {
        tags,
        operationId: 'docs',
        summary: 'API docs UI (static bundle, no CDN)',
        responses: { '200': htmlPage('Docs page'), '302': { description: 'Redirect to /docs/' } },
      },
    },
    [consolePath]: {
      get: {
        tags,
        operationId: 'console',
        summary: 'The web console (static single-page app; --console_path, --enable_console)',
        responses: {
          '200': htmlPage('Console page'),
          '302': { description: 'Redirect to the trailing slash' },
        },
      },
    },
    '/docs/': {
      get: {
        tags,
        operationId: 'docsPage',
        summary: 'API docs UI page',
        responses: { '200': htmlPage('Docs page') },
      },
    },
    '/docs/{file}': {
      get: {
        tags,
        operationId: 'docsAsset',
        summary: 'Docs UI assets (swagger-ui-dist, bundled)',
        parameters: [{ name: 'file', in: 'path', required: true, schema: { type: 'string' } }],
        responses: { '200': staticAsset, '404': error('No such file') },
      },
    },
    [`${consolePath}/`]: {
      get: {
        tags,
        operationId: 'consolePage',
        summary: 'The console page',
        responses: { '200': htmlPage('Console page') },
      },
    },
    [`${consolePath}/{file}`]: {
      get: {
        tags,
        operationId: 'consoleAsset',
        summary: 'Console assets (bundled at build)',
        parameters: [{ name: 'file', in: 'path', required: true, schema: { type: 'string' } }],
        responses: { '200': staticAsset, '404': error('No such file') },
      },
    },
  };
}

/** The console's JSON API. */
function consoleApiPaths(consolePath: string): Json {
  const tags = ['Console'];
  return {
    [`${consolePath}/api/models`]: {
      get: {
        tags,
        operationId: 'consoleModels',
        summary: 'Every model, version and state with load errors, timestamps, signatures and assets',
        responses: {
          '200': json(
            {
              type: 'object',
              required: ['models'],
              properties: { models: { type: 'array', items: ref('ConsoleModel') } },
            },
            'Models',
          ),
        },
      },
    },
    [`${consolePath}/api/labels/{model}/{version}`]: {
      get: {
        tags,
        operationId: 'consoleLabels',
        summary: 'Label names of a version (from its label file), index order',
        parameters: [modelParam, versionParam],
        responses: {
          '200': json(
            {
              type: 'object',
              required: ['labels'],
              properties: { labels: { type: 'array', items: { type: 'string' } } },
            },
            'Labels',
          ),
          '404': error('No such version'),
        },
      },
    },
    ...Object.fromEntries(
      [
        [`${consolePath}/api/try/{model}`, [modelParam], ''],
        [`${consolePath}/api/try/{model}/versions/{version}`, [modelParam, versionParam], 'Version'],
      ].map(([path, parameters, suffix]) => [
        path as string,
        {
          post: {
            tags,
            operationId: `consoleTry${suffix as string}`,
            summary: 'Try it: an image in, top-k classes or detections out, with the timing breakdown',
            parameters,
            requestBody: {
              required: true,
              content: {
                'image/*': { schema: { type: 'string', contentMediaType: 'image/*' } },
                'application/octet-stream': { schema: { type: 'string' } },
              },
            },
            responses: modelErrors({ '200': json(ref('ConsoleTryResult'), 'Predictions and timings') }),
          },
        },
      ]),
    ),
    [`${consolePath}/api/traffic`]: {
      get: {
        tags,
        operationId: 'consoleTraffic',
        summary: 'Live traffic as server-sent events (one `sample` event per second while connected)',
        description:
          'Read from the Prometheus metrics (needs --monitoring_config_file); nothing is computed while no client is connected. Without metrics, one `unavailable` event is sent.',
        responses: {
          '200': {
            description: 'Event stream',
            content: { 'text/event-stream': { schema: { type: 'string' } } },
          },
        },
      },
    },
  };
}

function consolePaths(consolePath: string): Json {
  return { ...consoleStaticPaths(consolePath), ...consoleApiPaths(consolePath) };
}

/** gRPC-web on the REST port. */
function grpcWebPaths(): Json {
  const methods: [string, string][] = [
    ['tensorflow.serving.PredictionService', 'Predict'],
    ['tensorflow.serving.PredictionService', 'GetModelMetadata'],
    ['tensorflow.serving.ModelService', 'GetModelStatus'],
    ['tensorflow.serving.ModelService', 'HandleReloadConfigRequest'],
  ];
  const out: Json = {};
  const frames = { type: 'string', contentMediaType: 'application/grpc-web+proto' };
  const preflight = (operationId: string): Json => ({
    tags: ['gRPC-web'],
    operationId,
    summary: 'CORS preflight (origins from --grpc_web_cors_origins)',
    responses: {
      '204': { description: 'Allowed: Access-Control-Allow-* headers' },
      '403': { description: 'Origin not allowed' },
    },
  });
  for (const service of ['tensorflow.serving.PredictionService', 'tensorflow.serving.ModelService']) {
    const short = service.split('.').at(-1)!;
    out[`/${service}/{method}`] = {
      post: {
        tags: ['gRPC-web'],
        operationId: `grpcWebUnknown${short}`,
        summary: `A method ${service} does not have: trailers-only UNIMPLEMENTED`,
        parameters: [{ name: 'method', in: 'path', required: true, schema: { type: 'string' } }],
        responses: {
          '200': { description: 'Trailers only (grpc-status 12)' },
          '405': error('Not POST'),
        },
      },
      options: preflight(`grpcWebPreflightUnknown${short}`),
    };
  }
  for (const [service, method] of methods) {
    out[`/${service}/${method}`] = {
      options: preflight(`grpcWebPreflight${method}`),
      post: {
        tags: ['gRPC-web'],
        operationId: `grpcWeb${method}`,
        summary: `${service}.${method} over gRPC-web`,
        description:
          'Body: one length-prefixed protobuf message (binary), or the same bytes in base64 (grpc-web-text). The answer carries the response message and a trailer frame; errors are trailers-only (grpc-status and grpc-message headers, empty body).',
        requestBody: {
          required: true,
          content: {
            'application/grpc-web+proto': { schema: frames },
            'application/grpc-web-text+proto': { schema: { type: 'string' } },
          },
        },
        responses: {
          '200': {
            description: 'Frames (or trailers only)',
            headers: {
              'grpc-status': { description: 'Set on trailers-only answers', schema: { type: 'string' } },
            },
            content: {
              'application/grpc-web+proto': { schema: frames },
              'application/grpc-web-text+proto': { schema: { type: 'string' } },
            },
          },
          '405': error('Not POST'),
          '413': error('Body over the limit'),
          '415': error('Not a gRPC-web content type'),
          '503': error('Overloaded (Retry-After)'),
        },
      },
    };
  }
  return out;
}

/** The SageMaker-style endpoint, on its own port. */
const SAGEMAKER_SERVERS = [
  {
    url: 'http://{host}:{port}',
    description: 'The SageMaker-style endpoint (--sagemaker_port)',
    variables: { host: { default: 'localhost' }, port: { default: '8080' } },
  },
];
const SAGEMAKER_BODY = {
  'application/json': { schema: {} },
  'application/jsonlines': { schema: { type: 'string' } },
  'text/csv': { schema: { type: 'string' } },
  'application/x-image': { schema: { type: 'string', contentMediaType: 'image/*' } },
  'image/jpeg': { schema: { type: 'string', contentMediaType: 'image/jpeg' } },
  'image/png': { schema: { type: 'string', contentMediaType: 'image/png' } },
};
const SAGEMAKER_INVOKE_RESPONSES = modelErrors({
  '200': {
    description: 'Model output (JSON by default; Accept selects JSON lines; handlers may answer other types)',
    content: {
      'application/json': { schema: {} },
      'application/jsonlines': { schema: { type: 'string' } },
      '*/*': { schema: {} },
    },
  },
  '406': error('Accept names no type the endpoint can produce'),
  '408': error('Model load timed out'),
  '507': error('Model limit or memory limit reached'),
});
/** The SageMaker endpoint: /ping, /execution-parameters, /invocations. */
function sageMakerEndpointPaths(): Json {
  const tags = ['SageMaker'];
  return {
    '/ping': {
      servers: SAGEMAKER_SERVERS,
      get: {
        tags,
        operationId: 'sagemakerPing',
        summary: 'Health check (the default model has an AVAILABLE version)',
        responses: {
          '200': json(
            {
              type: 'object',
              required: ['status'],
              properties: {
                status: { type: 'string' },
                model: { type: 'string' },
                version: { type: 'string' },
              },
            },
            'Healthy: "healthy", or the default model\'s AVAILABLE version',
          ),
          '503': error('Not healthy'),
        },
      },
    },
    '/execution-parameters': {
      servers: SAGEMAKER_SERVERS,
      get: {
        tags,
        operationId: 'sagemakerExecutionParameters',
        summary: 'What a Batch Transform job should use when it leaves these open',
        responses: {
          '200': json(
            {
              type: 'object',
              required: ['MaxConcurrentTransforms', 'BatchStrategy', 'MaxPayloadInMB'],
              properties: {
                MaxConcurrentTransforms: { type: 'integer', minimum: 1 },
                BatchStrategy: { enum: ['MULTI_RECORD', 'SINGLE_RECORD'] },
                MaxPayloadInMB: { type: 'integer', minimum: 1 },
              },
            },
            'Parallel requests, records per request, largest request in MiB',
          ),
        },
      },
    },
    '/invocations': {
      servers: SAGEMAKER_SERVERS,
      post: {
        tags,
        operationId: 'sagemakerInvocations',
        summary: 'Invoke the default model (or the one in X-Amzn-SageMaker-Custom-Attributes tfs-model-name)',
        parameters: [
          {
            name: 'X-Amzn-SageMaker-Custom-Attributes',
            in: 'header',
            required: false,
            schema: { type: 'string' },
            description: 'tfs-model-name=..., tfs-model-version=..., tfs-method=predict|classify|regress',
          },
        ],
        requestBody: { required: true, content: SAGEMAKER_BODY },
        responses: SAGEMAKER_INVOKE_RESPONSES,
      },
    },
  };
}

/** The SageMaker multi-model API (`POST /models` and the loaded models). */
function sageMakerMultiModelPaths(): Json {
  const tags = ['SageMaker'];
  return {
    '/models': {
      servers: SAGEMAKER_SERVERS,
      get: {
        tags: ['SageMaker', 'Model management'],
        operationId: 'sagemakerListModels',
        summary: 'Loaded models (multi-model endpoint)',
        responses: modelErrors({ '200': json({}, 'Models and their state') }),
      },
      post: {
        tags: ['SageMaker', 'Model management'],
        operationId: 'sagemakerLoadModel',
        summary: 'Load a model from a directory (behind the management guard)',
        requestBody: jsonBody({
          type: 'object',
          required: ['model_name', 'url'],
          properties: { model_name: { type: 'string' }, url: { type: 'string' } },
        }),
        responses: modelErrors({
          '200': json(
            { type: 'object', required: ['success'], properties: { success: { type: 'string' } } },
            'Loaded',
          ),
          '401': error('Missing or wrong admin token'),
          '403': error('Management refused'),
          '408': error('Load timed out'),
          '409': error('Already loaded'),
          '507': error('Model limit or memory limit reached'),
        }),
      },
    },
    '/models/{model}': {
      servers: SAGEMAKER_SERVERS,
      get: {
        tags: ['SageMaker', 'Model management'],
        operationId: 'sagemakerDescribeModel',
        summary: 'One loaded model',
        parameters: [modelParam],
        responses: modelErrors({ '200': json({ type: 'object', required: ['model'] }, 'The model') }),
      },
      delete: {
        tags: ['SageMaker', 'Model management'],
        operationId: 'sagemakerUnloadModel',
        summary: 'Unload a model (behind the management guard)',
        parameters: [modelParam],
        responses: modelErrors({
          '200': json(
            { type: 'object', required: ['success'], properties: { success: { type: 'string' } } },
            'Unloaded',
          ),
          '401': error('Missing or wrong admin token'),
          '403': error('Management refused'),
        }),
      },
    },
    '/models/{model}/invoke': {
      servers: SAGEMAKER_SERVERS,
      post: {
        tags,
        operationId: 'sagemakerInvokeModel',
        summary: 'Invoke one model of a multi-model endpoint',
        parameters: [modelParam],
        requestBody: { required: true, content: SAGEMAKER_BODY },
        responses: SAGEMAKER_INVOKE_RESPONSES,
      },
    },
  };
}

function sageMakerPaths(): Json {
  return { ...sageMakerEndpointPaths(), ...sageMakerMultiModelPaths() };
}

const schemas: Json = {
  Error: {
    type: 'object',
    required: ['error'],
    properties: { error: { type: 'string', description: 'What went wrong' } },
  },
  TfsModelStatus: {
    type: 'object',
    required: ['model_version_status'],
    properties: {
      model_version_status: {
        type: 'array',
        items: {
          type: 'object',
          required: ['version', 'state', 'status'],
          properties: {
            version: { type: 'string', pattern: '^[0-9]+$' },
            state: { enum: ['UNKNOWN', 'START', 'LOADING', 'AVAILABLE', 'UNLOADING', 'END'] },
            status: {
              type: 'object',
              required: ['error_code', 'error_message'],
              properties: { error_code: { type: 'string' }, error_message: { type: 'string' } },
            },
          },
        },
      },
    },
  },
  TfsModelMetadata: {
    type: 'object',
    required: ['model_spec', 'metadata'],
    properties: {
      model_spec: {
        type: 'object',
        required: ['name'],
        properties: {
          name: { type: 'string' },
          version: { type: 'string' },
          signature_name: { type: 'string' },
        },
      },
      metadata: {
        type: 'object',
        required: ['signature_def'],
        properties: {
          signature_def: {
            type: 'object',
            required: ['signature_def'],
            properties: { signature_def: { type: 'object', additionalProperties: ref('TfsSignatureDef') } },
          },
        },
      },
    },
  },
  TfsSignatureDef: {
    type: 'object',
    required: ['inputs', 'outputs', 'method_name'],
    properties: {
      inputs: { type: 'object', additionalProperties: ref('TfsTensorInfo') },
      outputs: { type: 'object', additionalProperties: ref('TfsTensorInfo') },
      method_name: { type: 'string' },
    },
  },
  TfsTensorInfo: {
    type: 'object',
    required: ['dtype', 'name'],
    properties: {
      dtype: { type: 'string', pattern: '^DT_' },
      name: { type: 'string' },
      tensor_shape: {
        type: 'object',
        properties: {
          dim: {
            type: 'array',
            items: { type: 'object', properties: { size: { type: 'string' }, name: { type: 'string' } } },
          },
          unknown_rank: { type: 'boolean' },
        },
      },
    },
  },
  TfsPredictRequest: {
    type: 'object',
    properties: {
      signature_name: { type: 'string' },
      instances: {
        description: 'Row format: a list (one entry per instance), or an object of named inputs per row',
      },
      inputs: { description: 'Columnar format: one tensor, or an object of named tensors' },
    },
    description: 'Exactly one of instances and inputs.',
  },
  TfsPredictResponse: {
    type: 'object',
    oneOf: [{ required: ['predictions'] }, { required: ['outputs'] }],
    properties: { predictions: {}, outputs: {} },
  },
  KServeServerMetadata: {
    type: 'object',
    required: ['name', 'version', 'extensions'],
    properties: {
      name: { type: 'string' },
      version: { type: 'string' },
      extensions: { type: 'array', items: { type: 'string' } },
    },
  },
  KServeTensorMetadata: {
    type: 'object',
    required: ['name', 'datatype', 'shape'],
    properties: {
      name: { type: 'string' },
      datatype: { type: 'string' },
      shape: { type: 'array', items: { type: 'integer' } },
    },
  },
  KServeModelMetadata: {
    type: 'object',
    required: ['name', 'platform', 'inputs', 'outputs'],
    properties: {
      name: { type: 'string' },
      versions: { type: 'array', items: { type: 'string' } },
      platform: { type: 'string' },
      inputs: { type: 'array', items: ref('KServeTensorMetadata') },
      outputs: { type: 'array', items: ref('KServeTensorMetadata') },
    },
  },
  KServeInferTensor: {
    type: 'object',
    required: ['name', 'shape', 'datatype'],
    properties: {
      name: { type: 'string' },
      shape: { type: 'array', items: { type: 'integer' } },
      datatype: { type: 'string' },
      parameters: { type: 'object' },
      data: {},
    },
  },
  KServeInferRequest: {
    type: 'object',
    required: ['inputs'],
    properties: {
      id: { type: 'string' },
      parameters: { type: 'object' },
      inputs: { type: 'array', items: ref('KServeInferTensor') },
      outputs: {
        type: 'array',
        items: {
          type: 'object',
          required: ['name'],
          properties: { name: { type: 'string' }, parameters: { type: 'object' } },
        },
      },
    },
  },
  KServeInferResponse: {
    type: 'object',
    required: ['model_name', 'outputs'],
    properties: {
      model_name: { type: 'string' },
      model_version: { type: 'string' },
      id: { type: 'string' },
      parameters: { type: 'object' },
      outputs: { type: 'array', items: ref('KServeInferTensor') },
    },
  },
  KServeStatistics: {
    type: 'object',
    required: ['model_stats'],
    properties: {
      model_stats: {
        type: 'array',
        items: {
          type: 'object',
          required: ['name', 'version', 'inference_count', 'execution_count', 'inference_stats'],
          properties: {
            name: { type: 'string' },
            version: { type: 'string' },
            last_inference: { type: 'integer' },
            inference_count: { type: 'integer' },
            execution_count: { type: 'integer' },
            inference_stats: { type: 'object' },
            batch_stats: { type: 'array' },
          },
        },
      },
    },
  },
  KServeRepositoryEntry: {
    type: 'object',
    required: ['name'],
    properties: {
      name: { type: 'string' },
      version: { type: 'string' },
      state: { type: 'string' },
      reason: { type: 'string' },
    },
  },
  ConsoleTryResult: {
    type: 'object',
    required: ['model', 'version', 'width', 'height', 'kind', 'timings'],
    properties: {
      model: { type: 'string' },
      version: { type: 'integer' },
      width: { type: 'integer' },
      height: { type: 'integer' },
      kind: { enum: ['classification', 'detection', 'raw'] },
      predictions: {
        description: 'Top-k classes (classification) or {num_detections, detections} (detection)',
      },
      outputs: {
        type: 'object',
        description: 'Raw outputs (dtype, shape, first values) without post-processing',
      },
      timings: {
        type: 'object',
        required: ['decodeMs', 'predictMs', 'postprocessMs', 'totalMs'],
        properties: {
          decodeMs: { type: 'number' },
          predictMs: { type: 'number' },
          postprocessMs: { type: 'number' },
          totalMs: { type: 'number' },
        },
      },
    },
  },
  ConsoleModel: {
    type: 'object',
    required: ['name', 'versions'],
    properties: {
      name: { type: 'string' },
      basePath: { type: 'string' },
      versionLabels: { type: 'object', additionalProperties: { type: 'integer' } },
      versions: {
        type: 'array',
        items: {
          type: 'object',
          required: ['version', 'state'],
          properties: {
            version: { type: 'integer' },
            state: { type: 'string' },
            error: { type: ['object', 'null'] },
            since: { type: ['string', 'null'] },
            signatures: { type: 'object' },
            assets: { type: 'object' },
            labels: { type: ['integer', 'null'], description: 'Number of labels in the label file' },
          },
        },
      },
    },
  },
};

/** The document (a fresh object each call). */
export function openApiDocument(options: OpenApiDocumentOptions): Json {
  const { consolePath } = options;
  return {
    openapi: '3.1.0',
    info: {
      title: 'visionserve HTTP APIs',
      version: options.version,
      summary: 'TF Serving REST, KServe v2, SageMaker, health, metrics, the console and gRPC-web',
      description:
        'Every HTTP API of a visionserve server. The REST port (--rest_api_port, default 8501) serves TF Serving REST, KServe v2, health, metrics, gRPC-web, the console and this document; the SageMaker-style endpoint has its own port (--sagemaker_port, default 8080). Errors are `{"error": "..."}` with TF Serving\'s HTTP status mapping unless a protocol says otherwise; a path no API knows is answered 404 with that shape. With --rest_api_enable_cors_support every path answers OPTIONS preflights (200, empty body; 400 without an Origin).',
      license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
    },
    servers: [
      {
        url: 'http://{host}:{port}',
        description: 'The REST port',
        variables: { host: { default: 'localhost' }, port: { default: '8501' } },
      },
    ],
    tags: [
      { name: 'TF Serving REST' },
      { name: 'KServe v2' },
      { name: 'SageMaker' },
      { name: 'Model management' },
      { name: 'Health and metrics' },
      { name: 'gRPC-web' },
      { name: 'Console' },
    ],
    paths: {
      ...tfsPaths(),
      ...kservePaths(),
      ...opsPaths(options.metricsPath),
      ...grpcWebPaths(),
      ...consolePaths(consolePath),
      ...sageMakerPaths(),
    },
    components: { schemas },
  };
}
