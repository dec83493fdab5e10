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
