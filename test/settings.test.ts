// Workspace settings over HTTP: the defaults (read without a write), PATCH replacing each key it
// names whole, every refusal (400 with its details, nothing stored), scopes, isolation between
// workspaces, no event, and the loader other rooms call.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import { DEFAULT_SETTINGS, loadSettings } from '../src/services/settings.js';
import { createWorkspace, request, type TestWorkspace } from './helpers/api.js';
import { startServer, type TestServer } from './helpers/server.js';

type Settings = components['schemas']['Settings'];
type Hours = Settings['businessHours'];

let server: TestServer;
beforeAll(async () => {
  server = await startServer();
});
afterAll(async () => {
  await server.close();
});

const QUESTION = 'Em uma escala de 0 a 10, o quanto você recomendaria nosso atendimento a um amigo?';
const THANKS = 'Obrigado pela sua resposta!';
const NINE_TO_SIX = [['09:00', '18:00']];
const DEFAULTS: Settings = {
  timezone: 'America/Sao_Paulo',
  businessHours: { mon: NINE_TO_SIX, tue: NINE_TO_SIX, wed: NINE_TO_SIX, thu: NINE_TO_SIX, fri: NINE_TO_SIX, sat: [], sun: [] },
  nps: { question: QUESTION, thanks: THANKS, template: null, expiresAfterHours: 24 },
};
const CLOSED: Hours = { mon: [], tue: [], wed: [], thu: [], fri: [], sat: [], sun: [] };
const SPLIT_DAY = [
  ['08:00', '12:00'],
  ['13:00', '18:00'],
];
const SATURDAYS: Hours = { ...CLOSED, mon: SPLIT_DAY, fri: SPLIT_DAY, sat: [['09:00', '13:00']] };
const NPS: Settings['nps'] = {
  question: 'De 0 a 10, quanto você recomendaria a Loja Exemplo a um amigo?',
  thanks: 'Muito obrigado!',
  template: { name: 'pesquisa_nps', language: 'pt_BR' },
  expiresAfterHours: 48,
};

async function settingsOf(ws: TestWorkspace): Promise<Settings> {
  const { data, response } = await ws.api.GET('/settings');
  expect(response.status).toBe(200);
  return data!;
}

/** The row as stored: null columns are keys the workspace never set. */
const storedRow = (ws: TestWorkspace) =>
  server.db.selectFrom('workspace_settings').select(['timezone', 'business_hours', 'nps']).where('workspace_id', '=', ws.workspaceId).executeTakeFirst();

const patch = (ws: TestWorkspace, body: unknown) => request(server, 'PATCH', '/v1/settings', { apiKey: ws.apiKey, body });

describe('GET /settings', () => {
  it('when the workspace never changed its settings, then it answers the defaults and writes nothing', async () => {
    const ws = await createWorkspace(server);

    const settings = await settingsOf(ws);

    expect(settings).toEqual(DEFAULTS);
    expect(DEFAULT_SETTINGS).toEqual(DEFAULTS);
    expect(await storedRow(ws)).toBeUndefined();
  });

  it('when the workspace set its time zone only, then business hours and NPS are still the defaults', async () => {
    const ws = await createWorkspace(server);
    await patch(ws, { timezone: 'America/Manaus' });

    expect(await settingsOf(ws)).toEqual({ ...DEFAULTS, timezone: 'America/Manaus' });
    expect(await storedRow(ws)).toEqual({ timezone: 'America/Manaus', business_hours: null, nps: null });
  });

  it('when the loader reads a workspace, then it answers what GET /settings answers', async () => {
    const ws = await createWorkspace(server);
    const fresh = await loadSettings(server.db, ws.workspaceId);
    await patch(ws, { nps: NPS });

    expect(fresh).toEqual(DEFAULTS);
    expect(await loadSettings(server.db, ws.workspaceId)).toEqual(await settingsOf(ws));
  });
});

describe('the loader', () => {
  it('when a caller changes what it loaded, then neither the defaults nor its other days change', async () => {
    const ws = await createWorkspace(server);
    const loaded = await loadSettings(server.db, ws.workspaceId);

    loaded.businessHours.mon.push(['19:00', '20:00']);
    loaded.nps.question = 'Outra?';

    expect(loaded.businessHours.tue).toEqual(NINE_TO_SIX);
    expect(DEFAULT_SETTINGS).toEqual(DEFAULTS);
    expect(await loadSettings(server.db, ws.workspaceId)).toEqual(DEFAULTS);
    expect(() => DEFAULT_SETTINGS.businessHours.mon.push(['19:00', '20:00'])).toThrow(TypeError);
  });
});

