// The pure rules behind channels, without a server: the 24-hour window, forward-only statuses,
// backoff, what a Graph failure means, request bodies, reading webhooks, signatures, sealing
// secrets, and the configuration that carries them.
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { classifyGraphFailure, instagramTextBody, sentMessageId, whatsappTemplateBody, whatsappTextBody } from '../src/channels/graph.js';
import { statusesBefore, templateContent, withinMessagingWindow } from '../src/services/channel-rules.js';
import { createSecretBox, parseKey } from '../src/secrets.js';
import { parseMetaWebhook, signatureMatches, whatsappContent } from '../src/channels/webhook.js';
import { ConfigError, loadConfig } from '../src/config.js';
import { backoffMs, MAX_RETRY_DELAY_MS, retryDelayMs } from '../src/jobs/backoff.js';
import { metaSignature } from './helpers/graph.js';

describe('the 24-hour window', () => {
  const now = new Date('2026-11-20T12:00:00.000Z');
  it.each([
    [null, false],
    [new Date('2026-11-19T12:00:00.000Z'), true],
    [new Date('2026-11-19T11:59:59.999Z'), false],
    [new Date('2026-11-20T11:00:00.000Z'), true],
  ])('when the contact last wrote at %s, then free text is allowed: %s', (last, allowed) => {
    expect(withinMessagingWindow(last, now)).toBe(allowed);
  });
});

describe('statuses move forward only', () => {
  it.each([
    ['sent', ['queued']],
    ['delivered', ['queued', 'sent']],
    ['read', ['queued', 'sent', 'delivered']],
    ['failed', ['queued', 'sent']],
    ['queued', []],
    ['deleted', []],
    ['warning', []],
  ])('when Meta reports %s, then it applies to a message in %j', (status, from) => {
    expect(statusesBefore(status)).toEqual(from);
  });
});

describe('backoff', () => {
  it('when attempts fail, then the waits double from the base, jittered by ±25 %, and never pass 10 minutes', () => {
    expect([1, 2, 3, 4].map((n) => retryDelayMs(n, 1_000, 0.5))).toEqual([1_000, 2_000, 4_000, 8_000]);
    expect(retryDelayMs(1, 1_000, 0)).toBe(750);
    expect(retryDelayMs(1, 1_000, 0.999_999)).toBe(1_250);
    expect(retryDelayMs(10, 1_000, 0.5)).toBe(512_000);
    expect(retryDelayMs(11, 1_000, 0.5)).toBe(MAX_RETRY_DELAY_MS);
    expect(retryDelayMs(10, 1_000, 0.999)).toBe(MAX_RETRY_DELAY_MS);
    expect(retryDelayMs(1_000, 1_000, 0.5)).toBe(MAX_RETRY_DELAY_MS);
  });

  it('when another caller backs off without jitter or with its own, then it doubles from its base up to its cap', () => {
    expect([1, 2, 3, 4, 5, 6, 7].map((n) => backoffMs(n, { baseMs: 250, maxMs: 5_000, jitter: 0 }, 0.9))).toEqual([
      250, 500, 1_000, 2_000, 4_000, 5_000, 5_000,
    ]);
    expect(backoffMs(2, { baseMs: 1_000, maxMs: 30_000, jitter: 0.1 }, 0)).toBe(1_800);
    expect(backoffMs(2, { baseMs: 1_000, maxMs: 30_000, jitter: 0.1 }, 0.999_999)).toBe(2_200);
    expect(backoffMs(1, { baseMs: 0, maxMs: 30_000, jitter: 0 })).toBe(1);
  });
});

describe('Graph failures', () => {
  const graph = (code: number, status = 400) => [status, { error: { message: `code ${code}`, type: 'OAuthException', code, fbtrace_id: 'A1' } }] as const;
  it.each([
    [...graph(1), true],
    [...graph(2), true],
    [...graph(4), true],
    [...graph(80007), true],
    [...graph(130429), true],
    [...graph(131000), true],
    [...graph(131016), true],
    [...graph(100), false],
    [...graph(190, 401), false],
    [...graph(131026), false],
    [...graph(131047), false],
    [...graph(368, 500), true],
    [429, undefined, true],
    [503, 'Service Unavailable', true],
    [400, undefined, false],
  ])('when Graph answers HTTP %s with %j, then transient is %s', (status, body, transient) => {
    const failure = classifyGraphFailure(status, body);
    expect(failure.transient).toBe(transient);
    const code = (body as { error?: { code: number } } | undefined)?.error?.code;
    expect(failure.code).toBe(code !== undefined ? String(code) : `http_${status}`);
  });

  it('when a send worked, then the id is messages[0].id (WhatsApp) or message_id (Instagram)', () => {
    expect(sentMessageId({ messaging_product: 'whatsapp', contacts: [{ input: '1', wa_id: '1' }], messages: [{ id: 'wamid.X' }] })).toBe('wamid.X');
    expect(sentMessageId({ recipient_id: '1784', message_id: 'mid.Y' })).toBe('mid.Y');
    expect(sentMessageId({})).toBeUndefined();
  });
});

