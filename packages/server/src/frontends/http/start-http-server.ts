import { type IncomingMessage, type ServerResponse, createServer } from 'node:http';

export interface StartHttpServerOptions {
  /** Interface to bind, e.g. "0.0.0.0" or "127.0.0.1". */
  readonly host: string;
  /** TCP port; 0 picks a free port (read it from the result). */
  readonly port: number;
  /** Request handler; it owns the response. */
  readonly handler: (req: IncomingMessage, res: ServerResponse) => void;
}

export interface StartedHttpServer {
  /** The bound port. */
  readonly port: number;
  /**
   * Stops accepting connections, closes idle keep-alive sockets and waits for
   * in-flight requests; after `graceMs` (default: no limit) the remaining
   * connections are closed.
   */
  close(graceMs?: number): Promise<void>;
}

/** Starts a node:http server; resolves once it is listening, rejects if binding fails. */
export function startHttpServer(options: StartHttpServerOptions): Promise<StartedHttpServer> {
  const server = createServer(options.handler);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => {
      server.off('error', reject);
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : options.port;
      resolve({
        port,
        close: (graceMs?: number) =>
          new Promise<void>((done, fail) => {
            const force =
              graceMs === undefined
                ? undefined
                : setTimeout(() => {
                    server.closeAllConnections();
                  }, graceMs);
            server.close((error) => {
              if (force !== undefined) clearTimeout(force);
              if (error) fail(error);
              else done();
            });
            server.closeIdleConnections();
          }),
      });
    });
  });
}
