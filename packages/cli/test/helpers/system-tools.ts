/**
 * System tools the end-to-end tests drive (Debian's chromium and ffmpeg), installed with the
 * project's setup scripts when missing; otherwise the reason, for the test's skip.
 */
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { REPO_ROOT } from './shared.js';

/** Runs scripts/<script>; returns its output when `present` still says no afterwards. */
function installWith(script: string, present: () => boolean): string | undefined {
  const setup = spawnSync('bash', [join(REPO_ROOT, 'scripts', script)], {
    encoding: 'utf8',
    timeout: 600_000,
  });
  if (present()) return undefined;
  return (setup.stderr || setup.stdout || String(setup.error)).trim();
}

/** The chromium binary, installing it with scripts/setup-browser.sh when missing; or why not. */
export function findChromium(): { path: string } | { reason: string } {
  const which = (): string | undefined => {
    for (const bin of ['chromium', 'chromium-browser']) {
      const r = spawnSync('sh', ['-c', `command -v ${bin}`], { encoding: 'utf8' });
      if (r.status === 0 && r.stdout.trim() !== '') return r.stdout.trim();
    }
    return undefined;
  };
  const found = which();
  if (found !== undefined) return { path: found };
  const failure = installWith('setup-browser.sh', () => which() !== undefined);
  const after = which();
  if (after !== undefined) return { path: after };
  return {
    reason: `chromium is not installed and scripts/setup-browser.sh could not install it: ${failure}`,
  };
}

/** False when ffmpeg and ffprobe run (installing them with scripts/setup-ffmpeg.sh if needed); else why not. */
export function ffmpegMissing(): string | false {
  const has = (): boolean =>
    spawnSync('ffmpeg', ['-version']).status === 0 && spawnSync('ffprobe', ['-version']).status === 0;
  if (has()) return false;
  const failure = installWith('setup-ffmpeg.sh', has);
  if (failure === undefined) return false;
  return `ffmpeg is not installed and scripts/setup-ffmpeg.sh could not install it: ${failure}`;
}
