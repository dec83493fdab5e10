// npx tsx bench/body-checks.ts: what the JSON body middleware's width check costs a request, in ns a
// body, for two ordinary bodies (a contact, an automation): the walk of the parsed value
// (middleware/body.ts oversizedAt, which every JSON body paid when it was added) against the byte
// scan that now decides whether that walk is needed (json-scan.ts scanJson, with and without its
// comma count). One process, 200,000 calls to warm up, then 1,000,000 timed; BENCH_ROUNDS (3) rounds.
import { maxBodyMembers } from '../src/contract.js';
import { MAX_JSON_DEPTH, scanJson } from '../src/json-scan.js';
import { oversizedAt } from '../src/middleware/body.js';

const bodies: Record<string, unknown> = {
  contact: {
    name: 'Mariana Silva',
    phone: '+5511987654321',
    email: 'mariana@exemplo.com.br',
    labels: ['vip', 'boleto'],
    attributes: { plano: 'ouro', pedido: 4521 },
  },
  automation: {
    name: 'Reembolso',
    trigger: { event: 'message.received' },
    conditions: {
      all: [
        { field: 'message.content', operator: 'contains', value: 'reembolso' },
        { field: 'thread.labels', operator: 'in', value: ['a', 'b', 'c', 'd', 'e'] },
      ],
    },
    actions: [
      { type: 'move_stage', stageId: '01935f4d-0a10-7b11-8c12-0d13e14f1502' },
      { type: 'add_labels', target: 'thread', labels: ['reembolso'] },
      { type: 'send_message', content: 'Olá! Vamos verificar o seu pedido.' },
    ],
  },
};

function nsPerCall(fn: () => unknown): number {
  for (let i = 0; i < 200_000; i++) fn();
  const n = 1_000_000;
  const started = process.hrtime.bigint();
  for (let i = 0; i < n; i++) fn();
  return Number(process.hrtime.bigint() - started) / n;
}

const rounds = Number(process.env.BENCH_ROUNDS ?? 3);
for (const [name, body] of Object.entries(bodies)) {
  const bytes = Buffer.from(JSON.stringify(body));
  const measures = {
    'walk of the parsed body': () => oversizedAt(body, maxBodyMembers),
    'byte scan (depth, surrogates)': () => scanJson(bytes, MAX_JSON_DEPTH),
    'byte scan with the comma count': () => scanJson(bytes, MAX_JSON_DEPTH, maxBodyMembers),
  };
  for (const [what, fn] of Object.entries(measures)) {
    const ns = Array.from({ length: rounds }, () => nsPerCall(fn).toFixed(0));
    console.log(`${name} (${bytes.length} B) ${what}: ${ns.join(', ')} ns a body`);
  }
}
