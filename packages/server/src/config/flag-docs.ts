/**
 * What `visionserve serve --help` and docs/configuration.md say about the flags, made from the
 * one flag table (FLAGS) and the one table of defaults (DEFAULTS), so that neither can drift.
 * `scripts/gen-config-doc.mjs` writes the doc; `npm run lint` fails when it is stale.
 */
import { FLAGS, IGNORED_TF_SERVING_FLAGS, type FlagSpec } from './flags.js';
import { DEFAULTS } from './server-config.js';

export interface FlagGroup {
  readonly title: string;
  /** The doc that explains the group, relative to docs/. */
  readonly doc?: string;
  readonly flags: readonly string[];
}

/** The sections of docs/configuration.md; every flag is in exactly one (a unit test checks). */
export const FLAG_GROUPS: readonly FlagGroup[] = [
  {
    title: 'Listeners and models',
    doc: 'apis.md',
    flags: [
      'port',
      'rest_api_port',
      'sagemaker_port',
      'host',
      'model_name',
      'model_base_path',
      'model_config_file',
      'model_config_file_poll_wait_seconds',
      'file_system_poll_wait_seconds',
      'wait_for_models',
      'allow_version_labels_for_unavailable_models',
      'log_level',
      'open_ports_before_models_load',
      'grpc_socket_path',
      'max_num_load_retries',
      'load_retry_interval_micros',
    ],
  },
  {
    title: 'Inference: threads, instances, batching, warmup',
    doc: 'scaling.md',
    flags: [
      'tensorflow_intra_op_parallelism',
      'tensorflow_inter_op_parallelism',
      'model_instances',
      'ort_allow_spinning',
      'worker_thread_nice',
      'gc_headroom_mb',
      'idle_gc_after_ms',
      'enable_batching',
      'batching_parameters_file',
      'enable_per_model_batching_parameters',
      'enable_model_warmup',
      'num_request_iterations_for_warmup',
    ],
  },
  {
    title: 'TF Serving APIs',
    doc: 'tensorflow-users.md',
    flags: [
      'enable_serialization_as_tensor_content',
      'rest_api_timeout_in_ms',
      'rest_api_max_body_bytes',
      'rest_api_num_threads',
      'rest_api_enable_cors_support',
    ],
  },
  {
    title: 'Admission control and connections',
    doc: 'overload.md',
    flags: [
      'max_queue_wait_ms',
      'max_queued_requests',
      'admission_burst_per_instance',
      'max_json_decode_backlog_ms',
      'min_request_body_bytes_per_s',
      'max_inflight_request_bytes',
      'max_inflight_requests',
      'max_connections',
      'max_connections_per_address',
      'connection_first_bytes_timeout_ms',
      'http_keepalive_timeout_ms',
      'http_headers_timeout_ms',
      'request_body_timeout_ms',
      'json_max_depth',
      'json_max_object_keys',
      'json_max_values',
      'grpc_channel_arguments',
      'grpc_transport',
    ],
  },
  {
    title: 'Live video: frame streams',
    doc: 'video.md',
    flags: [
      'stream_max_open',
      'stream_max_frame_bytes',
      'stream_queue_frames',
      'stream_inflight_frames',
      'stream_unsent_answers',
    ],
  },
  {
    title: 'Operations',
    doc: 'operations.md',
    flags: [
      'monitoring_config_file',
      'access_log_sampling_rate',
      'access_log_max_failures_per_second',
      'otlp_traces_endpoint',
      'trace_sampling_rate',
      'ssl_config_file',
      'ssl_config_poll_seconds',
      'admin_token_file',
      'admin_client_names',
      'disable_model_management',
      'shutdown_readiness_delay_ms',
      'shutdown_grace_ms',
    ],
  },
  {
    title: 'KServe v2 / Open Inference Protocol',
    doc: 'kserve.md',
    flags: [
      'kserve_rest',
      'kserve_grpc',
      'kserve_sagemaker_port',
      'kserve_model_control_mode',
      'model_roots',
    ],
  },
  {
    title: 'Browser: console, OpenAPI, gRPC-web',
    doc: 'apis.md',
    flags: ['enable_console', 'console_path', 'enable_openapi', 'enable_grpc_web', 'grpc_web_cors_origins'],
  },
  {
    title: 'SageMaker-style endpoint',
    doc: 'sagemaker-endpoint.md',
    flags: [
      'sagemaker_default_model_name',
      'sagemaker_multi_model',
      'sagemaker_model_roots',
      'sagemaker_max_models',
      'sagemaker_memory_limit_bytes',
      'sagemaker_max_body_bytes',
      'sagemaker_request_timeout_ms',
      'sagemaker_handler_workers',
      'sagemaker_model_load_timeout_ms',
    ],
  },
  {
    title: 'SageMaker deployment: model directories, archives, S3, batch transform',
    doc: 'sagemaker-deployment.md',
    flags: [
      'sagemaker_model_dir',
      'model_cache_dir',
      'model_archive_max_bytes',
      'sagemaker_install_handler_dependencies',
      'sagemaker_max_concurrent_transforms',
      'sagemaker_max_payload_mb',
    ],
  },
  {
    title: 'TensorFlow SavedModels and the response cache',
    doc: 'tensorflow-users.md',
    flags: [
      'saved_model_converter_python',
      'saved_model_cache_dir',
      'saved_model_conversion_timeout_seconds',
      'response_cache_bytes',
    ],
  },
];