describe('PATCH /settings', () => {
  it('when the time zone is changed, then the answer holds every key and reads back', async () => {
    const ws = await createWorkspace(server);

    const { data, response } = await ws.api.PATCH('/settings', { body: { timezone: 'Europe/Lisbon' } });

    expect(response.status).toBe(200);
    expect(data).toEqual({ ...DEFAULTS, timezone: 'Europe/Lisbon' });
    expect(await settingsOf(ws)).toEqual(data);
  });

  it('when business hours are changed, then they are stored as sent, days in the order mon..sun', async () => {
    const ws = await createWorkspace(server);

    const response = await patch(ws, { businessHours: { sun: [], sat: SATURDAYS.sat, fri: SPLIT_DAY, thu: [], wed: [], tue: [], mon: SPLIT_DAY } });

    expect(response.status).toBe(200);
    expect(response.body).toEqual({ ...DEFAULTS, businessHours: SATURDAYS });
    expect(Object.keys(response.body.businessHours)).toEqual(['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun']);
    expect(await settingsOf(ws)).toEqual(response.body);
  });

  it('when NPS is changed, with a template and then without, then each answer is the whole new nps', async () => {
    const ws = await createWorkspace(server);

    const first = await patch(ws, { nps: NPS });
    const second = await patch(ws, { nps: { ...NPS, template: null, expiresAfterHours: 720 } });

    expect(first.body).toEqual({ ...DEFAULTS, nps: NPS });
    expect(second.body).toEqual({ ...DEFAULTS, nps: { ...NPS, template: null, expiresAfterHours: 720 } });
    expect(await settingsOf(ws)).toEqual(second.body);
  });

  it('when a key is patched again, then it is replaced whole and the other keys stay as set', async () => {
    const ws = await createWorkspace(server);
    await patch(ws, { timezone: 'America/Recife', businessHours: SATURDAYS, nps: NPS });

    const response = await patch(ws, { businessHours: { ...CLOSED, tue: [['10:00', '16:00']] } });

    expect(response.status).toBe(200);
    expect(response.body).toEqual({ timezone: 'America/Recife', businessHours: { ...CLOSED, tue: [['10:00', '16:00']] }, nps: NPS });
    expect(await settingsOf(ws)).toEqual(response.body);
  });

  it('when two changes of different keys run at once, then both land', async () => {
    const ws = await createWorkspace(server);

    const [a, b] = await Promise.all([patch(ws, { timezone: 'UTC' }), patch(ws, { nps: NPS })]);

    expect([a.status, b.status]).toEqual([200, 200]);
    expect(await settingsOf(ws)).toEqual({ ...DEFAULTS, timezone: 'UTC', nps: NPS });
  });

  it.each(['Brazil/East', 'Asia/Calcutta', 'Asia/Kolkata', 'UTC', 'Etc/GMT+3', 'america/sao_paulo'])(
    'when the time zone is %s (a zone or a link to one, any case), then it is kept as sent',
    async (timezone) => {
      const ws = await createWorkspace(server);

      const response = await patch(ws, { timezone });

      expect(response.status).toBe(200);
      expect((await settingsOf(ws)).timezone).toBe(timezone);
    },
  );

  it('when intervals touch, end at 24:00 and a day has 4, then they are accepted', async () => {
    const ws = await createWorkspace(server);
    const full = [
      ['00:00', '06:00'],
      ['06:00', '12:00'],
      ['13:00', '18:00'],
      ['18:00', '24:00'],
    ];

    const response = await patch(ws, { businessHours: { ...CLOSED, sat: full } });

    expect(response.status).toBe(200);
    expect(response.body.businessHours.sat).toEqual(full);
  });

  it('when the settings change, then no event is recorded', async () => {
    const ws = await createWorkspace(server);
    const { data: before } = await ws.api.GET('/events', { params: { query: { limit: 100 } } });

    await patch(ws, { timezone: 'UTC', businessHours: SATURDAYS, nps: NPS });

    const { data: after } = await ws.api.GET('/events', { params: { query: { limit: 100 } } });
    expect(after).toEqual(before);
  });
});

