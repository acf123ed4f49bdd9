import { readFile } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import { type SecureContextOptions, createSecureContext } from 'node:tls';
import type { ListenerTls } from '../frontends/shared/listener-tls.js';
import { type SslConfig, isInlinePem, parseSslConfig } from '../repository/ssl-config-file.js';
import type { Logger } from '../util/logger.js';

export interface TlsFilesOptions {
  /** The SSLConfig text file (`--ssl_config_file`). */
  readonly configFile: string;
  /** How often the config file and the PEM files it names are re-read, in ms; 0 never. Default 10000. */
  readonly pollIntervalMs?: number | undefined;
  readonly logger: Logger;
}

/** A started TLS configuration: hand `listener` to every listener; `close` stops watching. */
export interface TlsFiles {
  readonly listener: ListenerTls;
  readonly clientVerify: boolean;
  /** Re-reads the files now; resolves true when new certificates were applied. */
  reload(): Promise<boolean>;
  close(): void;
}

async function readContext(file: string): Promise<{ config: SslConfig; context: SecureContextOptions }> {
  const config = parseSslConfig(await readFile(file, 'utf8'), { source: file });
  const dir = dirname(file);
  const pem = async (value: string): Promise<string> =>
    isInlinePem(value) ? value : readFile(resolve(dir, value), 'utf8');
  const context: SecureContextOptions = {
    key: await pem(config.serverKey),
    cert: await pem(config.serverCert),
    ...(config.customCa === '' ? {} : { ca: await pem(config.customCa) }),
  };
  // Throws for a key that does not match the certificate, or unparsable PEM.
  createSecureContext(context);
  return { config, context };
}

/**
 * Loads TF Serving's SSLConfig and keeps it current: the file (and the PEM files it names)
 * are re-read every `pollIntervalMs`; new, valid certificates are applied to every
 * listener for new connections (rotation without restart), invalid ones are logged and
 * the current ones kept. `client_verify` cannot change at run time (it changes what the
 * listeners ask of clients); a change to it is logged and ignored until restart.
 */
export async function loadTlsFiles(options: TlsFilesOptions): Promise<TlsFiles> {
  const { configFile, logger } = options;
  const first = await readContext(configFile);
  const subscribers = new Set<(context: SecureContextOptions) => void>();
  let current = JSON.stringify(first.context);
  const reload = async (): Promise<boolean> => {
    let next: Awaited<ReturnType<typeof readContext>>;
    try {
      next = await readContext(configFile);
    } catch (error) {
      logger.error('TLS: could not reload the SSL config; keeping the current certificates', { error });
      return false;
    }
    const text = JSON.stringify(next.context);
    if (text === current) return false;
    if (next.config.clientVerify !== first.config.clientVerify) {
      logger.warn('TLS: client_verify changed; it takes effect after a restart');
    }
    current = text;
    for (const apply of subscribers) apply(next.context);
    logger.info('TLS: certificates reloaded', { file: configFile });
    return true;
  };
  const interval = options.pollIntervalMs ?? 10_000;
  const timer =
    interval > 0
      ? setInterval(() => {
          void reload();
        }, interval)
      : undefined;
  timer?.unref();
  return {
    clientVerify: first.config.clientVerify,
    listener: {
      context: first.context,
      clientVerify: first.config.clientVerify,
      subscribe(apply) {
        subscribers.add(apply);
        return () => subscribers.delete(apply);
      },
    },
    reload,
    close() {
      if (timer !== undefined) clearInterval(timer);
      subscribers.clear();
    },
  };
}
