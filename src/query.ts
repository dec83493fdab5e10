// The query-string parser. HTML forms (and URLSearchParams) write a space as `+`, but E.164 phones,
// e-mail addresses and ISO 8601 offsets contain a real `+` and never a space: in those parameters a
// `+` stays a `+`, elsewhere it is a space. Repeated keys become arrays (which the contract rejects).
export function createQueryParser(literalPlus: ReadonlySet<string>): (text: string) => Record<string, string | string[]> {
  const decode = (text: string): string => {
    try {
      return decodeURIComponent(text);
    } catch {
      return text;
    }
  };
  return (text) => {
    const found = new Map<string, string | string[]>();
    if (!text) return {};
    for (const pair of text.split('&')) {
      if (pair === '') continue;
      const at = pair.indexOf('=');
      const rawKey = at === -1 ? pair : pair.slice(0, at);
      const rawValue = at === -1 ? '' : pair.slice(at + 1);
      const key = decode(rawKey.replace(/\+/g, ' '));
      const value = decode(literalPlus.has(key) ? rawValue : rawValue.replace(/\+/g, ' '));
      const previous = found.get(key);
      found.set(key, previous === undefined ? value : [...(Array.isArray(previous) ? previous : [previous]), value]);
    }
    return Object.fromEntries(found);
  };
}

/**
 * The first parameter of a raw query string (after `?`) whose name or value has invalid
 * percent-encoding (`%E0%A4%A`, `%ZZ`, bytes that are not UTF-8), named as far as it decodes;
 * undefined when all decode. The parser above keeps such text as it came: this says it is refused.
 */
export function badlyEncodedParameter(text: string): string | undefined {
  if (!text.includes('%')) return undefined;
  for (const pair of text.split('&')) {
    if (!pair.includes('%')) continue;
    const at = pair.indexOf('=');
    const rawKey = at === -1 ? pair : pair.slice(0, at);
    let key: string;
    try {
      key = decodeURIComponent(rawKey);
    } catch {
      return rawKey;
    }
    try {
      if (at !== -1) decodeURIComponent(pair.slice(at + 1));
    } catch {
      return key;
    }
  }
  return undefined;
}