describe('PATCH /settings refusals: 400, and nothing stored', () => {
  const overnight = 'must start before it ends (an interval cannot cross midnight: split it at 24:00 and 00:00)';
  const hours = (day: keyof Hours, intervals: unknown) => ({ businessHours: { ...CLOSED, [day]: intervals } });

  it.each<[string, unknown, Array<{ path: string; message?: string }>]>([
    [
      'a time zone Intl does not know',
      { timezone: 'Mars/Olympus' },
      [{ path: '/body/timezone', message: 'must be an IANA time zone name, e.g. America/Sao_Paulo' }],
    ],
    ['an offset for a time zone', { timezone: '-03:00' }, [{ path: '/body/timezone' }]],
    ['an empty time zone', { timezone: '' }, [{ path: '/body/timezone' }]],
    ['a time zone with a space', { timezone: 'America/Sao Paulo' }, [{ path: '/body/timezone' }]],
    ['a time zone of 65 characters', { timezone: `America/${'A'.repeat(57)}` }, [{ path: '/body/timezone' }]],
    ['an interval that crosses midnight', hours('fri', [['22:00', '02:00']]), [{ path: '/body/businessHours/fri/0', message: overnight }]],
    ['an interval that ends where it starts', hours('mon', [['09:00', '09:00']]), [{ path: '/body/businessHours/mon/0', message: overnight }]],
    [
      'overlapping intervals',
      hours('mon', [
        ['09:00', '18:00'],
        ['12:00', '13:00'],
      ]),
      [{ path: '/body/businessHours/mon/1', message: 'must not overlap 09:00-18:00 (interval 0)' }],
    ],
    [
      'five intervals a day',
      hours('tue', [
        ['00:00', '01:00'],
        ['02:00', '03:00'],
        ['04:00', '05:00'],
        ['06:00', '07:00'],
        ['08:00', '09:00'],
      ]),
      [{ path: '/body/businessHours/tue' }],
    ],
    ['a time past 24:00', hours('wed', [['09:00', '24:01']]), [{ path: '/body/businessHours/wed/0/1' }]],
    ['a time without its leading zero', hours('wed', [['9:00', '18:00']]), [{ path: '/body/businessHours/wed/0/0' }]],
    ['a time with seconds', hours('wed', [['09:00:00', '18:00']]), [{ path: '/body/businessHours/wed/0/0' }]],
    ['an interval of three times', hours('thu', [['09:00', '12:00', '18:00']]), [{ path: '/body/businessHours/thu/0' }]],
    ['an interval of one time', hours('thu', [['09:00']]), [{ path: '/body/businessHours/thu/0' }]],
    ['business hours without Sunday', { businessHours: { mon: [], tue: [], wed: [], thu: [], fri: [], sat: [] } }, [{ path: '/body/businessHours/sun' }]],
    ['business hours with a day of another name', { businessHours: { ...CLOSED, holiday: [] } }, [{ path: '/body/businessHours/holiday' }]],
    ['nps without its thanks', { nps: { question: 'Nota?', template: null, expiresAfterHours: 24 } }, [{ path: '/body/nps/thanks' }]],
    ['an empty question', { nps: { ...NPS, question: '' } }, [{ path: '/body/nps/question' }]],
    ['a question of 1,001 characters', { nps: { ...NPS, question: 'a'.repeat(1001) } }, [{ path: '/body/nps/question' }]],
    ['thanks holding U+0000', { nps: { ...NPS, thanks: 'Obrigado\u0000' } }, [{ path: '/body/nps/thanks' }]],
    ['expiresAfterHours 0', { nps: { ...NPS, expiresAfterHours: 0 } }, [{ path: '/body/nps/expiresAfterHours' }]],
    ['expiresAfterHours 721', { nps: { ...NPS, expiresAfterHours: 721 } }, [{ path: '/body/nps/expiresAfterHours' }]],
    ['expiresAfterHours 1.5', { nps: { ...NPS, expiresAfterHours: 1.5 } }, [{ path: '/body/nps/expiresAfterHours' }]],
    [
      'a template name with capitals and spaces',
      { nps: { ...NPS, template: { name: 'Pesquisa NPS', language: 'pt_BR' } } },
      [{ path: '/body/nps/template/name' }],
    ],
    ['a template without its language', { nps: { ...NPS, template: { name: 'pesquisa_nps' } } }, [{ path: '/body/nps/template/language' }]],
    [
      'a template with parameters',
      { nps: { ...NPS, template: { name: 'pesquisa_nps', language: 'pt_BR', parameters: ['x'] } } },
      [{ path: '/body/nps/template/parameters' }],
    ],
    ['no key at all', {}, [{ path: '/body' }]],
    ['an unknown key', { language: 'pt_BR' }, [{ path: '/body/language' }]],
  ])('when the body has %s, then it answers 400 naming it', async (_label, body, details) => {
    const ws = await createWorkspace(server);

    const response = await patch(ws, body);

    expect(response.status).toBe(400);
    expect(response.body.error.code).toBe('validation_error');
    for (const detail of details)
      expect(response.body.error.details).toContainEqual(detail.message ? detail : { path: detail.path, message: expect.any(String) });
    expect(await settingsOf(ws)).toEqual(DEFAULTS);
    expect(await storedRow(ws)).toBeUndefined();
  });

  it('when a good time zone comes with bad hours, then neither is stored, and every problem is named', async () => {
    const ws = await createWorkspace(server);
    await patch(ws, { nps: NPS });
    const before = await storedRow(ws);

    const response = await patch(ws, {
      timezone: 'UTC',
      businessHours: {
        ...CLOSED,
        mon: [
          ['10:00', '11:00'],
          ['08:00', '20:00'],
        ],
        sat: [['18:00', '09:00']],
      },
    });

    expect(response.status).toBe(400);
    expect(response.body).toEqual({
      error: {
        code: 'validation_error',
        message: 'The request does not match the contract.',
        requestId: response.headers.get('x-request-id'),
        details: [
          { path: '/body/businessHours/mon/1', message: 'must not overlap 10:00-11:00 (interval 0)' },
          { path: '/body/businessHours/sat/0', message: overnight },
        ],
      },
    });
    expect(await storedRow(ws)).toEqual(before);
    expect(await settingsOf(ws)).toEqual({ ...DEFAULTS, nps: NPS });
  });

  it('when an unknown time zone comes with a good NPS, then the NPS is not stored either', async () => {
    const ws = await createWorkspace(server);

    const response = await patch(ws, { timezone: 'Local', nps: NPS });

    expect(response.status).toBe(400);
    expect(response.body.error.details).toEqual([{ path: '/body/timezone', message: 'must be an IANA time zone name, e.g. America/Sao_Paulo' }]);
    expect(await storedRow(ws)).toBeUndefined();
  });
});