const MIB = 1024 * 1024;

/** A byte count as people write it (256 MiB, 16 GiB) when it is a whole number of MiB. */
function formatBytes(n: number): string {
  if (n === 0 || n % MIB !== 0) return String(n);
  return n % (1024 * MIB) === 0 ? `${n / (1024 * MIB)} GiB` : `${n / MIB} MiB`;
}

/** A flag's default as help and docs show it; undefined when it has none. */
export function flagDefault(spec: FlagSpec): string | undefined {
  if (spec.defaultText !== undefined) return spec.defaultText;
  const value: unknown = (DEFAULTS as Readonly<Record<string, unknown>>)[spec.key];
  if (value === undefined) return undefined;
  if (Array.isArray(value)) return value.length === 0 ? 'none' : value.join(',');
  if (typeof value === 'number' && spec.key.endsWith('Bytes')) return formatBytes(value);
  if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean')
    return String(value);
  return JSON.stringify(value);
}

/** One `--flag  help (default X; env NAME)` line per flag, for `visionserve serve --help`. */
export function flagHelpLines(): string[] {
  return Object.entries(FLAGS).map(([name, spec]) => {
    const notes = [
      ...(flagDefault(spec) === undefined ? [] : [`default ${flagDefault(spec)}`]),
      ...(spec.env === undefined ? [] : [`env ${spec.env}`]),
    ];
    return `  --${name.padEnd(44)} ${spec.help}${notes.length === 0 ? '' : ` [${notes.join('; ')}]`}`;
  });
}

function escapeCell(text: string): string {
  return text.replaceAll('|', '\\|');
}

function groupTable(group: FlagGroup): string[] {
  const heading =
    group.doc === undefined ? `## ${group.title}` : `## ${group.title}\n\nSee [${group.doc}](${group.doc}).`;
  const rows = group.flags.map((name) => {
    const spec = FLAGS[name];
    if (spec === undefined) throw new Error(`FLAG_GROUPS names an unknown flag --${name}`);
    const def = flagDefault(spec);
    const env = spec.env === undefined ? '' : `\`${spec.env}\``;
    return `| \`--${name}\` | ${def === undefined ? '—' : escapeCell(def)} | ${env} | ${escapeCell(spec.help)} |`;
  });
  return [
    heading,
    '',
    '| flag | default | environment | meaning |',
    '| --- | --- | --- | --- |',
    ...rows,
    '',
  ];
}

/** docs/configuration.md, whole. */
export function renderConfigurationDoc(): string {
  return [
    '<!-- Generated by scripts/gen-config-doc.mjs from packages/server/src/config (FLAGS, DEFAULTS, FLAG_GROUPS); do not edit. -->',
    '',
    '# Configuration: every `visionserve serve` flag',
    '',
    '`visionserve serve` takes TF Serving’s flag names (`--flag=value` or `--flag value`; a bare boolean',
    'flag means true, `--flag=false` turns it off; unknown flags are errors with a suggestion).',
    '`visionserve serve --help` prints the same table. Where the SageMaker TF Serving container has an',
    'environment variable for a setting, it is read too; flags win over the environment. Seconds-valued',
    'SageMaker variables (`*_SECONDS`) are converted to the flag’s milliseconds.',
    '',
    ...FLAG_GROUPS.flatMap(groupTable),
    '## TF Serving flags accepted and ignored',
    '',
    'So that a `tensorflow_model_server` command line works unchanged, these flags of TF Serving’s',
    '`main.cc` are accepted, warned about once at start, and ignored:',
    '',
    '| flag | why it has no meaning here |',
    '| --- | --- |',
    ...Object.entries(IGNORED_TF_SERVING_FLAGS).map(
      ([name, { why }]) => `| \`--${name}\` | ${escapeCell(why)} |`,
    ),
    '',
  ].join('\n');
}
