// npm run test:contract: contract tests nobody here wrote. Portman turns openapi.yaml into a Postman
// collection (test/contract/portman-config.json: documented statuses and response schemas, then
// 401/403/404/409/415/422 and fuzzed-400 variations); newman runs it against the real server, started
// here on a loopback port (DATABASE_URL and REDIS_URL when set, else PGlite in a temp dir), with an
// enterprise key and seeded records. Any failed assertion, request or script fails the run, and
// nothing is left behind. test/contract/README.md explains the config.
import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { createSupportFunnelClient } from '../client/index.js';
import { contractOperations, spec, specPath } from '../src/contract.js';
import type { Provisioned } from '../src/provisioning.js';
import { createScratchDatabase, killGroup, provisionKey, root, scratchDir, start, startRealServer, stop, stopAll, type RealServer } from './lib/real-server.js';

const portmanConfig = path.join(root, 'test/contract/portman-config.json');
/** The PostgreSQL server of DATABASE_URL, in which each run works in a fresh database of its own. */
const serverUrl = process.env.DATABASE_URL || undefined;
let databaseUrl: string | undefined;
const redisUrl = process.env.REDIS_URL || undefined;

/** Scratch space of this run (collection, Portman's ./tmp, PGlite); removed on the way out. */
const workDir = scratchDir('support-funnel-contract-');

// ---- steps -------------------------------------------------------------------------------------

/** Portman writes the collection; it works in `dir` (it keeps scratch files under ./tmp). */
/** A Postman collection, the parts read here: folders of items, each item a request. */
interface CollectionItem {
  name?: string;
  item?: CollectionItem[];
  request?: { method: string; url: { path: string[] } };
}
type Collection = { item?: CollectionItem[] } & Record<string, unknown>;

async function generateCollection(dir: string): Promise<Collection> {
  const output = path.join(dir, 'collection.json');
  const portman = start(
    path.join(root, 'node_modules/.bin/portman'),
    ['--local', specPath, '--portmanConfigFile', portmanConfig, '--output', output, '--includeTests', 'true', '--warn', 'true'],
    { cwd: dir, env: { ...process.env, NO_COLOR: '1' } },
  );
  let log = '';
  portman.stdout?.on('data', (chunk: Buffer) => (log += chunk.toString()));
  portman.stderr?.on('data', (chunk: Buffer) => (log += chunk.toString()));
  const timer = setTimeout(() => killGroup(portman, 'SIGKILL'), 300_000);
  const code = await new Promise<number | null>((resolve) => portman.once('exit', (c) => resolve(c)));
  clearTimeout(timer);
  if (code !== 0 || !fs.existsSync(output)) throw new Error(`portman failed (exit ${code}):\n${log}`);
  return JSON.parse(fs.readFileSync(output, 'utf8')) as Collection;
}

interface Seeded {
  agentId: string;
  agentToDeleteId: string;
  contactId: string;
  contactPhone: string;
  threadId: string;
  metaChannelId: string;
  metaAppSecret: string;
  metaVerifyToken: string;
  contactToDeleteId: string;
  otherContactId: string;
  closedThreadId: string;
  stageId: string;
  stageToDeleteId: string;
  eventId: string;
  webhookEndpointId: string;
  webhookEndpointToDeleteId: string;
  deliveryId: string;
  automationId: string;
  automationToDeleteId: string;
  mediaId: string;
  messageId: string;
  slaPolicyId: string;
  slaPolicyToDeleteId: string;
  mergeTargetId: string;
  mergeSourceId: string;
}

