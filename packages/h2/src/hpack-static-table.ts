/**
 * The HPACK static table (RFC 7541 Appendix A): 61 fixed entries, index 1 to 61. Index 0 of
 * both arrays is a placeholder so that an HPACK index reads its entry directly.
 */

/** Header names of the static table by HPACK index (1-61). */
export const STATIC_NAMES: readonly string[] = [
  '',
  ':authority',
  ':method',
  ':method',
  ':path',
  ':path',
  ':scheme',
  ':scheme',
  ':status',
  ':status',
  ':status',
  ':status',
  ':status',
  ':status',
  ':status',
  'accept-charset',
  'accept-encoding',
  'accept-language',
  'accept-ranges',
  'accept',
  'access-control-allow-origin',
  'age',
  'allow',
  'authorization',
  'cache-control',
  'content-disposition',
  'content-encoding',
  'content-language',
  'content-length',
  'content-location',
  'content-range',
  'content-type',
  'cookie',
  'date',
  'etag',
  'expect',
  'expires',
  'from',
  'host',
  'if-match',
  'if-modified-since',
  'if-none-match',
  'if-range',
  'if-unmodified-since',
  'last-modified',
  'link',
  'location',
  'max-forwards',
  'proxy-authenticate',
  'proxy-authorization',
  'range',
  'referer',
  'refresh',
  'retry-after',
  'server',
  'set-cookie',
  'strict-transport-security',
  'transfer-encoding',
  'user-agent',
  'vary',
  'via',
  'www-authenticate',
];

/** Header values of the static table by HPACK index (1-61); '' where the entry has none. */
export const STATIC_VALUES: readonly string[] = STATIC_NAMES.map((_, index) => {
  switch (index) {
    case 2:
      return 'GET';
    case 3:
      return 'POST';
    case 4:
      return '/';
    case 5:
      return '/index.html';
    case 6:
      return 'http';
    case 7:
      return 'https';
    case 8:
      return '200';
    case 9:
      return '204';
    case 10:
      return '206';
    case 11:
      return '304';
    case 12:
      return '400';
    case 13:
      return '404';
    case 14:
      return '500';
    case 16:
      return 'gzip, deflate';
    default:
      return '';
  }
});

/** Number of entries in the static table; dynamic table indices start after it. */
export const STATIC_TABLE_LENGTH = 61;

export interface StaticName {
  /** Lowest static index with this name. */
  readonly index: number;
  /** Static index of each (name, value) entry under this name. */
  readonly values: ReadonlyMap<string, number>;
}

const BY_NAME = new Map<string, StaticName>();
for (let index = STATIC_TABLE_LENGTH; index >= 1; index--) {
  const name = STATIC_NAMES[index]!;
  const known = BY_NAME.get(name);
  const values = new Map(known?.values ?? []);
  values.set(STATIC_VALUES[index]!, index);
  BY_NAME.set(name, { index, values });
}

/** The static table's entries under `name`, or undefined when it has no such name. */
export function staticName(name: string): StaticName | undefined {
  return BY_NAME.get(name);
}
