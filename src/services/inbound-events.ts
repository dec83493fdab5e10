// What a channel adapter hands the receive use case (services/receive.ts receiveEvents): a
// customer's message, reaction or changed user id, or a provider's status of one of our messages,
// as parsed from a delivery (Meta's webhook: channels/webhook.ts; the sandbox: channels/inbound.ts).
// The use case's input, so it lives beside it: the adapters import it, services/ imports no adapter.
import type { MessageError } from '../db/messages.js';
import type { InboundMedia } from '../media/inbound.js';

export type InboundEvent =
  | {
      kind: 'message';
      /** WhatsApp `wamid`, Instagram `mid`. */
      externalId: string;
      /** WhatsApp: the phone (`from`/`wa_id`) and/or the BSUID (`from_user_id`/`user_id`), at least one; Instagram: the IGSID. */
      from: WhatsappSender | { instagramId: string };
      /** WhatsApp `contacts[].profile.name` of the sender, when given. */
      name?: string | undefined;
      /** The text; for a file, its caption or null. */
      content: string | null;
      /** The files it carries (fetched by a job: media/fetch.ts). */
      media?: InboundMedia[] | undefined;
      /** When the customer sent it, per Meta. */
      sentAt?: Date | undefined;
      /** The payload of the Instagram quick reply the customer tapped (`message.quick_reply.payload`). */
      quickReplyPayload?: string | undefined;
      /** The provider id of the message it quotes: WhatsApp `context.id`, Instagram `reply_to.mid`. */
      replyToExternalId?: string | undefined;
      /** The button, list row, template button or quick reply tapped: its id (or payload) and title. */
      reply?: { id: string; title: string } | undefined;
    }
  | {
      /** A customer's reaction on a message (never a message of its own); `emoji` null removes theirs. */
      kind: 'reaction';
      /** The provider id of the message reacted to. */
      targetExternalId: string;
      /**
       * The reaction's own provider id (WhatsApp's wamid; for Instagram, which gives none, its event's
       * time and action): a reaction delivered again is applied once. Absent: applied as it comes.
       */
      externalId?: string | undefined;
      from: { phone?: string; whatsappUserId?: string } | { instagramId: string };
      emoji: string | null;
    }
  | { kind: 'status'; externalId: string; status: string; error?: MessageError | undefined }
  /** Meta's `system` message `user_changed_user_id`: the customer known by `previous` now has the BSUID `current`. */
  | { kind: 'user_id_changed'; externalId: string; previous: string; current: string };

/**
 * A WhatsApp customer as a delivery names them: a phone, a BSUID or both, and the username they
 * show: null when the delivery's profile of them shows none (they have none now), undefined when
 * the delivery has no profile of them.
 */
export interface WhatsappSender {
  phone?: string | undefined;
  whatsappUserId?: string | undefined;
  username?: string | null | undefined;
}
