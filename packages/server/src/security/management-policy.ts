import { readFileSync } from 'node:fs';
import { timingSafeEqual } from 'node:crypto';
import { Code, ServingError } from '@visionserve/protocol';
import type { ManagementCredentials, ManagementGuard } from '../frontends/shared/management-guard.js';
import type { Logger } from '../util/logger.js';

export interface ManagementPolicyOptions {
  /** Refuse every management call. Default false. */
  readonly disabled?: boolean | undefined;
  /** A file holding the admin token: calls must send `Authorization: Bearer <token>`. */
  readonly tokenFile?: string | undefined;
  /**
   * Client certificate names (subject CN or DNS/URI/email SAN) allowed to manage models;
   * only verified certificates count (needs TLS with client_verify).
   */
  readonly clientNames?: readonly string[] | undefined;
  readonly logger: Logger;
}

/** Reads the token file on each check when it changed (rotation); its content, trimmed. */
function tokenReader(file: string): () => string {
  let cached = '';
  return () => {
    try {
      cached = readFileSync(file, 'utf8').trim();
    } catch {
      // Keep the last token when the file is briefly missing (atomic replace).
    }
    return cached;
  };
}

function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/**
 * The management guard of the composition root: open (no token, no names: TF Serving's
 * behaviour), disabled, or restricted to callers with the admin token or with a verified
 * client certificate whose name is allowed (either one suffices). Refusals are
 * PERMISSION_DENIED (HTTP 403) and logged; the token is never logged.
 */
export function createManagementPolicy(options: ManagementPolicyOptions): ManagementGuard & {
  readonly open: boolean;
} {
  const { logger } = options;
  const names = new Set(options.clientNames ?? []);
  const token = options.tokenFile === undefined ? undefined : tokenReader(options.tokenFile);
  if (token !== undefined && token() === '') {
    throw new ServingError(
      Code.INVALID_ARGUMENT,
      `--admin_token_file ${options.tokenFile!} is empty or unreadable`,
    );
  }
  const disabled = options.disabled ?? false;
  const open = !disabled && token === undefined && names.size === 0;
  const deny = (action: string, why: string): never => {
    logger.warn('management call refused', { action, why });
    throw new ServingError(Code.PERMISSION_DENIED, `${action} is not permitted: ${why}`);
  };
  return {
    open,
    check(credentials: ManagementCredentials, action: string) {
      if (open) return;
      if (disabled) deny(action, 'model management is disabled on this server');
      if (token !== undefined) {
        const header = credentials.authorization ?? '';
        const m = /^Bearer\s+(.+)$/i.exec(header.trim());
        if (m !== null && sameSecret(m[1]!, token())) return;
      }
      if (names.size > 0) {
        const peer = credentials.peer();
        if (peer?.authorized === true && peer.names.some((n) => names.has(n))) return;
      }
      deny(
        action,
        token !== undefined
          ? 'send the admin token as "Authorization: Bearer <token>"'
          : 'a client certificate with an allowed name is required',
      );
    },
  };
}
