// The conditions of automations, evaluated without I/O (src/automations/conditions.ts): each field
// and operator, text that ignores case and accents, labels that ignore case, missing values and
// values of another type, all/any, and the explanation the dry run answers. And the checks at
// create (src/automations/validate.ts), every refusal named where it is.
import { describe, expect, it } from 'vitest';
import type { components } from '../generated/api.js';
import {
  compileConditions,
  conditionsHold,
  evaluateCondition,
  evaluateConditions,
  foldConditions,
  foldText,
  type ConditionContext,
} from '../src/automations/conditions.js';
import { definitionProblems, referencesOf } from '../src/automations/validate.js';

type Condition = components['schemas']['AutomationCondition'];
type Conditions = components['schemas']['AutomationConditions'];

const STAGE = '01935f4d-0a10-7b11-8c12-0d13e14f1502';
const OTHER_STAGE = '01935f4d-0a10-7b11-8c12-0d13e14f1503';
const AGENT = '01935f4e-8a2b-7c3d-9e4f-5a6b7c8d9e0f';
const CHANNEL = '01935f4c-0a1b-7c2d-8e3f-4a5b6c7d8e9f';

const context: ConditionContext = {
  thread: { status: 'open', stageId: STAGE, agentId: null, channelId: CHANNEL, labels: ['Reembolso', 'VIP'] },
  channel: { type: 'whatsapp' },
  contact: { labels: ['Cliente Ouro'], attributes: { plano: 'Pró Anual', pedidos: 7, ativo: true } },
  message: { content: 'NÃO recebi meu pedido, quero o REEMBOLSO!' },
  nps: { score: 6 },
  businessHours: false,
};

const result = (condition: Condition, ctx: ConditionContext = context): boolean => evaluateCondition(condition, ctx).result;

describe('foldText', () => {
  it('when text has accents and capitals, then it compares as plain lower case', () => {
    expect(foldText('NÃO Ação Pinguïm ÇÉ')).toBe('nao acao pinguim ce');
    expect(foldText('São Paulo')).toBe(foldText('sao paulo'));
  });
});

describe('text: message.content', () => {
  it.each([
    ['contains', 'nao recebi', true],
    ['contains', 'reembolso', true],
    ['contains', 'estorno', false],
    ['not_contains', 'estorno', true],
    ['not_contains', 'Reembolsó', false],
    ['starts_with', 'nao', true],
    ['starts_with', 'recebi', false],
    ['equals', 'não recebi meu pedido, quero o reembolso!', true],
    ['equals', 'não recebi', false],
    ['not_equals', 'não recebi', true],
  ] as const)('when %s "%s", then %s (case and accents ignored)', (operator, value, expected) => {
    expect(result({ field: 'message.content', operator, value })).toBe(expected);
  });

  it('when in/not_in a list, then any one equal matches', () => {
    expect(result({ field: 'message.content', operator: 'in', value: ['oi', 'NAO RECEBI MEU PEDIDO, QUERO O REEMBOLSO!'] })).toBe(true);
    expect(result({ field: 'message.content', operator: 'not_in', value: ['oi', 'ola'] })).toBe(true);
  });

  it('when the message has no text (a media message), then it is not set, contains nothing, and its negations hold', () => {
    const media = { ...context, message: { content: null } };

    expect(result({ field: 'message.content', operator: 'is_set' }, media)).toBe(false);
    expect(result({ field: 'message.content', operator: 'is_not_set' }, media)).toBe(true);
    expect(result({ field: 'message.content', operator: 'contains', value: 'a' }, media)).toBe(false);
    expect(result({ field: 'message.content', operator: 'not_contains', value: 'a' }, media)).toBe(true);
  });
});

