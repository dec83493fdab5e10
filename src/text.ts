// The service's one way with people's text: labels and names kept in NFC, one case fold for every
// comparison that ignores case (labels, the automations' text conditions), lengths counted in code
// points as the contract counts them, and file names cleaned alike whether uploaded or received.
import { ApiError } from './errors.js';

/** Text as it is kept: NFC, so a name typed decomposed (NFD) is the same name as its composed twin. */
export function normalizeText(text: string): string {
  return text.normalize('NFC');
}

/** The contract's bound on a name (an agent's, stage's, SLA policy's, automation's), and on a contact's. */
export const NAME_MAX = 120;
export const CONTACT_NAME_MAX = 200;

/**
 * A name a customer's message brings (Meta's profile name, the sandbox's `name`), as it is kept:
 * NFC, cut to `max` characters when NFC lengthened it past them. A message is never refused for its
 * sender's name, and nothing stored may break the contract.
 */
export function clippedName(name: string, max: number): string {
  const kept = normalizeText(name);
  return codePointLength(kept) <= max ? kept : [...kept].slice(0, max).join('');
}

/**
 * A name as it is kept (NFC), refused with a 400 naming `path` when NFC makes it longer than `max`
 * characters, the contract's bound for it: a few letters decompose in NFC (`ज़`, `הּ`), so a name
 * within the bound as sent may pass it as kept, and nothing stored may break the contract.
 */
export function normalizedName(name: string, max: number, path = '/body/name'): string {
  const kept = normalizeText(name);
  const length = codePointLength(kept);
  if (length > max) {
    throw new ApiError(400, 'validation_error', 'The request does not match the contract.', [
      { path, message: `must NOT have more than ${max} characters once in Unicode NFC (it has ${length})` },
    ]);
  }
  return kept;
}

/**
 * Unicode full case folding, the one fold of comparisons that ignore case: NFC first, and the
 * result in NFC. Upper case then lower case (with `ς` made `σ` and `ß` made `ss`, which it leaves)
 * gives the classes of CaseFolding.txt's full mappings (`ß` and `ẞ` are `ss`, `ﬁ` is `fi`, final `ς`
 * is `σ`, Cherokee's two cases meet, `İ` is `i` with its dot above), but for the dotless `ı`, folded
 * into `i`, which the table keeps apart. JavaScript's toLowerCase alone leaves `ß`, `ﬁ` and `ς` as
 * they are, and its final-sigma rule depends on the next letter.
 */
export function foldCase(text: string): string {
  return text.normalize('NFC').toUpperCase().toLowerCase().replace(/ς/g, 'σ').replace(/ß/g, 'ss').normalize('NFC');
}

/** Text with nothing to fold but ASCII letters' case (no marks, no special cases), the common case. */
const PRINTABLE_ASCII = /^[ -~]*$/;

/**
 * Text as the automations' text conditions compare it: case folded (foldCase), then accents
 * aside (decomposed, combining marks dropped), so "NÃO" contains "nao" and `İ` is `i`.
 */
export function foldText(text: string): string {
  if (PRINTABLE_ASCII.test(text)) return text.toLowerCase();
  return foldCase(text).normalize('NFD').replace(/\p{M}/gu, '');
}

/** The length as the contract counts it (JSON Schema's maxLength): code points, not UTF-16 units. */
export function codePointLength(text: string): number {
  let length = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    length++;
  }
  return length;
}

/** The most code points a file name keeps (an Attachment's `filename`, openapi.yaml). */
export const MAX_FILENAME_CHARS = 255;

/** C0 and C1 control characters (CR, LF, tab, DEL...): `\p{Cc}`. */
const CONTROLS = /\p{Cc}/gu;
/** Bidirectional controls (the embeddings and overrides, the isolates, the marks): they make `gpj.exe` read `exe.jpg`. */
const BIDI_CONTROLS = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu;

/**
 * A file's name as it is kept, uploaded (POST /media's `filename`) or received (Meta's): NFC, no
 * control characters nor bidirectional controls (dropped), no slashes nor backslashes (each an
 * underscore), trimmed, at most MAX_FILENAME_CHARS code points (its start kept). Null when
 * nothing is left.
 */
export function cleanFilename(name: string): string | null {
  const cleaned = normalizeText(name).replace(CONTROLS, '').replace(BIDI_CONTROLS, '').replace(/[/\\]/g, '_').trim();
  if (cleaned === '') return null;
  return codePointLength(cleaned) <= MAX_FILENAME_CHARS ? cleaned : [...cleaned].slice(0, MAX_FILENAME_CHARS).join('').trimEnd();
}