describe('scopes and workspaces', () => {
  it('when the key lacks settings:write, then PATCH is 403 and nothing is stored', async () => {
    const ws = await createWorkspace(server, { scopes: ['settings:read'] });

    const response = await patch(ws, { timezone: 'UTC' });

    expect(response.status).toBe(403);
    expect(response.body.error).toEqual({ code: 'forbidden', message: 'This API key lacks the scope settings:write.', requestId: expect.any(String) });
    expect(await settingsOf(ws)).toEqual(DEFAULTS);
    expect(await storedRow(ws)).toBeUndefined();
  });

  it('when the key holds settings:write only, then it may change but not read the settings', async () => {
    const ws = await createWorkspace(server, { scopes: ['settings:write'] });

    const changed = await patch(ws, { timezone: 'UTC' });
    const read = await request(server, 'GET', '/v1/settings', { apiKey: ws.apiKey });

    expect(changed.status).toBe(200);
    expect(read.status).toBe(403);
    expect(read.body.error.message).toBe('This API key lacks the scope settings:read.');
  });

  it('when one workspace changes its settings, then another keeps its own', async () => {
    const ws = await createWorkspace(server);
    const other = await createWorkspace(server);
    await patch(other, { timezone: 'America/Manaus' });

    await patch(ws, { timezone: 'UTC', businessHours: SATURDAYS, nps: NPS });

    expect(await settingsOf(other)).toEqual({ ...DEFAULTS, timezone: 'America/Manaus' });
    expect(await settingsOf(ws)).toEqual({ timezone: 'UTC', businessHours: SATURDAYS, nps: NPS });
  });

  it('when a second key of the same workspace reads, then it sees the first key’s change', async () => {
    const ws = await createWorkspace(server);
    const second = await createWorkspace(server, { workspaceId: ws.workspaceId, scopes: ['settings:read'] });

    await patch(ws, { nps: NPS });

    expect(await settingsOf(second)).toEqual({ ...DEFAULTS, nps: NPS });
  });
});
