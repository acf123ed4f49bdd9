// `@visionserve/server/entries`: the boot entry and the package entry for a process that is
// going to serve, from the esbuild bundle (dist/bundle/, scripts/bundle.mjs, written by
// `npm run build`) when there is one at least as new as the compiled modules it was made from,
// else from the modules themselves. Both come from the same place, so that they share one
// copy of every module (a ConfigError the server throws is boot's ConfigError).
import { stat } from 'node:fs/promises';

export type BootEntry = typeof import('./boot.js');
export type ServerEntry = typeof import('./index.js');

export interface ServerEntries {
  /** True when the bundle is used. */
  readonly bundled: boolean;
  readonly boot: BootEntry;
  /** Loads the package entry (the protocols, protobuf: most of the start-up). */
  server(): Promise<ServerEntry>;
}

export interface ServerEntriesOptions {
  /** Use the bundle when it is fresh. Default true; false always loads the modules. */
  readonly bundle?: boolean;
}

const BUNDLE = new URL('../bundle/index.js', import.meta.url);
/** The compiled projects the bundle is made of; a newer build of one makes the bundle stale. */
const BUILD_INFOS = [
  '../tsconfig.tsbuildinfo',
  '../../../protocol/dist/tsconfig.tsbuildinfo',
  '../../../vision/dist/tsconfig.tsbuildinfo',
];

const mtime = async (url: URL): Promise<number | undefined> => {
  try {
    return (await stat(url)).mtimeMs;
  } catch {
    return undefined;
  }
};

/** Whether dist/bundle exists and no compiled project was rebuilt after it (missing build info: not rebuilt). */
async function bundleIsFresh(): Promise<boolean> {
  const [bundle, ...built] = await Promise.all([
    mtime(BUNDLE),
    ...BUILD_INFOS.map((p) => mtime(new URL(p, import.meta.url))),
  ]);
  if (bundle === undefined) return false;
  return built.every((t) => t === undefined || t <= bundle);
}

/** Picks the bundle or the modules (see the module comment) and loads the boot entry. */
export async function loadServerEntries(options: ServerEntriesOptions = {}): Promise<ServerEntries> {
  if (options.bundle !== false && (await bundleIsFresh())) {
    const boot = (await import(new URL('../bundle/boot.js', import.meta.url).href)) as BootEntry;
    return {
      bundled: true,
      boot,
      server: async () => (await import(BUNDLE.href)) as ServerEntry,
    };
  }
  return {
    bundled: false,
    boot: await import('./boot.js'),
    server: () => import('./index.js'),
  };
}
