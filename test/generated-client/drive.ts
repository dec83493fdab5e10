// Compiled (tsc --strict) and run by scripts/check-generated-client.ts against a fetch client that
// @hey-api/openapi-ts generates from openapi.yaml into ./client beside it (not in the repository):
// a few operations and errors of the real server, written as an SDK user would write them.
// API_BASE_URL and API_KEY (an enterprise key with every scope) come from the environment.
import { client } from './client/client.gen';
import {
  createAutomation,
  listAutomationRuns,
  createContact,
  getContact,
  getMe,
  getMedia,
  getNpsStats,
  getThread,
  listChannels,
  listContacts,
  listStages,
  listThreadHistory,
  registerNps,
  sendMessage,
  simulateSandboxInbound,
  testAutomation,
  uploadMedia,
  updateContact,
  updateThread,
} from './client/sdk.gen';
import type { Automation, AutomationAction, AutomationRun, Contact, ErrorResponse, Me, Thread, ThreadHistoryEntry } from './client/types.gen';

function check(condition: unknown, what: string): asserts condition {
  if (!condition) throw new Error(`failed: ${what}`);
}

/** An error answer: its body is the contract's ErrorResponse, its requestId the response's X-Request-Id. */
function expectError(result: { error?: ErrorResponse | undefined; response: Response }, status: number, code: ErrorResponse['error']['code']): ErrorResponse {
  const { error, response } = result;
  check(response.status === status, `status ${response.status}, expected ${status}`);
  check(error?.error.code === code, `error code ${error?.error.code}, expected ${code}`);
  check(error.error.requestId === response.headers.get('x-request-id'), 'error.requestId is the X-Request-Id');
  return error;
}

