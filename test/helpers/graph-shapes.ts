// What Meta's Graph API refuses in a `POST /{id}/messages` body, as the WhatsApp Cloud API and the
// Instagram Messaging API document it, for the Graph double (graph.ts) to answer as Graph does (error
// code 100, "Invalid parameter"): the shapes of text, template, media, interactive (reply buttons:
// at most 3, ids of 256 and titles of 20 characters, unique; lists: a button label of 20, 1..10
// sections, 10 rows in all, row ids of 200, titles of 24, descriptions of 72, a title for each of
// several sections), reaction, contextual replies (`context.message_id`, never on a reaction), the
// read receipt (`status: read` with `typing_indicator: {type: text}`); Instagram's message
// (`text` or `attachment`, at most 13 quick replies of 20 characters), `reply_to.mid`, and sender
// actions (`mark_seen`, `typing_on`, `typing_off`, alone in their request).

type Json = Record<string, unknown>;
const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
const chars = (v: unknown): number => (typeof v === 'string' ? [...v].length : -1);
const textOf = (v: unknown, min: number, max: number): boolean => chars(v) >= min && chars(v) <= max;
const onlyKeys = (o: Json, keys: string[]): string | undefined => Object.keys(o).find((k) => !keys.includes(k));
const oneEmoji = (v: string): boolean =>
  [...new Intl.Segmenter('en', { granularity: 'grapheme' }).segment(v)].length === 1 && /\p{Extended_Pictographic}|\p{Regional_Indicator}|\u20e3/u.test(v);

function interactiveProblem(i: unknown): string | undefined {
  if (!isObject(i)) return 'interactive must be an object';
  if (i.type !== 'button' && i.type !== 'list') return `interactive.type ${String(i.type)} is not button or list`;
  if (!isObject(i.body) || !textOf(i.body.text, 1, 1024)) return 'interactive.body.text must be 1..1024 characters';
  if (i.header !== undefined && (!isObject(i.header) || i.header.type !== 'text' || !textOf(i.header.text, 1, 60)))
    return 'interactive.header must be {type: text, text} of 1..60';
  if (i.footer !== undefined && (!isObject(i.footer) || !textOf(i.footer.text, 1, 60))) return 'interactive.footer.text must be 1..60 characters';
  const action = i.action;
  if (!isObject(action)) return 'interactive.action is required';
  if (i.type === 'button') {
    const buttons = action.buttons;
    if (!Array.isArray(buttons) || buttons.length < 1 || buttons.length > 3) return 'interactive.action.buttons must hold 1..3 buttons';
    const ids = new Set<unknown>();
    const titles = new Set<unknown>();
    for (const b of buttons) {
      if (!isObject(b) || b.type !== 'reply' || !isObject(b.reply)) return 'a button must be {type: reply, reply: {id, title}}';
      if (!textOf(b.reply.id, 1, 256) || /^\s|\s$/.test(String(b.reply.id))) return 'a button id must be 1..256 characters, no leading or trailing spaces';
      if (!textOf(b.reply.title, 1, 20)) return 'a button title must be 1..20 characters';
      if (ids.has(b.reply.id) || titles.has(b.reply.title)) return 'button ids and titles must be unique';
      ids.add(b.reply.id);
      titles.add(b.reply.title);
    }
    return onlyKeys(action, ['buttons']) && 'interactive.action of a button message holds buttons only';
  }
  if (!textOf(action.button, 1, 20)) return 'interactive.action.button must be 1..20 characters';
  const sections = action.sections;
  if (!Array.isArray(sections) || sections.length < 1 || sections.length > 10) return 'interactive.action.sections must hold 1..10 sections';
  const ids = new Set<unknown>();
  let rows = 0;
  for (const section of sections) {
    if (!isObject(section) || !Array.isArray(section.rows) || section.rows.length < 1) return 'a section must hold rows';
    if (sections.length > 1 && section.title === undefined) return 'each section needs a title when there are several';
    if (section.title !== undefined && !textOf(section.title, 1, 24)) return 'a section title must be 1..24 characters';
    for (const row of section.rows) {
      rows++;
      if (!isObject(row) || !textOf(row.id, 1, 200) || !textOf(row.title, 1, 24)) return 'a row must be {id (1..200), title (1..24)}';
      if (row.description !== undefined && !textOf(row.description, 0, 72)) return 'a row description must be at most 72 characters';
      if (ids.has(row.id)) return 'row ids must be unique';
      ids.add(row.id);
    }
  }
  return rows > 10 ? 'a list holds at most 10 rows in all' : undefined;
}