describe('labels: thread.labels and contact.labels', () => {
  it.each([
    ['thread.labels', 'contains', 'reembolso', true],
    ['thread.labels', 'contains', 'REEMBOLSO', true],
    ['thread.labels', 'contains', 'reemb', false],
    ['thread.labels', 'not_contains', 'vip', false],
    ['contact.labels', 'contains', 'cliente ouro', true],
    ['contact.labels', 'not_contains', 'ouro', true],
  ] as const)('when %s %s "%s", then %s (whole labels, case ignored)', (field, operator, value, expected) => {
    expect(result({ field, operator, value })).toBe(expected);
  });

  it('when in/not_in a list, then it asks whether any of them is there', () => {
    expect(result({ field: 'thread.labels', operator: 'in', value: ['urgente', 'vip'] })).toBe(true);
    expect(result({ field: 'thread.labels', operator: 'not_in', value: ['urgente', 'novo'] })).toBe(true);
    expect(result({ field: 'thread.labels', operator: 'not_in', value: ['urgente', 'Vip'] })).toBe(false);
  });

  it('when is_set/is_not_set, then it asks whether there is any label', () => {
    const bare = { ...context, thread: { ...context.thread!, labels: [] } };

    expect(result({ field: 'thread.labels', operator: 'is_set' })).toBe(true);
    expect(result({ field: 'thread.labels', operator: 'is_set' }, bare)).toBe(false);
    expect(result({ field: 'thread.labels', operator: 'is_not_set' }, bare)).toBe(true);
  });
});

describe('attributes: contact.attributes.<key>', () => {
  it.each([
    ['plano', 'equals', 'pro anual', true],
    ['plano', 'contains', 'ANUAL', true],
    ['plano', 'starts_with', 'pro', true],
    ['pedidos', 'equals', 7, true],
    ['pedidos', 'equals', '7', false],
    ['pedidos', 'gt', 5, true],
    ['pedidos', 'gte', 7, true],
    ['pedidos', 'lt', 7, false],
    ['pedidos', 'lte', 7.5, true],
    ['ativo', 'equals', true, true],
    ['ativo', 'not_equals', false, true],
    ['plano', 'gt', 1, false],
    ['pedidos', 'contains', '7', false],
  ] as const)('when %s %s %j, then %s (a value of another type never compares)', (key, operator, value, expected) => {
    expect(result({ field: `contact.attributes.${key}`, operator, value })).toBe(expected);
  });

  it('when in a list of strings and numbers, then each compares by its own type', () => {
    expect(result({ field: 'contact.attributes.pedidos', operator: 'in', value: ['7', 8, 7] })).toBe(true);
    expect(result({ field: 'contact.attributes.plano', operator: 'in', value: ['basico', 'PRO ANUAL'] })).toBe(true);
  });

  it('when the attribute is missing, then comparisons are false, negations true, is_not_set true, and actual is null', () => {
    const missing = (operator: Condition['operator'], value?: Condition['value']) =>
      evaluateCondition({ field: 'contact.attributes.cidade', operator, ...(value !== undefined && { value }) }, context);

    expect(missing('equals', 'recife')).toMatchObject({ actual: null, result: false });
    expect(missing('not_equals', 'recife').result).toBe(true);
    expect(missing('gt', 1).result).toBe(false);
    expect(missing('is_set').result).toBe(false);
    expect(missing('is_not_set').result).toBe(true);
  });

  it('when a key is an inherited property name, then it is missing like any other', () => {
    expect(result({ field: 'contact.attributes.constructor', operator: 'is_set' })).toBe(false);
  });
});