async function main(): Promise<void> {
  // The contract's default server became the client's default base URL.
  check(client.getConfig().baseUrl === 'http://127.0.0.1:3000/v1', `default base URL ${client.getConfig().baseUrl}`);
  const baseUrl = process.env.API_BASE_URL;
  const apiKey = process.env.API_KEY;
  check(baseUrl && apiKey, 'API_BASE_URL and API_KEY are set');

  // Without a key first: the generated client sends none unless told.
  client.setConfig({ baseUrl });
  expectError(await getMe(), 401, 'unauthorized');

  client.setConfig({ baseUrl, auth: () => apiKey });
  const me = await getMe();
  const who: Me | undefined = me.data;
  check(who?.plan === 'enterprise' && who.rateLimit === null && who.scopes.includes('contacts:write'), `GET /me ${JSON.stringify(who)}`);

  const channels = await listChannels({ query: { limit: 10 } });
  const whatsapp = channels.data?.data.find((channel) => channel.type === 'whatsapp');
  check(whatsapp, 'a WhatsApp channel');

  const phone = `+55119${String(Date.now() % 100_000_000).padStart(8, '0')}`;
  const created = await createContact({
    body: { name: 'Helena Rocha', phone, labels: ['Cliente VIP', ' cliente vip', 'Boleto'], attributes: { plano: 'premium' } },
  });
  const contact: Contact | undefined = created.data;
  check(created.response.status === 201 && contact?.phone === phone && contact.email === null, `POST /contacts ${JSON.stringify(contact)}`);
  check(contact.labels.join('|') === 'Cliente VIP|Boleto' && contact.attributes.plano === 'premium', `labels and attributes ${JSON.stringify(contact)}`);

  const changed = await updateContact({ path: { id: contact.id }, body: { attributes: { plano: null, pedidos: 3 } } });
  check(changed.data?.attributes.pedidos === 3 && !('plano' in changed.data.attributes), `PATCH /contacts/{id} attributes ${JSON.stringify(changed.data)}`);
  const labelled = await listContacts({ query: { label: ['cliente vip', 'BOLETO'] } });
  check(labelled.data?.data.length === 1 && labelled.data.data[0]?.id === contact.id, 'GET /contacts?label=&label= finds it');

  const clash = expectError(await createContact({ body: { name: 'Helena R.', phone } }), 409, 'conflict');
  check(clash.error.details?.[0]?.existingId === contact.id, 'the 409 names the contact holding the phone');

  const invalid = expectError(await createContact({ body: { name: 'Sem Telefone', phone: '11987654321' } }), 400, 'validation_error');
  check(invalid.error.details?.length === 1 && invalid.error.details[0]?.path === '/body/phone', 'one detail, on /body/phone');

  const found = await listContacts({ query: { phone } });
  check(found.data?.pagination.total === 1 && found.data.data[0]?.id === contact.id, 'GET /contacts?phone= finds it');

  expectError(await getContact({ path: { id: '01935f50-0000-7000-8000-000000000000' } }), 404, 'not_found');

  const sent = await sendMessage({ body: { contactId: contact.id, channelId: whatsapp.id, content: 'Olá, Helena! Seu pedido chegou.' } });
  check(sent.response.status === 201 && sent.data?.status === 'queued', `POST /messages ${JSON.stringify(sent.data)}`);

  const thread = await getThread({ path: { id: sent.data.threadId } });
  const open: Thread | undefined = thread.data;
  check(open?.status === 'open' && open.contactId === contact.id, `GET /threads/{id} ${JSON.stringify(open)}`);

  const relabelled = await updateThread({ path: { id: open.id }, body: { labels: ['Entrega'] } });
  check(relabelled.data?.labels[0] === 'Entrega', `PATCH /threads/{id} labels ${JSON.stringify(relabelled.data)}`);
  const history = await listThreadHistory({ path: { id: open.id } });
  const entry: ThreadHistoryEntry | undefined = history.data?.data.find((e) => e.field === 'labels');
  check(
    Array.isArray(entry?.to) && entry.to[0] === 'Entrega' && Array.isArray(entry.from) && entry.from.length === 0,
    `labels history ${JSON.stringify(entry)}`,
  );

  const answeredAt = new Date(Date.now() - 60_000).toISOString();
  const nps = await registerNps({ path: { id: open.id }, body: { score: 10, answeredAt } });
  check(nps.response.status === 201 && nps.data?.npsScore === 10, `POST /threads/{id}/nps ${JSON.stringify(nps.data)}`);

  const stats = await getNpsStats({
    query: { workspaceId: who.workspaceId, dateFrom: new Date(Date.now() - 3_600_000).toISOString(), dateTo: new Date().toISOString() },
  });
  check(stats.data?.total === 1 && stats.data.npsScore === 100, `GET /threads/stats/nps ${JSON.stringify(stats.data)}`);

  // Automations: the trigger and actions are tagged unions the generated types narrow by `event` and `type`.
  const stages = await listStages();
  const emAtendimento = stages.data?.data.find((stage) => stage.name === 'Em atendimento');
  check(emAtendimento, 'the stage Em atendimento');
  const actions: AutomationAction[] = [
    { type: 'move_stage', stageId: emAtendimento.id },
    { type: 'add_labels', target: 'thread', labels: ['reembolso'] },
  ];
  const made = await createAutomation({
    body: {
      name: 'Pedidos de reembolso',
      trigger: { event: 'message.received' },
      conditions: { any: [{ field: 'message.content', operator: 'contains', value: 'reembolso' }] },
      actions,
    },
  });
  const automation: Automation | undefined = made.data;
  const first = automation?.actions[0];
  check(automation && first?.type === 'move_stage' && first.stageId === emAtendimento.id, `POST /automations ${JSON.stringify(automation)}`);

  const unfit = expectError(
    await createAutomation({
      body: {
        name: 'Mensagem num timer',
        trigger: { event: 'thread.idle', minutes: 60, waitingOn: 'agent' },
        conditions: { all: [{ field: 'message.content', operator: 'contains', value: 'oi' }] },
        actions: [{ type: 'stop' }],
      },
    }),
    400,
    'validation_error',
  );
  check(unfit.error.details?.[0]?.path === '/body/conditions/all/0/field', 'a message condition on a timer is named');

  const dry = await testAutomation({ path: { id: automation.id }, body: { threadId: open.id } });
  check(dry.data?.matched === false && dry.data.actions.length === 2, `POST /automations/{id}/test ${JSON.stringify(dry.data)}`);

  // The automation runs by itself on a customer's message about a refund; its run is in the log.
  await simulateSandboxInbound({ path: { id: whatsapp.id }, body: { from: '+5511976543210', content: 'Quero o reembolso, por favor' } });
  let runs: AutomationRun[] = [];
  for (let tries = 0; tries < 50 && runs.length === 0; tries++) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    runs = (await listAutomationRuns({ path: { id: automation.id } })).data?.data ?? [];
  }
  const run = runs[0];
  check(
    run?.status === 'succeeded' && run.actions.map((a) => `${a.type}:${a.status}`).join() === 'move_stage:succeeded,add_labels:succeeded',
    `GET /automations/{id}/runs ${JSON.stringify(runs)}`,
  );

  // A file up (the body is the file, its own Content-Type) and down (the same bytes), unedited generated code.
  const bytes = new Uint8Array([0x25, 0x50, 0x44, 0x46, 0x2d, 0x31, 0x2e, 0x34, 0x0a, 0x25, 0x25, 0x45, 0x4f, 0x46]);
  const uploaded = await uploadMedia({
    body: new Blob([bytes], { type: 'application/pdf' }),
    query: { filename: 'nota.pdf' },
    headers: { 'Content-Type': 'application/pdf' },
  });
  check(
    uploaded.response.status === 201 && uploaded.data?.type === 'document' && uploaded.data.size === bytes.length,
    `POST /media ${JSON.stringify(uploaded.data)}`,
  );
  const downloaded = await getMedia({ path: { id: uploaded.data.id }, parseAs: 'blob' });
  check(downloaded.data, 'GET /media/{id} answered the file');
  const got = new Uint8Array(await downloaded.data.arrayBuffer());
  check(downloaded.response.status === 200 && got.length === bytes.length && got.every((b, i) => b === bytes[i]), 'GET /media/{id} gives the same bytes');

  process.stdout.write(
    'generated client: calls answered as the contract says (401, 200, 201, 409, 400, 404, labels, NPS 100, automations and their runs, a file up and down)\n',
  );
}

main().catch((err: unknown) => {
  process.stderr.write(`${err instanceof Error ? err.message : String(err)}\n`);
  process.exitCode = 1;
});