describe('Graph request bodies', () => {
  it('when text goes to WhatsApp, then the phone loses its +', () => {
    expect(whatsappTextBody('+5511987654321', 'Oi')).toEqual({
      messaging_product: 'whatsapp',
      recipient_type: 'individual',
      to: '5511987654321',
      type: 'text',
      text: { body: 'Oi' },
    });
  });
  it('when a template goes to WhatsApp, then parameters become body components', () => {
    expect(whatsappTemplateBody('+5511987654321', { name: 't', language: 'pt_BR', parameters: ['a'] })).toEqual({
      messaging_product: 'whatsapp',
      recipient_type: 'individual',
      to: '5511987654321',
      type: 'template',
      template: { name: 't', language: { code: 'pt_BR' }, components: [{ type: 'body', parameters: [{ type: 'text', text: 'a' }] }] },
    });
    expect(templateContent({ name: 't', parameters: ['a', 'b'] })).toBe('[template t] a, b');
    expect(templateContent({ name: 't' })).toBe('[template t]');
  });
  it('when text goes to Instagram, then it is recipient.id and message.text', () => {
    expect(instagramTextBody('1784', 'Oi')).toEqual({ recipient: { id: '1784' }, message: { text: 'Oi' } });
  });
});

describe('reading webhooks', () => {
  it.each([
    [{ type: 'text', text: { body: 'Oi' } }, 'Oi'],
    [{ type: 'image', image: { caption: 'foto' } }, '[image] foto'],
    [{ type: 'audio', audio: { id: '1' } }, '[audio]'],
    [{ type: 'document', document: { filename: 'nota.pdf' } }, '[document] nota.pdf'],
    [{ type: 'sticker', sticker: {} }, '[sticker]'],
    [{ type: 'reaction', reaction: { message_id: 'w', emoji: '👍' } }, '[reaction] 👍'],
    [{ type: 'button', button: { text: 'Parar promoções', payload: 'p' } }, 'Parar promoções'],
    [{ type: 'interactive', interactive: { type: 'list_reply', list_reply: { id: '1', title: 'Trocar' } } }, 'Trocar'],
    [{ type: 'contacts', contacts: [{ name: { formatted_name: 'João' } }] }, '[contacts] João'],
    [{ type: 'order', order: {} }, '[order]'],
    [{}, '[unknown]'],
  ])('when a WhatsApp message is %j, then it reads %j', (message, content) => {
    expect(whatsappContent(message)).toBe(content);
  });

  it('when the object is neither WhatsApp nor Instagram, or the body has no entry, then it is not understood', () => {
    const channel = { type: 'whatsapp' as const, externalId: '1' };
    expect(parseMetaWebhook({ object: 'page', entry: [] }, channel)).toBeUndefined();
    expect(parseMetaWebhook({ object: 'whatsapp_business_account' }, channel)).toBeUndefined();
    expect(parseMetaWebhook('x', channel)).toBeUndefined();
    expect(parseMetaWebhook({ object: 'whatsapp_business_account', entry: [] }, channel)).toEqual({ events: [], ignored: [] });
  });

  it('when a WhatsApp change holds messages and statuses, then each becomes an event, named from contacts', () => {
    const parsed = parseMetaWebhook(
      {
        object: 'whatsapp_business_account',
        entry: [
          {
            id: 'waba',
            changes: [
              {
                field: 'messages',
                value: {
                  messaging_product: 'whatsapp',
                  metadata: { display_phone_number: '1555', phone_number_id: '106' },
                  contacts: [{ profile: { name: 'Sheena Nelson' }, wa_id: '16505551234' }],
                  messages: [{ from: '16505551234', id: 'wamid.A', timestamp: '1749416383', type: 'text', text: { body: 'Oi' } }],
                  statuses: [
                    { id: 'wamid.B', status: 'failed', timestamp: '1', recipient_id: '1', errors: [{ code: 131026, title: 'Message undeliverable' }] },
                  ],
                },
              },
              { field: 'account_update', value: {} },
            ],
          },
        ],
      },
      { type: 'whatsapp', externalId: '106' },
    );
    expect(parsed).toEqual({
      events: [
        // A profile without a username: the customer shows none now (null clears one shown before).
        {
          kind: 'message',
          externalId: 'wamid.A',
          from: { phone: '+16505551234', username: null },
          name: 'Sheena Nelson',
          content: 'Oi',
          sentAt: new Date(1_749_416_383_000),
        },
        { kind: 'status', externalId: 'wamid.B', status: 'failed', error: { code: '131026', message: 'Message undeliverable' } },
      ],
      ignored: ['a change of field account_update'],
    });
  });
});

