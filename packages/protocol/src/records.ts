/** A new record with `fn` applied to every value (own enumerable keys, insertion order). */
export function mapValues<A, B>(record: Readonly<Record<string, A>>, fn: (value: A) => B): Record<string, B> {
  return Object.fromEntries(Object.entries(record).map(([k, v]) => [k, fn(v)]));
}