/** Records for the collection's path ids and bodies, made through the API itself. */
async function seed(baseUrl: string, key: Provisioned): Promise<Seeded> {
  const api = createSupportFunnelClient({ baseUrl, apiKey: key.apiKey });
  const whatsapp = key.channels.find((channel) => channel.type === 'whatsapp');
  if (!whatsapp) throw new Error('the provisioned workspace has no WhatsApp channel');
  const must = <T>(what: string, result: { data?: T; error?: unknown; response: Response }): T => {
    if (result.data === undefined) throw new Error(`seeding ${what}: ${result.response.status} ${JSON.stringify(result.error)}`);
    return result.data;
  };
  const agentBody = { name: 'Bruno Suporte', instructions: 'Atenda pedidos e trocas com cordialidade.', model: 'gpt-4o-mini' };
  const agent = must('an agent', await api.POST('/agents', { body: agentBody }));
  const doomed = must('an agent to delete', await api.POST('/agents', { body: { ...agentBody, name: 'Agente Temporário' } }));
  // No e-mail: the contact then shows `email: null`, the 3.1 `type: [string, 'null']` case.
  const phone = `+5521${String(Math.floor(Math.random() * 1e9)).padStart(9, '0')}`;
  const contact = must('a contact', await api.POST('/contacts', { body: { name: 'João Pereira', phone } }));
  const message = must(
    'a message',
    await api.POST('/messages', { body: { contactId: contact.id, channelId: whatsapp.id, content: 'Olá, João! Como podemos ajudar?' } }),
  );
  // A WhatsApp channel connected to Meta (the contract's example phone_number_id), for the channel
  // operations and Meta's webhooks; the collection signs its webhook delivery with this app secret.
  const meta = { externalId: '106540352242922', accessToken: `EAA${randomUUID()}`, appSecret: randomUUID(), verifyToken: `verify-${randomUUID()}` };
  const channel = must('a meta channel', await api.POST('/channels', { body: { type: 'whatsapp', name: 'WhatsApp Vendas', provider: 'meta', meta } }));
  // A contact for deleteContact to erase, and another whose (contact, WhatsApp) pair has a closed
  // thread beside an open one, for updateThread's reopening 409 and updateContact's phone 409.
  const toErase = must(
    'a contact to erase',
    await api.POST('/contacts', { body: { name: 'Paula Apagar', phone: `${phone.slice(0, -1)}${(Number(phone.at(-1)) + 1) % 10}` } }),
  );
  // A WhatsApp message needs a phone (or a BSUID) to reach: 422 contact_unreachable without one.
  const other = must(
    'another contact',
    await api.POST('/contacts', { body: { name: 'Rita Souza', phone: `${phone.slice(0, -1)}${(Number(phone.at(-1)) + 2) % 10}` } }),
  );
  const send = { body: { contactId: other.id, channelId: whatsapp.id, content: 'Oi, Rita!' } };
  const first = must('a message to close', await api.POST('/messages', send));
  must('a closed thread', await api.PATCH('/threads/{id}', { params: { path: { id: first.threadId } }, body: { status: 'closed' } }));
  must('a message opening a new thread', await api.POST('/messages', send));
  const stages = must('the stages', await api.GET('/stages')).data;
  const empty = must('a stage to delete', await api.POST('/stages', { body: { name: 'Etapa temporária' } }));
  // Webhook endpoints (the server allows private URLs, so nothing resolves names offline) and a
  // delivery: the stage above recorded no event, the contact below does.
  const hook = { url: 'https://crm.exemplo.com.br/hooks/support-funnel', events: ['*' as const] };
  const endpoint = must('a webhook endpoint', await api.POST('/webhook-endpoints', { body: hook }));
  const endpointToDelete = must('a webhook endpoint to delete', await api.POST('/webhook-endpoints', { body: hook }));
  must('a contact for an event', await api.POST('/contacts', { body: { name: 'Evento Contato' } }));
  const event = must('the events', await api.GET('/events', { params: { query: { limit: 1 } } })).data[0];
  const delivery = must('the deliveries', await api.GET('/webhook-endpoints/{id}/deliveries', { params: { path: { id: endpoint.id } } })).data[0];
  if (!event || !delivery) throw new Error('seeding: no event or no delivery was recorded');
  const rule = {
    name: 'Encerrar após 3 dias sem resposta',
    trigger: { event: 'thread.idle' as const, minutes: 4320, waitingOn: 'customer' as const },
    actions: [{ type: 'set_status' as const, status: 'closed' as const }],
  };
  const automation = must('an automation', await api.POST('/automations', { body: rule }));
  const automationToDelete = must('an automation to delete', await api.POST('/automations', { body: { ...rule, name: 'Regra temporária' } }));
  // A stored file for getMedia: a JPEG, the first type its answer documents.
  const uploaded = await fetch(`${baseUrl}/media?filename=comprovante.jpg`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key.apiKey}`, 'content-type': 'image/jpeg' },
    body: Buffer.from([0xff, 0xd8, 0xff, 0xe0, 0x00, 0x10, 0x4a, 0x46, 0x49, 0x46, 0x00, 0xff, 0xd9]),
  });
  if (uploaded.status !== 201) throw new Error(`seeding a media file: ${uploaded.status} ${await uploaded.text()}`);
  const media = (await uploaded.json()) as { id: string };
  // SLA policies to read, change and delete (disabled: no thread of the run is held to them); two
  // contacts for mergeContact; upsertContact finds João by his phone.
  const policy = { name: 'Primeira resposta em 15 minutos', enabled: false, targets: { firstResponseMinutes: 15 } };
  const slaPolicy = must('an SLA policy', await api.POST('/sla-policies', { body: policy }));
  const slaPolicyToDelete = must('an SLA policy to delete', await api.POST('/sla-policies', { body: { ...policy, name: 'Temporária' } }));
  const mergeTarget = must('a contact to merge into', await api.POST('/contacts', { body: { name: 'Carla Lima', email: 'carla@exemplo.com.br' } }));
  const mergeSource = must('a duplicate contact', await api.POST('/contacts', { body: { name: 'Carla L.', email: 'carla.l@exemplo.com.br' } }));
  return {
    agentId: agent.id,
    agentToDeleteId: doomed.id,
    contactId: contact.id,
    contactPhone: phone,
    threadId: message.threadId,
    metaChannelId: channel.id,
    metaAppSecret: meta.appSecret,
    metaVerifyToken: meta.verifyToken,
    contactToDeleteId: toErase.id,
    otherContactId: other.id,
    closedThreadId: first.threadId,
    stageId: stages[1]!.id,
    stageToDeleteId: empty.id,
    eventId: event.id,
    webhookEndpointId: endpoint.id,
    webhookEndpointToDeleteId: endpointToDelete.id,
    deliveryId: delivery.id,
    automationId: automation.id,
    automationToDeleteId: automationToDelete.id,
    mediaId: media.id,
    messageId: message.id,
    slaPolicyId: slaPolicy.id,
    slaPolicyToDeleteId: slaPolicyToDelete.id,
    mergeTargetId: mergeTarget.id,
    mergeSourceId: mergeSource.id,
  };
}

// newman has no type declarations here; this is the part of its API the runner uses.
interface NewmanFailure {
  error: { name?: string; message?: string; test?: string };
  source?: { name?: string; request?: { method?: string; url?: { toString(): string } } };
  at?: string;
}
interface NewmanStat {
  total: number;
  failed: number;
}
interface NewmanSummary {
  run: {
    stats: Record<'requests' | 'assertions' | 'testScripts' | 'prerequestScripts' | 'items', NewmanStat>;
    failures: NewmanFailure[];
    executions: Array<{ item: { name: string }; response?: { code: number } }>;
  };
}
type NewmanRun = (options: Record<string, unknown>, callback: (err: Error | null, summary: NewmanSummary) => void) => unknown;

async function runNewman(collection: Collection, variables: Record<string, string>): Promise<NewmanSummary> {
  const newman = createRequire(import.meta.url)('newman') as { run: NewmanRun };
  return new Promise((resolve, reject) => {
    newman.run(
      {
        collection,
        environment: { name: 'contract tests', values: Object.entries(variables).map(([key, value]) => ({ key, value, type: 'default', enabled: true })) },
        reporters: ['cli'],
        reporter: { cli: { noSummary: false } },
        timeout: 900_000,
        timeoutRequest: 60_000,
        ignoreRedirects: true,
      },
      (err, summary) => (err ? reject(err) : resolve(summary)),
    );
  });
}

/**
 * GET /events/stream answers 200 with a stream that never ends, which newman would wait on until its
 * request timeout: the collection keeps that operation's error variations (401, 400...) and drops
 * its 200 request (test/stream.test.ts and test/stream.browser.test.ts drive the stream itself).
 */
function dropEndlessRequests(collection: Collection): Collection {
  const summary = (spec.paths as Record<string, { get?: { summary?: string } }>)['/events/stream']?.get?.summary;
  const keep = (items: CollectionItem[]): CollectionItem[] =>
    items.filter((item) => item.item || item.name !== summary).map((item) => (item.item ? { ...item, item: keep(item.item) } : item));
  return { ...collection, item: keep(collection.item ?? []) };
}

/**
 * Fuzz variations that no example can turn into a 400, dropped one by one by name (test/contract/README.md
 * says why): Portman reads the list form of a condition's `value` (AutomationConditionValue's `items`)
 * as a field `items` of the condition, `conditions.all[0].items`, which no valid body has (a condition
 * takes no `items`: additionalProperties false). It finds no value there, changes nothing, and expects
 * a 400 for the unchanged, valid example. Every other fuzz variation of these operations is kept, and a
 * name listed here that Portman no longer generates fails the run, so the list cannot outlive its reason.
 */
const unfuzzable: Array<{ path: string; method: 'post' | 'patch'; variations: string[] }> = ['post', 'patch'].map((method) => ({
  path: method === 'post' ? '/sla-policies' : '/sla-policies/{id}',
  method: method as 'post' | 'patch',
  variations: ['all', 'any'].flatMap((list) => [
    `[Fuzzed][minimum length conditions.${list}[0].items]`,
    `[Fuzzed][maximum length conditions.${list}[0].items]`,
  ]),
}));

function dropUnfuzzable(collection: Collection): Collection {
  const paths = spec.paths as Record<string, Record<string, { summary?: string }>>;
  const names = new Set(unfuzzable.flatMap(({ path: p, method, variations }) => variations.map((v) => `${paths[p]?.[method]?.summary ?? '?'}${v}`)));
  const dropped = new Set<string>();
  const keep = (items: CollectionItem[]): CollectionItem[] =>
    items
      .filter((item) => item.item || !(item.name && names.has(item.name) && dropped.add(item.name)))
      .map((item) => (item.item ? { ...item, item: keep(item.item) } : item));
  const result = { ...collection, item: keep(collection.item ?? []) };
  const stale = [...names].filter((name) => !dropped.has(name));
  if (stale.length > 0) throw new Error(`Portman no longer generates ${stale.join(', ')}: remove them from unfuzzable`);
  return result;
}

/** Operations of the contract that no request of the collection exercises (by method and path). */
function uncovered(collection: Collection): string[] {
  const seen = new Set<string>();
  const walk = (items: CollectionItem[]): void => {
    for (const item of items) {
      if (item.item) walk(item.item);
      else if (item.request) seen.add(`${item.request.method.toLowerCase()} /${item.request.url.path.map((p) => p.replace(/^:(\w+)$/, '{$1}')).join('/')}`);
    }
  };
  walk(collection.item ?? []);
  return contractOperations.filter((op) => !seen.has(`${op.method} ${op.path}`)).map((op) => op.operationId);
}

async function main(): Promise<number> {
  let server: RealServer | undefined;
  const scratch = serverUrl ? await createScratchDatabase(serverUrl, 'sf_contract') : undefined;
  databaseUrl = scratch?.url;
  try {
    console.log(`contract tests: database ${databaseUrl ? 'PostgreSQL (DATABASE_URL)' : `PGlite in ${workDir}`}, Redis ${redisUrl ? 'REDIS_URL' : 'none'}`);
    console.log('contract tests: portman is generating the collection from openapi.yaml');
    const collection = dropUnfuzzable(dropEndlessRequests(await generateCollection(workDir)));
    const missing = uncovered(collection);
    if (missing.length > 0) throw new Error(`the collection has no request for ${missing.join(', ')}`);

    const pgliteDir = path.join(workDir, 'pglite');
    const key = await provisionKey(databaseUrl, pgliteDir, 'Contract tests');
    // The collection's 401 variations fail authentication 32 times from one IP on purpose; the
    // default 30 per minute would turn the last ones into 429s. The limit itself is tested in test/.
    // Webhook URLs are taken as written (no name resolved, offline): the SSRF guard is tested in test/.
    server = await startRealServer({ databaseUrl, pgliteDir, env: { FAILED_AUTH_LIMIT: '100000', OUTBOUND_ALLOW_PRIVATE_URLS: 'true' } });
    console.log(`contract tests: server on ${server.baseUrl} (pid ${server.child.pid})`);
    const ids = await seed(server.baseUrl, key);
    const channel = (type: string): string => key.channels.find((c) => c.type === type)?.id ?? '';

    const summary = await runNewman(collection, {
      baseUrl: server.baseUrl,
      // Meta's webhooks sit at the service's root, outside /v1.
      serviceUrl: server.baseUrl.replace(/\/v1$/, ''),
      bearerToken: key.apiKey,
      workspaceId: key.workspaceId,
      whatsappChannelId: channel('whatsapp'),
      instagramChannelId: channel('instagram'),
      ...ids,
    });

    const { stats, failures } = summary.run;
    const statuses = new Map<number, number>();
    for (const execution of summary.run.executions) {
      const code = execution.response?.code ?? 0;
      statuses.set(code, (statuses.get(code) ?? 0) + 1);
    }
    console.log('\n==> contract tests summary');
    console.log(`operations in the contract: ${contractOperations.length}, all in the collection`);
    console.log(`requests:   ${stats.requests.total} (${stats.requests.failed} failed)`);
    console.log(`assertions: ${stats.assertions.total} (${stats.assertions.failed} failed)`);
    console.log(
      `scripts:    ${stats.testScripts.total} test, ${stats.prerequestScripts.total} pre-request (${stats.testScripts.failed + stats.prerequestScripts.failed} failed)`,
    );
    console.log(
      `statuses:   ${[...statuses]
        .sort(([a], [b]) => a - b)
        .map(([code, n]) => `${code}×${n}`)
        .join(', ')}`,
    );
    console.log(`failures:   ${failures.length}`);
    for (const failure of failures) {
      const request = failure.source?.request;
      console.log(`  - ${failure.source?.name ?? '?'} (${request?.method ?? ''} ${request?.url?.toString() ?? ''})`);
      console.log(`      ${failure.error.test ? `${failure.error.test}: ` : ''}${failure.error.name ?? ''}: ${failure.error.message ?? ''}`);
    }
    for (const line of server.notices) console.log(`the server warned about this machine: ${line}`);
    if (server.problems.length > 0) {
      console.log(`server warnings and errors (${server.problems.length}):`);
      for (const line of server.problems) console.log(`  ${line}`);
    }
    const failed =
      failures.length > 0 ||
      stats.assertions.total === 0 ||
      stats.assertions.failed > 0 ||
      stats.requests.failed > 0 ||
      stats.testScripts.failed > 0 ||
      stats.prerequestScripts.failed > 0;
    console.log(failed ? '\ncontract tests FAILED' : '\ncontract tests passed');
    return failed ? 1 : 0;
  } finally {
    if (server) await stop(server.child);
    await scratch?.drop();
  }
}

main().then(
  (code) => process.exit(code),
  (err: unknown) => {
    process.stderr.write(`contract tests: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    // process.exit ends the run whether or not stopping the children failed.
    void stopAll().finally(() => process.exit(1));
  },
);