describe('signatures', () => {
  const body = Buffer.from('{"object":"instagram","entry":[]}');
  it('when the header is the HMAC of the raw body under the app secret, then it matches (hex in either case)', () => {
    expect(signatureMatches('s3cret', body, metaSignature('s3cret', body))).toBe(true);
    expect(signatureMatches('s3cret', body, metaSignature('s3cret', body).toUpperCase().replace('SHA256=', 'sha256='))).toBe(true);
  });
  it.each([
    ['another secret', metaSignature('other', body)],
    ['a truncated one', metaSignature('s3cret', body).slice(0, -2)],
    ['no prefix', metaSignature('s3cret', body).slice(7)],
    ['none', undefined],
    ['empty', ''],
  ])('when the header is %s, then it does not match', (_label, header) => {
    expect(signatureMatches('s3cret', body, header)).toBe(false);
  });
});

describe('sealed secrets', () => {
  it('when sealed, then the value opens to the same text, differs each time, and names its key', () => {
    const box = createSecretBox(randomBytes(32));
    const a = box.seal('EAAtoken');
    const b = box.seal('EAAtoken');
    expect(a).not.toBe(b);
    expect(a.split('.')[1]).toBe(box.keyId);
    expect([box.open(a), box.open(b)]).toEqual(['EAAtoken', 'EAAtoken']);
  });

  it('when the key is rotated, then old values open with the previous key, are stale, and re-seal under the new one', () => {
    const oldKey = randomBytes(32);
    const sealed = createSecretBox(oldKey).seal('segredo');
    const rotated = createSecretBox(randomBytes(32), [oldKey]);
    expect(rotated.open(sealed)).toBe('segredo');
    expect(rotated.isStale(sealed)).toBe(true);
    const resealed = rotated.seal(rotated.open(sealed));
    expect(rotated.isStale(resealed)).toBe(false);
    expect(() => createSecretBox(randomBytes(32)).open(sealed)).toThrow(/neither SECRETS_KEY nor in SECRETS_KEY_PREVIOUS/);
  });

  it('when a sealed value is tampered with, then it does not open', () => {
    const box = createSecretBox(randomBytes(32));
    const parts = box.seal('segredo').split('.');
    parts[4] = Buffer.from('outro').toString('base64url');
    expect(() => box.open(parts.join('.'))).toThrow(/does not open/);
  });

  it('when SECRETS_KEY is not the base64 of 32 bytes, then the configuration is refused with a clear message', () => {
    expect(() => parseKey('abc', 'SECRETS_KEY')).toThrow(/base64 of 32 random bytes/);
    expect(() => loadConfig({ SECRETS_KEY: randomBytes(16).toString('base64') })).toThrow(ConfigError);
    expect(() => loadConfig({ SECRETS_KEY: 'not base64 at all!' })).toThrow(/SECRETS_KEY must be the base64 of 32 random bytes/);
    expect(() => loadConfig({ SECRETS_KEY_PREVIOUS: randomBytes(32).toString('base64') })).toThrow(/SECRETS_KEY_PREVIOUS needs SECRETS_KEY/);
    const key = randomBytes(32);
    expect(loadConfig({ SECRETS_KEY: key.toString('base64') }).secretsKey).toEqual(key);
  });

  it('when the delivery settings are read, then the defaults are those documented and a request may outlast the lease (it is renewed)', () => {
    const config = loadConfig({});
    expect([config.metaGraphUrl, config.retryBaseMs, config.retryMaxAttempts, config.metaGraphTimeoutMs]).toEqual([
      'https://graph.facebook.com/v23.0',
      1_000,
      10,
      10_000,
    ]);
    expect(loadConfig({ META_GRAPH_URL: 'http://127.0.0.1:9/v23.0/' }).metaGraphUrl).toBe('http://127.0.0.1:9/v23.0');
    expect(loadConfig({ JOB_LEASE_MS: '5000' })).toMatchObject({ jobLeaseMs: 5_000, metaGraphTimeoutMs: 10_000 });
    expect(() => loadConfig({ JOB_LEASE_MS: '500' })).toThrow(/JOB_LEASE_MS must be an integer from 1000 to 3600000/);
    expect(() => loadConfig({ META_GRAPH_URL: 'ftp://x' })).toThrow(ConfigError);
  });
});
