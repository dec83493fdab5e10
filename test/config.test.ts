// The configuration's renamed settings: RETRY_BASE_MS, RETRY_MAX_ATTEMPTS and OUTBOUND_ALLOW_PRIVATE_URLS
// are read under their first names too (DELIVERY_RETRY_BASE_MS, DELIVERY_MAX_ATTEMPTS,
// WEBHOOK_ALLOW_PRIVATE_URLS), which deployments set; the new name wins when both are set.
import { describe, expect, it } from 'vitest';
import { FIRST_NAMES, loadConfig } from '../src/config.js';

describe('renamed settings', () => {
  const cases = [
    { now: 'RETRY_BASE_MS', first: 'DELIVERY_RETRY_BASE_MS', field: 'retryBaseMs', byDefault: 1_000, a: '250', b: '4000', valueA: 250, valueB: 4_000 },
    { now: 'RETRY_MAX_ATTEMPTS', first: 'DELIVERY_MAX_ATTEMPTS', field: 'retryMaxAttempts', byDefault: 10, a: '3', b: '7', valueA: 3, valueB: 7 },
    {
      now: 'OUTBOUND_ALLOW_PRIVATE_URLS',
      first: 'WEBHOOK_ALLOW_PRIVATE_URLS',
      field: 'outboundAllowPrivateUrls',
      byDefault: true,
      a: 'false',
      b: 'true',
      valueA: false,
      valueB: true,
    },
  ] as const;

  it('when the renamed settings are listed, then each new name has its first name', () => {
    expect(FIRST_NAMES).toEqual(Object.fromEntries(cases.map((c) => [c.now, c.first])));
  });

  it.each(cases)('when only $now is set, then it is read; when neither is, the default holds', ({ now, field, byDefault, a, valueA }) => {
    expect(loadConfig({ [now]: a })[field]).toBe(valueA);
    expect(loadConfig({})[field]).toBe(byDefault);
  });

  it.each(cases)('when only its first name $first is set (or $now is empty), then it is read as before', ({ now, first, field, a, valueA }) => {
    expect(loadConfig({ [first]: a })[field]).toBe(valueA);
    expect(loadConfig({ [now]: '', [first]: a })[field]).toBe(valueA);
  });

  it.each(cases)('when both $now and $first are set, then $now wins', ({ now, first, field, a, b, valueA, valueB }) => {
    expect(loadConfig({ [now]: a, [first]: b })[field]).toBe(valueA);
    expect(loadConfig({ [now]: b, [first]: a })[field]).toBe(valueB);
  });

  it.each(cases)('when $first holds a bad value, then the start is refused naming $first, the name that was set', ({ now, first }) => {
    expect(() => loadConfig({ [first]: 'soon' })).toThrow(new RegExp(`^${first} must be`));
    expect(() => loadConfig({ [now]: 'soon', [first]: '1' })).toThrow(new RegExp(`^${now} must be`));
  });

  it('when a production database is configured, then private outbound URLs are refused unless either name allows them', () => {
    const production = { DATABASE_URL: 'postgres://db.example:5432/app' };
    expect(loadConfig(production).outboundAllowPrivateUrls).toBe(false);
    expect(loadConfig({ ...production, WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }).outboundAllowPrivateUrls).toBe(true);
    expect(loadConfig({ ...production, OUTBOUND_ALLOW_PRIVATE_URLS: 'true' }).outboundAllowPrivateUrls).toBe(true);
  });
});
