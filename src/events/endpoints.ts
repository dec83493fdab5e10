// The integrator's webhook endpoints (secrets sealed as channel secrets are, shown once) and their
// delivery logs, with the manual retry of a delivery.
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../../generated/api.js';
import type { SecretBox } from '../secrets.js';
import { transact, type Db } from '../db/database.js';
import { listPage, listSource, type PageText } from '../db/pagination.js';
import type { WebhookEndpointRow } from '../db/schema.js';
import { ApiError } from '../errors.js';
import { runNowOrEnqueue } from '../jobs/queue.js';
import { WEBHOOK_QUEUE } from './record.js';
import { newWebhookSecret } from './sender.js';
import { checkUrlShape, RefusedUrlError, resolveTarget } from '../outbound/ssrf.js';

export type WebhookEndpoint = components['schemas']['WebhookEndpoint'];
export type WebhookEndpointCreated = components['schemas']['WebhookEndpointCreated'];
export type WebhookDelivery = components['schemas']['WebhookDelivery'];
type WebhookEndpointCreate = components['schemas']['WebhookEndpointCreate'];
type WebhookEndpointUpdate = components['schemas']['WebhookEndpointUpdate'];

export function endpointRowToEndpoint(row: WebhookEndpointRow): WebhookEndpoint {
  return {
    id: row.id,
    url: row.url,
    events: row.events as WebhookEndpoint['events'],
    description: row.description,
    enabled: row.enabled,
    disabledReason: row.disabled_reason,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

const endpointList = listSource<WebhookEndpoint>('webhook_endpoints', {
  id: 'id',
  url: 'url',
  events: 'events',
  description: 'description',
  enabled: 'enabled',
  disabledReason: 'disabled_reason',
  createdAt: { instant: 'created_at' },
  updatedAt: { instant: 'updated_at' },
});

/**
 * The 400 of a URL the guard refuses, naming /body/url. With private URLs allowed only its shape
 * is checked (a name that does not resolve yet is fine); otherwise its name must resolve, to
 * public addresses only.
 */
async function checkUrl(url: string, allowPrivate: boolean): Promise<void> {
  try {
    if (allowPrivate) checkUrlShape(url, true);
    else await resolveTarget(url, false);
  } catch (err) {
    if (!(err instanceof RefusedUrlError)) throw err;
    throw new ApiError(400, 'validation_error', 'The request does not match the contract.', [{ path: '/body/url', message: err.message }]);
  }
}

/** '*' stands alone: a list with it and other types is the same as ['*']. */
const normaliseTypes = (events: readonly string[]): string[] => (events.includes('*') ? ['*'] : [...events]);

export async function createEndpoint(
  db: Db,
  box: SecretBox | undefined,
  workspaceId: string,
  input: WebhookEndpointCreate,
  allowPrivate: boolean,
): Promise<WebhookEndpointCreated> {
  if (!box) throw new ApiError(503, 'service_unavailable', 'Webhook endpoints are not available: the operator has not configured SECRETS_KEY.');
  await checkUrl(input.url, allowPrivate);
  const secret = newWebhookSecret();
  const now = new Date();
  const row = await db
    .insertInto('webhook_endpoints')
    .values({
      workspace_id: workspaceId,
      id: uuidv7(),
      url: input.url,
      events: normaliseTypes(input.events),
      description: input.description ?? null,
      secret: box.seal(secret),
      created_at: now,
      updated_at: now,
    })
    .returningAll()
    .executeTakeFirstOrThrow();
  return { ...endpointRowToEndpoint(row), secret };
}

export function listEndpoints(db: Db, workspaceId: string, page: number, limit: number): Promise<PageText<WebhookEndpoint>> {
  return listPage(db, endpointList, [['workspace_id = ?', workspaceId]], { page, limit });
}

export async function getEndpoint(db: Db, workspaceId: string, id: string): Promise<WebhookEndpoint | undefined> {
  const row = await db.selectFrom('webhook_endpoints').selectAll().where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
  return row && endpointRowToEndpoint(row);
}

export async function updateEndpoint(
  db: Db,
  workspaceId: string,
  id: string,
  patch: WebhookEndpointUpdate,
  allowPrivate: boolean,
): Promise<WebhookEndpoint | undefined> {
  if (patch.url !== undefined) await checkUrl(patch.url, allowPrivate);
  const row = await db
    .updateTable('webhook_endpoints')
    .set({
      ...(patch.url !== undefined && { url: patch.url }),
      ...(patch.events !== undefined && { events: normaliseTypes(patch.events) }),
      ...(patch.description !== undefined && { description: patch.description }),
      // Enabling starts over: no reason, no failing streak.
      ...(patch.enabled !== undefined && { enabled: patch.enabled, disabled_reason: null, ...(patch.enabled && { failing_since: null }) }),
      updated_at: new Date(),
    })
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst();
  return row && endpointRowToEndpoint(row);
}

/** Deletes an endpoint and its deliveries (their jobs find nothing and end); false when there was none. */
export async function deleteEndpoint(db: Db, workspaceId: string, id: string): Promise<boolean> {
  const result = await db.deleteFrom('webhook_endpoints').where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
  return result.numDeletedRows > 0n;
}

const deliveryList = listSource<WebhookDelivery>('webhook_deliveries', {
  id: 'id',
  eventId: 'event_id',
  eventType: { sql: `(select e.type from events e where e.workspace_id = p.workspace_id and e.id = p.event_id)` },
  status: 'status',
  attempts: 'attempts',
  lastAttemptAt: { instant: 'last_attempt_at' },
  lastResponseStatus: 'last_response_status',
  lastError: 'last_error',
  nextAttemptAt: { instant: 'next_attempt_at' },
  createdAt: { instant: 'created_at' },
});

export async function endpointExists(db: Db, workspaceId: string, id: string): Promise<boolean> {
  const row = await db.selectFrom('webhook_endpoints').select('id').where('workspace_id', '=', workspaceId).where('id', '=', id).executeTakeFirst();
  return row !== undefined;
}

/** The endpoint's delivery log, newest first. */
export function listDeliveries(db: Db, workspaceId: string, endpointId: string, page: number, limit: number): Promise<PageText<WebhookDelivery>> {
  return listPage(
    db,
    deliveryList,
    [
      ['workspace_id = ?', workspaceId],
      ['endpoint_id = ?', endpointId],
    ],
    { page, limit, newestFirst: true },
  );
}

export async function getDelivery(db: Db, workspaceId: string, endpointId: string, id: string): Promise<WebhookDelivery | undefined> {
  const row = await db
    .selectFrom('webhook_deliveries as d')
    .innerJoin('events as e', (join) => join.onRef('e.workspace_id', '=', 'd.workspace_id').onRef('e.id', '=', 'd.event_id'))
    .selectAll('d')
    .select('e.type as event_type')
    .where('d.workspace_id', '=', workspaceId)
    .where('d.endpoint_id', '=', endpointId)
    .where('d.id', '=', id)
    .executeTakeFirst();
  if (!row) return undefined;
  return {
    id: row.id,
    eventId: row.event_id,
    eventType: row.event_type as WebhookDelivery['eventType'],
    status: row.status,
    attempts: row.attempts,
    lastAttemptAt: row.last_attempt_at?.toISOString() ?? null,
    lastResponseStatus: row.last_response_status,
    lastError: row.last_error,
    nextAttemptAt: row.next_attempt_at?.toISOString() ?? null,
    createdAt: row.created_at.toISOString(),
  };
}

/**
 * Sends a delivery again now: a pending one's job is made due at once; a finished one is pending
 * again with a new job (payload `manual`; for a delivery that had failed, a failed retry fails it
 * again, no schedule follows). Undefined when the endpoint has no such delivery.
 */
export async function retryDelivery(db: Db, workspaceId: string, endpointId: string, id: string): Promise<WebhookDelivery | undefined> {
  const now = new Date();
  const found = await transact(db, async (trx) => {
    const before = await trx
      .selectFrom('webhook_deliveries')
      .select('status')
      .where('workspace_id', '=', workspaceId)
      .where('endpoint_id', '=', endpointId)
      .where('id', '=', id)
      .forUpdate()
      .executeTakeFirst();
    if (!before) return false;
    const row = await trx
      .updateTable('webhook_deliveries')
      .set({ status: 'pending', next_attempt_at: now })
      .where('workspace_id', '=', workspaceId)
      .where('endpoint_id', '=', endpointId)
      .where('id', '=', id)
      .returning(['id'])
      .executeTakeFirst();
    if (!row) return false;
    // A job still waiting for this delivery is made due now; otherwise a new one is added.
    await runNowOrEnqueue(
      trx,
      WEBHOOK_QUEUE,
      { deliveryId: id, endpointId, manual: true, wasFailed: before.status === 'failed' },
      { workspaceId, field: 'deliveryId', now },
    );
    return true;
  });
  return found ? getDelivery(db, workspaceId, endpointId, id) : undefined;
}

/**
 * Re-seals every endpoint secret that another key sealed (SECRETS_KEY_PREVIOUS) under the current
 * SECRETS_KEY (npm run secrets:rotate, with the channels' secrets); one changed meanwhile is left
 * for the next run.
 */
export async function rotateWebhookSecrets(db: Db, box: SecretBox): Promise<{ resealed: number; remaining: number }> {
  const stale = () => db.selectFrom('webhook_endpoints').select(['workspace_id', 'id', 'secret']).where('secret', 'not like', `v1.${box.keyId}.%`).execute();
  let resealed = 0;
  for (const row of await stale()) {
    const result = await db
      .updateTable('webhook_endpoints')
      .set({ secret: box.seal(box.open(row.secret)) })
      .where('workspace_id', '=', row.workspace_id)
      .where('id', '=', row.id)
      .where('secret', '=', row.secret)
      .executeTakeFirst();
    if (result.numUpdatedRows > 0n) resealed++;
  }
  return { resealed, remaining: (await stale()).length };
}