describe('ids, choices, scores and business hours', () => {
  it('when thread ids compare, then case is ignored and in/not_in take lists', () => {
    expect(result({ field: 'thread.stageId', operator: 'equals', value: STAGE.toUpperCase() })).toBe(true);
    expect(result({ field: 'thread.stageId', operator: 'in', value: [OTHER_STAGE, STAGE] })).toBe(true);
    expect(result({ field: 'thread.channelId', operator: 'not_equals', value: CHANNEL })).toBe(false);
  });

  it('when the thread has no agent, then agentId is not set and equals nobody', () => {
    expect(result({ field: 'thread.agentId', operator: 'is_not_set' })).toBe(true);
    expect(result({ field: 'thread.agentId', operator: 'equals', value: AGENT })).toBe(false);
    expect(result({ field: 'thread.agentId', operator: 'not_in', value: [AGENT] })).toBe(true);
    const assigned = { ...context, thread: { ...context.thread!, agentId: AGENT } };
    expect(result({ field: 'thread.agentId', operator: 'is_set' }, assigned)).toBe(true);
  });

  it('when status, channel type, score and business hours compare, then exactly', () => {
    expect(result({ field: 'thread.status', operator: 'equals', value: 'open' })).toBe(true);
    expect(result({ field: 'thread.status', operator: 'not_in', value: ['closed'] })).toBe(true);
    expect(result({ field: 'channel.type', operator: 'in', value: ['instagram'] })).toBe(false);
    expect(result({ field: 'nps.score', operator: 'lte', value: 6 })).toBe(true);
    expect(result({ field: 'nps.score', operator: 'gt', value: 6 })).toBe(false);
    expect(result({ field: 'nps.score', operator: 'in', value: [0, 1, 2, 3, 4, 5, 6] })).toBe(true);
    expect(result({ field: 'time.businessHours', operator: 'equals', value: false })).toBe(true);
    expect(result({ field: 'time.businessHours', operator: 'equals', value: true }, { ...context, businessHours: true })).toBe(true);
  });

  it('when the context lacks the object (no message, no thread), then the field is null and comparisons are false', () => {
    const bare: ConditionContext = { contact: { labels: [], attributes: {} }, businessHours: true };

    expect(evaluateCondition({ field: 'message.content', operator: 'contains', value: 'x' }, bare)).toEqual({
      field: 'message.content',
      operator: 'contains',
      value: 'x',
      actual: null,
      result: false,
    });
    expect(result({ field: 'thread.status', operator: 'equals', value: 'open' }, bare)).toBe(false);
  });
});

describe('all and any', () => {
  const yes: Condition = { field: 'thread.status', operator: 'equals', value: 'open' };
  const no: Condition = { field: 'thread.status', operator: 'equals', value: 'closed' };

  it.each([
    [{}, true],
    [{ all: [yes, yes] }, true],
    [{ all: [yes, no] }, false],
    [{ any: [no, yes] }, true],
    [{ any: [no, no] }, false],
    [{ all: [yes], any: [no, yes] }, true],
    [{ all: [no], any: [yes] }, false],
    [{ all: [yes], any: [no] }, false],
  ])('when the conditions are %j, then matched is %s', (conditions, matched) => {
    expect(evaluateConditions(conditions, context).matched).toBe(matched);
  });

  it('when explained, then every condition is listed with its field, operator, value, actual value and result (the documented shape, nothing more), all first', () => {
    const evaluation = evaluateConditions(
      {
        any: [{ field: 'message.content', operator: 'contains', value: 'estorno' }],
        all: [
          { field: 'thread.labels', operator: 'is_set' },
          { field: 'contact.attributes.pedidos', operator: 'gte', value: 10 },
        ],
      },
      context,
    );

    expect(evaluation).toEqual({
      matched: false,
      conditions: [
        { field: 'thread.labels', operator: 'is_set', actual: ['Reembolso', 'VIP'], result: true },
        { field: 'contact.attributes.pedidos', operator: 'gte', value: 10, actual: 7, result: false },
        { field: 'message.content', operator: 'contains', value: 'estorno', actual: 'NÃO recebi meu pedido, quero o REEMBOLSO!', result: false },
      ],
    });
  });
});

