import { invalidArgument } from '@visionserve/protocol';

/** Paths the TF Serving REST handler owns (`(?i)/v1/.*`); others get 404. */
export const TFS_REST_PREFIX = /^\/v1\//i;

/** `POST /v1/models/{m}[/versions/{v}|/labels/{l}]:(predict|classify|regress)`; groups: name, version, label, method. */
export const TFS_POST_PATH =
  /^\/v1\/models\/([^/:]+)(?:(?:\/versions\/(\d+))|(?:\/labels\/([^/:]+)))?:(classify|regress|predict)$/i;

/** `GET /v1/models[/{m}[/versions/{v}|/labels/{l}]][/metadata]`; groups: name, version, label, "metadata". */
export const TFS_GET_PATH =
  /^\/v1\/models(?:\/([^/:]+))?(?:(?:\/versions\/(\d+))|(?:\/labels\/([^/:]+)))?(?:\/(metadata))?$/i;

/** The model a matched path names (groups 1-3: name, version, label), TF Serving's checks applied. */
export function modelFromMatch(m: RegExpExecArray): {
  name: string;
  version: number | undefined;
  label: string | undefined;
} {
  if (m[1] === undefined) throw invalidArgument('Missing model name in request.');
  return spec(m[1], m[2], m[3]);
}

function spec(
  rawName: string | undefined,
  rawVersion: string | undefined,
  rawLabel: string | undefined,
): { name: string; version: number | undefined; label: string | undefined } {
  const name = unescape(rawName ?? '');
  const label = rawLabel === undefined ? undefined : unescape(rawLabel);
  if (rawVersion !== undefined && label !== undefined) {
    throw invalidArgument(
      `Both model version (${rawVersion}) and model version label (${label}) cannot be supplied.`,
    );
  }
  let version: number | undefined;
  if (rawVersion !== undefined) {
    version = Number(rawVersion);
    if (!Number.isSafeInteger(version)) {
      throw invalidArgument(`Failed to convert version: ${rawVersion} to numeric.`);
    }
  }
  return { name, version, label };
}

/** Percent-decoding like curl_easy_unescape: valid %XX escapes are decoded, anything else kept. */
function unescape(text: string): string {
  if (!text.includes('%')) return text;
  try {
    return decodeURIComponent(text);
  } catch {
    const bytes: number[] = [];
    for (let i = 0; i < text.length; i++) {
      const hex = text.slice(i + 1, i + 3);
      if (text[i] === '%' && /^[0-9a-fA-F]{2}$/.test(hex)) {
        bytes.push(parseInt(hex, 16));
        i += 2;
      } else {
        bytes.push(...Buffer.from(text[i]!));
      }
    }
    return Buffer.from(bytes).toString('utf8');
  }
}
