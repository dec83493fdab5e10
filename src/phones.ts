// Phones as the contacts keep and find them, parsed and formatted with libphonenumber-js. One rule
// on top of it, Brazil's ninth digit: a mobile is `+55 DD 9XXXXXXXX` (13 digits), and WhatsApp still
// reports many older ones as `+55 DD XXXXXXXX` (12 digits, first subscriber digit 6-9), so the two
// forms are one person. Landlines (8 digits starting 2-5) never gain a 9. Pure: a phone's forms are
// worked out once and remembered (a bounded cache), as libphonenumber's parsing is the costly part
// of a customer's message (BENCHMARKS.md, issue 34) and one message asks for them several times.
import { parsePhoneNumberFromString } from 'libphonenumber-js';

const BRAZIL = '55';

/** The parts of an E.164 phone, or undefined when libphonenumber cannot read it (kept as given then). */
function parts(phone: string): { countryCallingCode: string; nationalNumber: string } | undefined {
  const parsed = parsePhoneNumberFromString(phone);
  return parsed ? { countryCallingCode: parsed.countryCallingCode, nationalNumber: parsed.nationalNumber } : undefined;
}

/** A Brazilian national number (DDD + subscriber) of a mobile without its ninth digit: 2-digit DDD, 8 digits starting 6-9. */
const isBrazilianMobileWithoutNine = (national: string): boolean => national.length === 10 && /^[1-9][1-9][6-9]/.test(national);
/** A Brazilian mobile in its 13-digit form: 2-digit DDD, 9, 8 digits starting 6-9. */
const isBrazilianMobileWithNine = (national: string): boolean => national.length === 11 && /^[1-9][1-9]9[6-9]/.test(national);

const e164 = (countryCallingCode: string, national: string): string =>
  parsePhoneNumberFromString(`+${countryCallingCode}${national}`)?.number ?? `+${countryCallingCode}${national}`;

/**
 * The form a phone is stored in: E.164 as libphonenumber formats it, a Brazilian mobile in its
 * 13-digit form (`+551187654321` -> `+5511987654321`). A phone libphonenumber cannot read is kept as given.
 */
export function storedPhone(phone: string): string {
  return formsOf(phone).stored;
}

/** How many phones' forms are remembered; past it the cache starts afresh. */
const MAX_REMEMBERED = 10_000;
const remembered = new Map<string, { stored: string; forms: readonly string[] }>();

/** The stored form and the forms of `phone`, parsed once. */
function formsOf(phone: string): { stored: string; forms: readonly string[] } {
  let known = remembered.get(phone);
  if (known === undefined) {
    const p = parts(phone);
    const stored = storedForm(phone, p);
    known = { stored, forms: allForms(phone, stored, p) };
    if (remembered.size >= MAX_REMEMBERED) remembered.clear();
    remembered.set(phone, known);
  }
  return known;
}

/** A phone as the contract takes it (Phone's pattern: E.164, 8 to 15 digits). */
const CONTRACT_PHONE = /^\+[1-9]\d{7,14}$/;

function storedForm(phone: string, p: ReturnType<typeof parts>): string {
  if (!p) return phone;
  if (p.countryCallingCode === BRAZIL && isBrazilianMobileWithoutNine(p.nationalNumber)) {
    return e164(BRAZIL, `${p.nationalNumber.slice(0, 2)}9${p.nationalNumber.slice(2)}`);
  }
  // libphonenumber drops a national trunk prefix written after the country code (`+44 0 20...`), which
  // may leave fewer digits than a phone of the contract has: such a phone is kept as given.
  const formatted = e164(p.countryCallingCode, p.nationalNumber);
  return CONTRACT_PHONE.test(formatted) ? formatted : phone;
}

/**
 * Every form a phone is found by: itself and its stored form, and for a Brazilian mobile both its
 * 12- and 13-digit forms (a contact stored before this rule may hold either). At most three, distinct.
 */
export function phoneForms(phone: string): string[] {
  return [...formsOf(phone).forms];
}

function allForms(phone: string, stored: string, p: ReturnType<typeof parts>): string[] {
  const forms = new Set([phone, stored]);
  if (p?.countryCallingCode === BRAZIL) {
    const national = p.nationalNumber;
    if (isBrazilianMobileWithNine(national)) forms.add(e164(BRAZIL, `${national.slice(0, 2)}${national.slice(3)}`));
    if (isBrazilianMobileWithoutNine(national)) forms.add(e164(BRAZIL, `${national.slice(0, 2)}9${national.slice(2)}`));
  }
  return [...forms];
}