describe('compiled conditions', () => {
  const yes: Condition = { field: 'thread.status', operator: 'equals', value: 'open' };
  const no: Condition = { field: 'thread.status', operator: 'equals', value: 'closed' };
  const onMessage: Condition = { field: 'message.content', operator: 'in', value: ['oi'] };

  it('when all meets a false condition or any a true one, then the conditions after it are not evaluated', () => {
    let reads = 0;
    const counting: ConditionContext = {
      ...context,
      get message() {
        reads++;
        return context.message;
      },
    };

    expect(conditionsHold(compileConditions({ all: [no, onMessage] }), counting)).toBe(false);
    expect(conditionsHold(compileConditions({ any: [yes, onMessage] }), counting)).toBe(true);
    expect(conditionsHold(compileConditions({ all: [yes], any: [no, onMessage] }), counting)).toBe(false);
    expect(reads).toBe(1);
  });

  it('when the conditions are folded when saved, then they hold exactly where the originals do', () => {
    const conditions = {
      any: [
        { field: 'message.content', operator: 'in', value: ['Quero o REEMBOLSO', 'NÃO recebi meu pedido, quero o REEMBOLSO!'] },
        { field: 'message.content', operator: 'contains', value: 'Reembolsó' },
        { field: 'thread.labels', operator: 'in', value: ['vip'] },
        { field: 'contact.attributes.cidade', operator: 'starts_with', value: 'SÃO' },
        { field: 'nps.score', operator: 'in', value: [9, 10] },
      ],
    } satisfies Conditions;
    const folded = foldConditions(conditions);

    expect(folded.any![0]!.value).toEqual(['quero o reembolso', 'nao recebi meu pedido, quero o reembolso!']);
    for (const one of conditions.any) {
      const original = evaluateCondition(one, context).result;
      expect([one.field, conditionsHold(compileConditions({ any: [foldConditions({ any: [one] }).any![0]!] }, true), context)]).toEqual([one.field, original]);
    }
  });
});

