// The reads and writes of the conversation's actions (services/conversation.ts): the message a
// reply quotes, a message locked for a reaction with what the reaction depends on, a message's
// reactions replaced, the latest inbound message of a thread on a Meta channel.
import { sql } from 'kysely';
import type { Db } from './database.js';
import { phoneForms } from '../phones.js';
import type { ChannelProvider, ChannelType, MessageRow } from './schema.js';

/** The message a reply names: whose it is and whether it reached the channel; undefined when the workspace has none. */
export async function findQuoted(db: Db, workspaceId: string, replyTo: string) {
  return db
    .selectFrom('messages')
    .select(['contact_id', 'channel_id', 'external_id'])
    .where('workspace_id', '=', workspaceId)
    .where('id', '=', replyTo)
    .executeTakeFirst();
}

/** A message locked for a reaction, with its channel, whether its contact was erased and when the contact last wrote there. */
export async function lockReactionTarget(trx: Db, workspaceId: string, messageId: string) {
  return sql<MessageRow & { channel_type: ChannelType; provider: ChannelProvider; erased: boolean; last_inbound_at: Date | null }>`
      select m.*, ch.type as channel_type, ch.provider, co.erased_at is not null as erased,
             (select max(t.last_inbound_at) from threads t
               where t.workspace_id = m.workspace_id and t.contact_id = m.contact_id and t.channel_id = m.channel_id) as last_inbound_at
        from messages m
        join channels ch on ch.workspace_id = m.workspace_id and ch.id = m.channel_id
        join contacts co on co.workspace_id = m.workspace_id and co.id = m.contact_id
       where m.workspace_id = ${workspaceId} and m.id = ${messageId}
         for update of m`.execute(trx);
}

/** Statement builder: a message's reactions replaced (JSON text), returning the message (for moveMessage). */
export function reactionsChange(trx: Db, message: { workspace_id: string; id: string }, reactions: string, reactionIds?: string[]) {
  return trx
    .updateTable('messages')
    .set({ reactions, ...(reactionIds && { reaction_ids: reactionIds }) })
    .where('workspace_id', '=', message.workspace_id)
    .where('id', '=', message.id)
    .returningAll();
}

/** The customer reactions' ids a message remembers (`reaction_ids`), its reactions unchanged. */
export async function rememberReactions(trx: Db, message: { workspace_id: string; id: string }, reactionIds: string[]): Promise<void> {
  await trx.updateTable('messages').set({ reaction_ids: reactionIds }).where('workspace_id', '=', message.workspace_id).where('id', '=', message.id).execute();
}

/** The latest inbound message of a thread that reached a Meta channel (it has a provider id); undefined for none. */
export async function latestMetaInbound(db: Db, workspaceId: string, threadId: string) {
  return db
    .selectFrom('messages as m')
    .innerJoin('channels as ch', (join) => join.onRef('ch.workspace_id', '=', 'm.workspace_id').onRef('ch.id', '=', 'm.channel_id'))
    .select(['m.workspace_id', 'm.id', 'm.channel_id', 'm.contact_id'])
    .where('m.workspace_id', '=', workspaceId)
    .where('m.thread_id', '=', threadId)
    .where('m.direction', '=', 'inbound')
    .where('m.external_id', 'is not', null)
    .where('ch.provider', '=', 'meta')
    .orderBy('m.created_at', 'desc')
    .orderBy('m.id', 'desc')
    .limit(1)
    .executeTakeFirst();
}

/** The channel's message with this provider id, of the customer at `from`, locked; undefined when none. */
export async function lockInboundReactionTarget(
  trx: Db,
  channel: { workspace_id: string; id: string },
  externalId: string,
  from: { phone?: string; whatsappUserId?: string } | { instagramId: string },
): Promise<MessageRow | undefined> {
  return trx
    .selectFrom('messages as m')
    .innerJoin('contacts as co', (join) => join.onRef('co.workspace_id', '=', 'm.workspace_id').onRef('co.id', '=', 'm.contact_id'))
    .selectAll('m')
    .where('m.workspace_id', '=', channel.workspace_id)
    .where('m.channel_id', '=', channel.id)
    .where('m.external_id', '=', externalId)
    .where((eb) => {
      // The message's contact is the one reacting: by Instagram id, or by BSUID or phone (either form of a Brazilian mobile).
      if ('instagramId' in from) return eb('co.instagram_id', '=', from.instagramId);
      const by = [
        ...(from.whatsappUserId ? [eb('co.whatsapp_user_id', '=', from.whatsappUserId)] : []),
        ...(from.phone ? [eb('co.phone', 'in', phoneForms(from.phone))] : []),
      ];
      return by.length > 0 ? eb.or(by) : eb.val(false);
    })
    .forUpdate('m')
    .executeTakeFirst();
}
