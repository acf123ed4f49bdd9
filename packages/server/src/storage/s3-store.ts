/**
 * S3 (and S3-compatible stores) through the AWS SDK: the standard credential chain
 * (environment, shared config/credentials files and profiles, SSO, web identity, container
 * and instance metadata), the standard region variables, and an endpoint override for
 * S3-compatible stores. The SDK is loaded on first use, so servers that never touch S3 do
 * not pay for it.
 */
import { createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Code, ServingError } from '@visionserve/protocol';

type S3Sdk = typeof import('@aws-sdk/client-s3');
type S3Client = import('@aws-sdk/client-s3').S3Client;

/** `s3://bucket/key-or-prefix`, split. */
export interface S3Location {
  readonly bucket: string;
  /** Key or prefix without a leading slash ("" for the whole bucket). */
  readonly key: string;
}

/** One object of a listing. */
export interface S3Object {
  readonly key: string;
  readonly size: number;
  readonly etag: string;
}

export interface S3StoreOptions {
  /**
   * Environment read for the endpoint override and region: `AWS_ENDPOINT_URL_S3`, else
   * `AWS_ENDPOINT_URL`, else TF Serving's `S3_ENDPOINT` (host[:port], with `S3_USE_HTTPS=0`
   * for plain HTTP); `AWS_REGION`, else `AWS_DEFAULT_REGION`, else us-east-1. An endpoint
   * override uses path-style addressing (`AWS_S3_FORCE_PATH_STYLE=false` turns it off).
   * Credentials come from the SDK's default chain, or from this environment's
   * AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN) when it is not
   * process.env and has them. Default: process.env.
   */
  readonly env?: Readonly<Record<string, string | undefined>> | undefined;
  /** Attempts per request (the SDK's retry strategy). Default 3. */
  readonly maxAttempts?: number | undefined;
}

/** Reads and writes objects; errors are ServingErrors with messages a user can act on. */
export interface S3Store {
  /** Every object under a prefix (all pages), keys in listing order. */
  list(location: S3Location): Promise<S3Object[]>;
  /** Metadata of one object, or undefined when it does not exist. */
  head(location: S3Location): Promise<{ size: number; etag: string } | undefined>;
  /** A whole object in memory. */
  get(location: S3Location): Promise<Buffer>;
  /** An object streamed to `path`, written to a temporary sibling first and renamed into place. */
  download(location: S3Location, path: string): Promise<void>;
  /** Writes an object (a single PUT; bodies up to 5 GiB). */
  put(location: S3Location, body: Uint8Array | string, contentType?: string): Promise<void>;
  /** The endpoint in use ("AWS" when none is overridden), for messages. */
  readonly endpoint: string;
}

export function isS3Uri(value: string): boolean {
  return /^s3:\/\//i.test(value);
}

/** Parses `s3://bucket[/key]`; INVALID_ARGUMENT when it is not one. */
export function parseS3Uri(uri: string): S3Location {
  const m = /^s3:\/\/([^/]+)\/?(.*)$/i.exec(uri);
  if (m === null || m[1] === '') {
    throw new ServingError(Code.INVALID_ARGUMENT, `"${uri}" is not an s3://bucket/key URI`);
  }
  return { bucket: m[1]!, key: m[2]! };
}

export function formatS3Uri(location: S3Location): string {
  return `s3://${location.bucket}/${location.key}`;
}