describe('definitionProblems (the checks at create)', () => {
  const refund = { type: 'add_labels' as const, target: 'thread' as const, labels: ['reembolso'] };
  const problems = (trigger: components['schemas']['AutomationTrigger'], conditions: components['schemas']['AutomationConditions'], actions = [refund]) =>
    definitionProblems({ trigger, conditions, actions });
  const onMessage = { event: 'message.received' as const };

  it('when the README example is checked, then it has no problem', () => {
    expect(
      problems(onMessage, {
        any: [
          { field: 'message.content', operator: 'contains', value: 'reembolso' },
          { field: 'message.content', operator: 'contains', value: 'estorno' },
        ],
      }),
    ).toEqual([]);
  });

  it.each([
    [{ field: 'thread.labels', operator: 'gt', value: 1 }, '/operator', 'gt does not apply to thread.labels'],
    [{ field: 'time.businessHours', operator: 'contains', value: 'x' }, '/operator', 'contains does not apply to time.businessHours'],
    [{ field: 'time.businessHours', operator: 'equals', value: 'true' }, '/value', 'must be true or false, not a string'],
    [{ field: 'message.content', operator: 'is_set', value: 'x' }, '/value', 'must be left out with is_set'],
    [{ field: 'message.content', operator: 'contains' }, '/value', 'is required with contains'],
    [{ field: 'message.content', operator: 'contains', value: ['a'] }, '/value', 'must be a single value with contains, not a list (use in or not_in)'],
    [{ field: 'message.content', operator: 'in', value: 'a' }, '/value', 'must be a list with in, not a string'],
    [{ field: 'thread.status', operator: 'equals', value: 'pending' }, '/value', 'must be one of open, closed'],
    [{ field: 'thread.stageId', operator: 'equals', value: 'Novo' }, '/value', 'must be an id (a UUID)'],
    [{ field: 'thread.stageId', operator: 'is_set' }, '/operator', 'is_set does not apply to thread.stageId'],
    [{ field: 'contact.attributes.pedidos', operator: 'gt', value: '5' }, '/value', 'must be a number, not a string'],
    [{ field: 'contact.attributes.plano', operator: 'contains', value: 5 }, '/value', 'must be a string, not a number'],
    [{ field: 'contact.labels', operator: 'contains', value: 'x'.repeat(51) }, '/value', 'must be a label of 1 to 50 characters'],
    [{ field: 'thread.labels', operator: 'equals', value: 'vip' }, '/operator', 'equals does not apply to thread.labels'],
  ] as const)('when %j, then a problem at its %s: %s', (condition, where, message) => {
    expect(problems(onMessage, { all: [condition as Condition] })).toEqual([
      { path: `/body/conditions/all/0${where}`, message: expect.stringContaining(message) },
    ]);
  });

  it('when a list holds one bad item, then that item is named', () => {
    expect(problems(onMessage, { any: [{ field: 'nps.score', operator: 'in', value: [9, 11] }] })).toEqual([
      { path: '/body/conditions/any/0/field', message: 'nps.score needs the nps.answered trigger; the trigger is message.received' },
      { path: '/body/conditions/any/0/value/1', message: 'must be an integer from 0 to 10' },
    ]);
  });

  it('when a condition names an object its trigger lacks, then its field is named with the trigger it needs', () => {
    const idle = { event: 'thread.idle' as const, minutes: 60, waitingOn: 'agent' as const };

    expect(problems(idle, { all: [{ field: 'message.content', operator: 'contains', value: 'oi' }] })).toEqual([
      {
        path: '/body/conditions/all/0/field',
        message: 'message.content needs a message trigger (message.received or message.sent); the trigger is thread.idle',
      },
    ]);
    expect(problems({ event: 'nps.answered' }, { all: [{ field: 'nps.score', operator: 'lte', value: 6 }] })).toEqual([]);
  });

  it('when contact.created carries thread conditions and thread actions, then each is named; contact ones pass', () => {
    const found = problems(
      { event: 'contact.created' },
      {
        all: [
          { field: 'thread.status', operator: 'equals', value: 'open' },
          { field: 'contact.labels', operator: 'is_not_set' },
          { field: 'time.businessHours', operator: 'equals', value: true },
        ],
      },
      [
        refund,
        { type: 'add_labels', target: 'contact', labels: ['novo'] },
        { type: 'set_attribute', key: 'origem', value: 'whatsapp' },
        { type: 'stop' },
      ] as never,
    );

    expect(found).toEqual([
      { path: '/body/conditions/all/0/field', message: expect.stringContaining('thread.status needs a trigger with a thread') },
      { path: '/body/actions/0/type', message: 'add_labels acts on a thread, which the trigger contact.created does not have' },
    ]);
  });

  it('when all and any hold 21 conditions together, then /body/conditions is named', () => {
    const c: Condition = { field: 'thread.status', operator: 'equals', value: 'open' };

    expect(problems(onMessage, { all: Array(11).fill(c), any: Array(10).fill(c) })).toEqual([
      { path: '/body/conditions', message: 'must hold at most 20 conditions in all and any together, not 21' },
    ]);
    expect(problems(onMessage, { all: Array(10).fill(c), any: Array(10).fill(c) })).toEqual([]);
  });

  it('when references are listed, then every stage, agent and channel of conditions and actions is, with where', () => {
    expect(
      referencesOf({
        trigger: onMessage,
        conditions: {
          all: [{ field: 'thread.stageId', operator: 'in', value: [STAGE, OTHER_STAGE] }],
          any: [{ field: 'thread.channelId', operator: 'equals', value: CHANNEL }],
        },
        actions: [
          { type: 'assign_agent', agentId: AGENT },
          { type: 'move_stage', stageId: STAGE },
        ],
      }),
    ).toEqual([
      { path: '/body/conditions/all/0/value/0', kind: 'stage', id: STAGE },
      { path: '/body/conditions/all/0/value/1', kind: 'stage', id: OTHER_STAGE },
      { path: '/body/conditions/any/0/value', kind: 'channel', id: CHANNEL },
      { path: '/body/actions/0/agentId', kind: 'agent', id: AGENT },
      { path: '/body/actions/1/stageId', kind: 'stage', id: STAGE },
    ]);
  });
});