const WHATSAPP_TYPES = ['text', 'template', 'image', 'video', 'audio', 'document', 'sticker', 'interactive', 'reaction'];

function whatsappProblem(body: Json): string | undefined {
  if (body.status !== undefined) {
    if (body.status !== 'read' || !textOf(body.message_id, 1, 1024)) return 'a status update must be status: read with a message_id';
    if (body.typing_indicator !== undefined && (!isObject(body.typing_indicator) || body.typing_indicator.type !== 'text')) {
      return 'typing_indicator must be {type: text}';
    }
    return onlyKeys(body, ['messaging_product', 'status', 'message_id', 'typing_indicator']) && 'unexpected parameter in a read receipt';
  }
  if (typeof body.to !== 'string' || !/^\d{8,15}$/.test(body.to)) return 'to must be the phone digits';
  const type = body.type;
  if (typeof type !== 'string' || !WHATSAPP_TYPES.includes(type)) return `type ${String(type)} is not supported`;
  if (!isObject(body[type])) return `${type} object is required`;
  const extra = onlyKeys(body, ['messaging_product', 'recipient_type', 'to', 'type', type, 'context']);
  if (extra) return `unexpected parameter ${extra}`;
  if (body.context !== undefined) {
    if (type === 'reaction') return 'a reaction cannot be a contextual reply';
    if (!isObject(body.context) || !textOf(body.context.message_id, 1, 1024) || onlyKeys(body.context, ['message_id'])) return 'context must be {message_id}';
  }
  const part = body[type];
  switch (type) {
    case 'text':
      return textOf(part.body, 1, 4096) ? undefined : 'text.body must be 1..4096 characters';
    case 'reaction':
      if (!textOf(part.message_id, 1, 1024)) return 'reaction.message_id is required';
      return typeof part.emoji === 'string' && (part.emoji === '' || oneEmoji(part.emoji)) ? undefined : 'reaction.emoji must be one emoji or ""';
    case 'interactive':
      return interactiveProblem(part);
    case 'template':
      return typeof part.name === 'string' && isObject(part.language) && typeof part.language.code === 'string'
        ? undefined
        : 'template needs name and language.code';
    default:
      return typeof part.id === 'string' || typeof part.link === 'string' ? undefined : `${type} needs an id or a link`;
  }
}

function instagramProblem(body: Json): string | undefined {
  if (!isObject(body.recipient) || !textOf(body.recipient.id, 1, 64)) return 'recipient.id is required';
  if (body.sender_action !== undefined) {
    const action = typeof body.sender_action === 'string' ? body.sender_action : JSON.stringify(body.sender_action);
    if (!['mark_seen', 'typing_on', 'typing_off'].includes(action)) return `sender_action ${action} is not supported`;
    return onlyKeys(body, ['recipient', 'sender_action']) && 'a sender action is sent alone (recipient and sender_action only)';
  }
  const extra = onlyKeys(body, ['recipient', 'message', 'messaging_type', 'reply_to']);
  if (extra) return `unexpected parameter ${extra}`;
  if (body.reply_to !== undefined && (!isObject(body.reply_to) || !textOf(body.reply_to.mid, 1, 1024) || onlyKeys(body.reply_to, ['mid']))) {
    return 'reply_to must be {mid}';
  }
  const message = body.message;
  if (!isObject(message)) return 'message is required';
  if ((message.text === undefined) === (message.attachment === undefined)) return 'message needs text or an attachment';
  if (message.text !== undefined && !textOf(message.text, 1, 1000)) return 'message.text must be 1..1000 characters';
  if (message.quick_replies !== undefined) {
    const quick = message.quick_replies;
    if (!Array.isArray(quick) || quick.length < 1 || quick.length > 13) return 'message.quick_replies must hold 1..13 replies';
    for (const q of quick) {
      if (!isObject(q) || q.content_type !== 'text' || !textOf(q.title, 1, 20) || !textOf(q.payload, 1, 1000)) {
        return 'a quick reply must be {content_type: text, title (1..20), payload (1..1000)}';
      }
    }
  }
  return undefined;
}

/** Why Graph would refuse this `/messages` body, or undefined when it takes it. */
export function graphBodyProblem(body: unknown): string | undefined {
  if (!isObject(body)) return 'the body must be a JSON object';
  if (body.messaging_product === 'whatsapp') return whatsappProblem(body);
  if (body.messaging_product !== undefined) return 'messaging_product must be whatsapp';
  return instagramProblem(body);
}