/** The endpoint override from the environment, if any. */
function endpointFrom(env: Readonly<Record<string, string | undefined>>): string | undefined {
  const explicit = env['AWS_ENDPOINT_URL_S3'] ?? env['AWS_ENDPOINT_URL'];
  if (explicit !== undefined && explicit !== '') return explicit;
  const tfs = env['S3_ENDPOINT'];
  if (tfs === undefined || tfs === '') return undefined;
  if (/^https?:\/\//i.test(tfs)) return tfs;
  const https = !['0', 'false'].includes((env['S3_USE_HTTPS'] ?? '1').toLowerCase());
  return `${https ? 'https' : 'http'}://${tfs}`;
}

/**
 * A ServingError for an SDK failure, naming the location and what to check. Bad
 * credentials and refused access are PERMISSION_DENIED / UNAUTHENTICATED, a missing
 * bucket or key NOT_FOUND, anything else UNAVAILABLE.
 */
export function describeS3Error(error: unknown, uri: string, endpoint: string): ServingError {
  if (error instanceof ServingError) return error;
  const e = error as {
    name?: string;
    Code?: string;
    message?: string;
    $metadata?: { httpStatusCode?: number };
  };
  const name = e.Code ?? e.name ?? 'Error';
  const status = e.$metadata?.httpStatusCode;
  const where = `${uri} (endpoint ${endpoint})`;
  const bucket = /^s3:\/\/([^/]+)/i.exec(uri)?.[1] ?? '';
  switch (name) {
    case 'NoSuchBucket':
      return new ServingError(Code.NOT_FOUND, `S3 bucket "${bucket}" does not exist: ${where}`, {
        cause: error,
      });
    case 'NoSuchKey':
    case 'NotFound':
      return new ServingError(Code.NOT_FOUND, `S3 object not found: ${where}`, { cause: error });
    case 'InvalidAccessKeyId':
    case 'SignatureDoesNotMatch':
    case 'InvalidToken':
    case 'ExpiredToken':
      return new ServingError(
        Code.UNAUTHENTICATED,
        `S3 rejected the credentials (${name}) for ${where}: check AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or the profile in use`,
        { cause: error },
      );
    case 'AccessDenied':
    case 'Forbidden':
      return new ServingError(Code.PERMISSION_DENIED, `S3 access denied (${name}) for ${where}`, {
        cause: error,
      });
    case 'CredentialsProviderError':
      return new ServingError(
        Code.UNAUTHENTICATED,
        `no AWS credentials found for ${where}: set AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run where a role is available`,
        { cause: error },
      );
    default: {
      if (status === 403) {
        return new ServingError(Code.PERMISSION_DENIED, `S3 refused ${where} (403 ${name})`, {
          cause: error,
        });
      }
      if (status === 404)
        return new ServingError(Code.NOT_FOUND, `S3: not found: ${where}`, { cause: error });
      return new ServingError(
        Code.UNAVAILABLE,
        `S3 request failed for ${where}: ${name}${e.message !== undefined && e.message !== name ? `: ${e.message}` : ''}`,
        { cause: error },
      );
    }
  }
}

/** Creates a store; the SDK client is created on the first request. */
export function createS3Store(options: S3StoreOptions = {}): S3Store {
  const env = options.env ?? process.env;
  const endpoint = endpointFrom(env);
  // An environment other than the process's carries its own keys; the default chain reads process.env.
  const keyId = env['AWS_ACCESS_KEY_ID'];
  const secret = env['AWS_SECRET_ACCESS_KEY'];
  const explicitCredentials =
    env !== process.env && keyId !== undefined && secret !== undefined
      ? {
          accessKeyId: keyId,
          secretAccessKey: secret,
          ...(env['AWS_SESSION_TOKEN'] === undefined ? {} : { sessionToken: env['AWS_SESSION_TOKEN'] }),
        }
      : undefined;
  let client: Promise<{ sdk: S3Sdk; client: S3Client }> | undefined;
  const connect = (): Promise<{ sdk: S3Sdk; client: S3Client }> => {
    client ??= import('@aws-sdk/client-s3').then((sdk) => {
      const forcePathStyle =
        endpoint !== undefined && (env['AWS_S3_FORCE_PATH_STYLE'] ?? 'true').toLowerCase() !== 'false';
      return {
        sdk,
        client: new sdk.S3Client({
          region: env['AWS_REGION'] ?? env['AWS_DEFAULT_REGION'] ?? 'us-east-1',
          maxAttempts: options.maxAttempts ?? 3,
          ...(endpoint === undefined ? {} : { endpoint, forcePathStyle }),
          ...(explicitCredentials === undefined ? {} : { credentials: explicitCredentials }),
        }),
      };
    });
    return client;
  };
  const shown = endpoint ?? 'AWS';
  const fail = (error: unknown, location: S3Location): ServingError =>
    describeS3Error(error, formatS3Uri(location), shown);

  return {
    endpoint: shown,
    async list(location) {
      const { sdk, client: s3 } = await connect();
      const out: S3Object[] = [];
      let token: string | undefined;
      try {
        do {
          const page = await s3.send(
            new sdk.ListObjectsV2Command({
              Bucket: location.bucket,
              Prefix: location.key,
              ...(token === undefined ? {} : { ContinuationToken: token }),
            }),
          );
          for (const o of page.Contents ?? []) {
            if (o.Key === undefined) continue;
            out.push({ key: o.Key, size: o.Size ?? 0, etag: o.ETag ?? '' });
          }
          token = page.IsTruncated === true ? page.NextContinuationToken : undefined;
        } while (token !== undefined);
      } catch (error) {
        throw fail(error, location);
      }
      return out;
    },
    async head(location) {
      const { sdk, client: s3 } = await connect();
      try {
        const r = await s3.send(new sdk.HeadObjectCommand({ Bucket: location.bucket, Key: location.key }));
        return { size: r.ContentLength ?? 0, etag: r.ETag ?? '' };
      } catch (error) {
        const e = fail(error, location);
        if (e.code === Code.NOT_FOUND && !e.message.includes('bucket')) return undefined;
        throw e;
      }
    },
    async get(location) {
      const { sdk, client: s3 } = await connect();
      try {
        const r = await s3.send(new sdk.GetObjectCommand({ Bucket: location.bucket, Key: location.key }));
        if (r.Body === undefined) return Buffer.alloc(0);
        return Buffer.from(await r.Body.transformToByteArray());
      } catch (error) {
        throw fail(error, location);
      }
    },
    async download(location, path) {
      const { sdk, client: s3 } = await connect();
      const tmp = `${path}.part-${process.pid}-${Math.random().toString(36).slice(2)}`;
      try {
        const r = await s3.send(new sdk.GetObjectCommand({ Bucket: location.bucket, Key: location.key }));
        const body = r.Body as Readable | undefined;
        await pipeline(body ?? Readable.from([]), createWriteStream(tmp));
        await rename(tmp, path);
      } catch (error) {
        await rm(tmp, { force: true });
        throw fail(error, location);
      }
    },
    async put(location, body, contentType) {
      const { sdk, client: s3 } = await connect();
      try {
        await s3.send(
          new sdk.PutObjectCommand({
            Bucket: location.bucket,
            Key: location.key,
            Body: body,
            ...(contentType === undefined ? {} : { ContentType: contentType }),
          }),
        );
      } catch (error) {
        throw fail(error, location);
      }
    },
  };
}
