// Creating and changing channels: Meta secrets are sealed before they reach the database and
// opened only where a request to Meta or a webhook check needs them.
import type { components } from '../../generated/api.js';
import {
  channelRowToChannel,
  getChannelRow,
  insertChannel,
  listChannelsWithStaleSecrets,
  metaAccountHolder,
  resealChannelSecrets,
  updateChannelRow,
  type Channel,
} from '../db/channels.js';
import { transact, type Db } from '../db/database.js';
import type { ChannelRow } from '../db/schema.js';
import { ApiError, isConstraintError, notFound } from '../errors.js';
import type { SecretBox } from '../secrets.js';

type ChannelCreate = components['schemas']['ChannelCreate'];
type ChannelUpdate = components['schemas']['ChannelUpdate'];

/** What the service needs to talk to Meta for a channel; never logged, never on the wire. */
export interface MetaSecrets {
  accessToken: string;
  appSecret: string;
  verifyToken: string;
}

export class SecretsUnavailableError extends ApiError {
  constructor() {
    super(503, 'service_unavailable', 'Meta channels are not available: the operator has not configured SECRETS_KEY.');
  }
}

function requireBox(box: SecretBox | undefined): SecretBox {
  if (!box) throw new SecretsUnavailableError();
  return box;
}

/** The Meta secrets of a meta channel; throws when they cannot be opened. */
export function openMetaSecrets(box: SecretBox | undefined, row: Pick<ChannelRow, 'secrets'>): MetaSecrets {
  if (!row.secrets) throw new Error('the channel has no Meta secrets');
  return JSON.parse(requireBox(box).open(row.secrets)) as MetaSecrets;
}

/** The unique index that keeps a Meta account (type, externalId) on one channel of all workspaces. */
const ONE_CHANNEL_PER_META_ACCOUNT = 'channels_meta_account_key';

const accountTaken = (existingId?: string): ApiError =>
  new ApiError(409, 'conflict', 'This Meta account is already connected to another channel.', [
    { path: '/body/meta/externalId', message: 'is connected to another channel', ...(existingId && { existingId }) },
  ]);

/**
 * 409 for a Meta account another channel holds: naming it (`existingId`) when it is one of this
 * workspace's, as every 409 names the record holding the value; not when it is another workspace's,
 * which is not the caller's to know of. The index decides, so two requests racing for one account
 * get a 201 and a 409.
 */
async function oneChannelPerMetaAccount<T>(
  db: Db,
  account: { workspaceId: string; type: ChannelRow['type']; externalId: string | null; self?: string },
  write: () => Promise<T>,
): Promise<T> {
  if (account.externalId !== null) {
    const holder = await metaAccountHolder(db, account.workspaceId, account.type, account.externalId, account.self);
    if (holder) throw accountTaken(holder);
  }
  try {
    return await write();
  } catch (err) {
    if (!isConstraintError(err, '23505', ONE_CHANNEL_PER_META_ACCOUNT)) throw err;
    throw accountTaken();
  }
}

export async function createChannel(db: Db, box: SecretBox | undefined, workspaceId: string, input: ChannelCreate): Promise<Channel> {
  const meta = input.provider === 'meta' ? input.meta : undefined;
  const sealed = meta && requireBox(box).seal(JSON.stringify({ accessToken: meta.accessToken, appSecret: meta.appSecret, verifyToken: meta.verifyToken }));
  const row = await oneChannelPerMetaAccount(db, { workspaceId, type: input.type, externalId: meta?.externalId ?? null }, () =>
    insertChannel(db, workspaceId, {
      type: input.type,
      name: input.name,
      provider: input.provider,
      externalId: meta?.externalId ?? null,
      sealedSecrets: sealed ?? null,
    }),
  );
  return channelRowToChannel(row);
}

const incomplete = (missing: string[]): ApiError =>
  new ApiError(
    400,
    'validation_error',
    'The request does not match the contract.',
    missing.map((field) => ({ path: `/body/meta/${field}`, message: 'is required to connect a channel to Meta' })),
  );

/**
 * Applies a PATCH: `meta` fields merge into the stored ones; moving to `meta` needs all four
 * (stored or sent), moving to `sandbox` forgets them. Undefined when the channel is unknown.
 */
export async function updateChannel(db: Db, box: SecretBox | undefined, workspaceId: string, id: string, patch: ChannelUpdate): Promise<Channel | undefined> {
  return transact(db, async (trx) => {
    const row = await getChannelRow(trx, workspaceId, id, { lock: true });
    if (!row) return undefined;
    if (patch.type !== undefined && patch.type !== row.type) {
      throw new ApiError(409, 'conflict', "A channel's type cannot change; create another channel.", [
        { path: '/body/type', message: `the channel is ${row.type}` },
      ]);
    }
    const provider = patch.provider ?? row.provider;
    let externalId: string | null = null;
    let sealedSecrets: string | null = null;
    if (provider === 'meta') {
      const stored: Partial<MetaSecrets> = row.provider === 'meta' && row.secrets ? openMetaSecrets(box, row) : {};
      const merged = { externalId: row.provider === 'meta' ? (row.external_id ?? undefined) : undefined, ...stored, ...patch.meta };
      const missing = (['externalId', 'accessToken', 'appSecret', 'verifyToken'] as const).filter((field) => !merged[field]);
      if (missing.length > 0) throw incomplete(missing);
      externalId = merged.externalId!;
      sealedSecrets = requireBox(box).seal(JSON.stringify({ accessToken: merged.accessToken, appSecret: merged.appSecret, verifyToken: merged.verifyToken }));
    } else if (patch.meta !== undefined) {
      throw new ApiError(400, 'validation_error', 'The request does not match the contract.', [
        { path: '/body/meta', message: 'is only allowed on a meta channel' },
      ]);
    }
    const updated = await oneChannelPerMetaAccount(trx, { workspaceId, type: row.type, externalId, self: id }, () =>
      updateChannelRow(trx, workspaceId, id, {
        name: patch.name ?? row.name,
        provider,
        externalId,
        sealedSecrets,
        ...(patch.defaultAgentId !== undefined && { defaultAgentId: patch.defaultAgentId }),
      }),
    );
    return updated && channelRowToChannel(updated);
  });
}

export async function getChannel(db: Db, workspaceId: string, id: string): Promise<Channel> {
  const row = await getChannelRow(db, workspaceId, id);
  if (!row) throw notFound('Channel');
  return channelRowToChannel(row);
}

/**
 * Re-seals every channel's secrets that another key sealed (SECRETS_KEY_PREVIOUS) under the current
 * SECRETS_KEY; a channel changed meanwhile is left for the next run. After it, the previous key can go.
 */
export async function rotateChannelSecrets(db: Db, box: SecretBox): Promise<{ keyId: string; resealed: number; remaining: number }> {
  const stale = await listChannelsWithStaleSecrets(db, box.keyId);
  let resealed = 0;
  for (const channel of stale) {
    const after = box.seal(box.open(channel.secrets!));
    if (await resealChannelSecrets(db, channel.workspace_id, channel.id, channel.secrets!, after)) resealed++;
  }
  return { keyId: box.keyId, resealed, remaining: (await listChannelsWithStaleSecrets(db, box.keyId)).length };
}
