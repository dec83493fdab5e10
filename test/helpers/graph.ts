// A stand-in for Meta's Graph API at the network edge: a local HTTP server that takes
// `POST /{version}/{id}/messages` as the WhatsApp Cloud API and the Instagram Messaging API
// document it, records every request, and answers as Graph does (a message id, or a Graph error)
// unless the test scripts another answer. Also: signing and posting webhook deliveries as Meta does.
import { createHash, createHmac, randomBytes } from 'node:crypto';
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { closeServer, listenOnLoopback, readBody } from './processes.js';
import { graphBodyProblem } from './graph-shapes.js';

export interface GraphRequest {
  method: string;
  /** The path under the base URL the service was given, e.g. /v23.0/106540352242922/messages. */
  path: string;
  /** The id the request was sent to (phone_number_id or Instagram account id). */
  externalId: string;
  authorization: string | undefined;
  contentType: string | undefined;
  body: any;
  /** The body's bytes as sent (a multipart upload's file among them). */
  raw: Buffer;
  at: number;
  /** What the double answered. */
  answer?: GraphAnswer;
}

/**
 * An answer: an HTTP status and body (JSON, or `raw` bytes of a type) after an optional delay, or a dropped connection.
 * `stallAfter`: of `raw`, only the headers (its whole Content-Length) and that many bytes are sent, then the connection is held open.
 */
export type GraphAnswer = { status: number; body?: unknown; raw?: Buffer; contentType?: string; delayMs?: number; stallAfter?: number } | { drop: true };

/** A file the double serves as Meta does: WhatsApp's media id (GET /{media-id}, then its URL with the token) or an Instagram CDN URL. */
export interface GraphMedia {
  bytes: Buffer;
  mimeType: string;
  /** What GET /{media-id} announces (default: the bytes' own, hex). */
  sha256?: string;
  fileSize?: number | string;
}

export type Script = (request: GraphRequest, index: number) => GraphAnswer | undefined;

/** A Graph error body as Graph sends it. */
export function graphError(code: number, message = 'An error occurred', status = 400, subcode?: number): GraphAnswer {
  return {
    status,
    body: {
      error: {
        message,
        type: 'OAuthException',
        code,
        ...(subcode !== undefined && { error_subcode: subcode }),
        fbtrace_id: `A${randomBytes(8).toString('hex')}`,
      },
    },
  };
}

/** Graph's answer to a send that worked: WhatsApp `messages[0].id`, Instagram `message_id`; to an upload, its id. */
export function sentAnswer(request: GraphRequest): GraphAnswer {
  if (request.path.endsWith('/media')) return { status: 200, body: { id: String(4_000_000_000_000 + Math.floor(Math.random() * 1e12)) } };
  if (request.path.endsWith('/message_attachments'))
    return { status: 200, body: { attachment_id: String(5_000_000_000_000 + Math.floor(Math.random() * 1e12)) } };
  // A read receipt (with or without the typing indicator) answers success; an Instagram sender action, its recipient.
  if (request.body?.status === 'read') return { status: 200, body: { success: true } };
  if (request.body?.sender_action) return { status: 200, body: { recipient_id: request.body.recipient?.id } };
  if (request.body?.messaging_product === 'whatsapp') {
    return {
      status: 200,
      body: {
        messaging_product: 'whatsapp',
        // Meta's "Business-scoped user IDs": a send by BSUID (`recipient`) answers `user_id`, one by phone `wa_id`.
        contacts: [
          request.body.to === undefined
            ? { input: request.body.recipient, user_id: request.body.recipient }
            : { input: request.body.to, wa_id: request.body.to },
        ],
        messages: [{ id: `wamid.${randomBytes(18).toString('base64url')}` }],
      },
    };
  }
  return { status: 200, body: { recipient_id: request.body?.recipient?.id, message_id: `aWdfZAG1${randomBytes(18).toString('base64url')}` } };
}

export class GraphDouble {
  readonly requests: GraphRequest[] = [];
  /** The `/messages` bodies refused as Meta would (not Meta's documented shape), and why. */
  readonly refused: Array<{ request: GraphRequest; problem: string }> = [];
  private readonly media = new Map<string, GraphMedia>();
  private script: Script | undefined;
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<GraphDouble> {
    const { server, origin } = await listenOnLoopback((req, res) => double.handle(req, res));
    const double = new GraphDouble(server, `${origin}/v23.0`);
    return double;
  }

  /** Answers with `script` where it returns an answer, as Graph would otherwise. */
  answer(script: Script | undefined): void {
    this.script = script;
  }

  /** A file WhatsApp holds: its media id (as a webhook names it). */
  addMedia(media: GraphMedia): string {
    const id = String(1_000_000_000_000_000n + BigInt(randomBytes(6).readUIntBE(0, 6)));
    this.media.set(id, media);
    return id;
  }

  /** A file on Instagram's CDN: its URL (as an attachment's payload.url names it). */
  addInstagramMedia(media: GraphMedia): string {
    const name = randomBytes(12).toString('hex');
    this.media.set(`ig-${name}`, media);
    return `${this.url.replace(/\/v23\.0$/, '')}/ig-cdn/${name}.bin?stp=dst-jpg&oh=${randomBytes(8).toString('hex')}`;
  }

  /** The requests sent to one channel's id, in arrival order. */
  to(externalId: string): GraphRequest[] {
    return this.requests.filter((r) => r.externalId === externalId);
  }

  async close(): Promise<void> {
    await closeServer(this.server);
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const raw = await readBody(req);
    const text = raw.toString('utf8');
    const url = new URL(req.url ?? '/', 'http://graph');
    const match = /\/([^/]+)\/(?:messages|media|message_attachments)$/.exec(url.pathname);
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      body = text;
    }
    const request: GraphRequest = {
      method: req.method ?? '',
      path: url.pathname,
      externalId: match ? decodeURIComponent(match[1]!) : '',
      authorization: req.headers.authorization,
      contentType: req.headers['content-type'],
      body,
      raw,
      at: Date.now(),
    };
    const index = this.requests.push(request) - 1;
    let answer: GraphAnswer;
    const media = req.method === 'GET' ? this.mediaAnswer(url) : undefined;
    if (media) request.externalId = media.id;
    if (media?.auth && !req.headers.authorization?.startsWith('Bearer ')) answer = graphError(190, 'Invalid OAuth access token', 401);
    else if (media) answer = this.script?.(request, index) ?? media.answer;
    else if (req.method !== 'POST' || !match) answer = graphError(100, 'Unsupported request', 400);
    else if (!req.headers.authorization?.startsWith('Bearer ')) answer = graphError(190, 'Invalid OAuth access token', 401);
    else answer = this.script?.(request, index) ?? this.refusal(request) ?? sentAnswer(request);
    request.answer = answer;
    if ('drop' in answer) {
      req.socket.destroy();
      return;
    }
    if (answer.delayMs) await new Promise((resolve) => setTimeout(resolve, answer.delayMs));
    if (res.destroyed) return;
    if (answer.raw) {
      res.writeHead(answer.status, { 'content-type': answer.contentType ?? 'application/octet-stream', 'content-length': answer.raw.length });
      if (answer.stallAfter !== undefined) res.write(answer.raw.subarray(0, answer.stallAfter));
      else res.end(answer.raw);
      return;
    }
    res.writeHead(answer.status, { 'content-type': 'application/json' });
    res.end(answer.body === undefined ? '' : JSON.stringify(answer.body));
  }

  /** Graph's error 100 for a `/messages` body Meta's documentation says it refuses (graph-shapes.ts); recorded in `refused`. */
  private refusal(request: GraphRequest): GraphAnswer | undefined {
    if (!request.path.endsWith('/messages')) return undefined;
    const problem = graphBodyProblem(request.body);
    if (!problem) return undefined;
    this.refused.push({ request, problem });
    return graphError(100, `(#100) Invalid parameter: ${problem}`);
  }

  /**
   * Meta's media GETs: `/{version}/{media-id}` (the retrieve call: url, mime_type, sha256, file_size),
   * the URL it names (`/whatsapp-media/{id}`, with the token) and Instagram's CDN (`/ig-cdn/{name}.bin`).
   */
  private mediaAnswer(url: URL): { id: string; auth: boolean; answer: GraphAnswer } | undefined {
    const info = /^\/v23\.0\/(\d+)$/.exec(url.pathname);
    if (info && this.media.has(info[1]!)) {
      const id = info[1]!;
      const media = this.media.get(id)!;
      return {
        id,
        auth: true,
        answer: {
          status: 200,
          body: {
            messaging_product: 'whatsapp',
            url: `${this.url.replace(/\/v23\.0$/, '')}/whatsapp-media/${id}?ext=${Date.now()}`,
            mime_type: media.mimeType,
            sha256: media.sha256 ?? createHash('sha256').update(media.bytes).digest('hex'),
            file_size: media.fileSize ?? media.bytes.length,
            id,
          },
        },
      };
    }
    const download = /^\/whatsapp-media\/(\d+)$/.exec(url.pathname);
    if (download && this.media.has(download[1]!)) {
      const media = this.media.get(download[1]!)!;
      return { id: download[1]!, auth: true, answer: { status: 200, raw: media.bytes, contentType: media.mimeType } };
    }
    const cdn = /^\/ig-cdn\/([0-9a-f]+)\.bin$/.exec(url.pathname);
    if (cdn && this.media.has(`ig-${cdn[1]}`)) {
      const media = this.media.get(`ig-${cdn[1]}`)!;
      return { id: `ig-${cdn[1]}`, auth: false, answer: { status: 200, raw: media.bytes, contentType: media.mimeType } };
    }
    return undefined;
  }
}

/** `sha256=<hex HMAC-SHA256(appSecret, body)>`, as Meta signs a delivery. */
export function metaSignature(appSecret: string, body: string | Buffer): string {
  return `sha256=${createHmac('sha256', appSecret).update(body).digest('hex')}`;
}

let waSequence = 0;
/**
 * A WhatsApp Cloud API `messages` delivery for a phone number id, as Meta documents it; with
 * `phoneNumberId` null, a change without `metadata` (not Meta's shape: whose number is it?).
 */
export function whatsappDelivery(
  phoneNumberId: string | null,
  value: { messages?: unknown[]; statuses?: unknown[]; contacts?: unknown[] },
): Record<string, unknown> {
  const metadata = phoneNumberId === null ? {} : { metadata: { display_phone_number: '15550783881', phone_number_id: phoneNumberId } };
  return {
    object: 'whatsapp_business_account',
    entry: [{ id: '102290129340398', changes: [{ value: { messaging_product: 'whatsapp', ...metadata, ...value }, field: 'messages' }] }],
  };
}

/** A WhatsApp inbound text message from `from` (digits, no +) and the contacts entry naming them; `id` when given, else a fresh wamid. */
export function whatsappText(
  from: string,
  body: string,
  name?: string,
  id = `wamid.HBgM${Date.now()}${waSequence++}${randomBytes(6).toString('hex')}`,
): { messages: unknown[]; contacts: unknown[]; id: string } {
  return {
    id,
    contacts: name ? [{ profile: { name }, wa_id: from }] : [],
    messages: [{ from, id, timestamp: String(Math.floor(Date.now() / 1000)), type: 'text', text: { body } }],
  };
}

/**
 * A WhatsApp inbound text as Meta sends it since business-scoped user ids (Meta's "Business-scoped
 * user IDs" page): `messages[].from_user_id` and `contacts[].user_id` carry the BSUID,
 * `contacts[].profile.username` the username when the customer has one; `from` and `wa_id` (the
 * phone) only when Meta shares it. `phone` digits without +.
 */
export function whatsappBsuidText(
  sender: { userId: string; phone?: string; username?: string; name?: string },
  body: string,
  id = `wamid.HBgM${Date.now()}${waSequence++}${randomBytes(6).toString('hex')}`,
): { messages: unknown[]; contacts: unknown[]; id: string } {
  const profile = { ...(sender.name !== undefined && { name: sender.name }), ...(sender.username !== undefined && { username: sender.username }) };
  return {
    id,
    contacts: [{ profile, ...(sender.phone !== undefined && { wa_id: sender.phone }), user_id: sender.userId }],
    messages: [
      {
        ...(sender.phone !== undefined && { from: sender.phone }),
        from_user_id: sender.userId,
        id,
        timestamp: String(Math.floor(Date.now() / 1000)),
        type: 'text',
        text: { body },
      },
    ],
  };
}

/** Meta's system message when a customer's BSUID changes (`user_changed_user_id`): no contacts array, the new BSUID in `system.user_id`. */
export function whatsappUserIdChange(previous: string, current: string): { messages: unknown[]; id: string } {
  const id = `wamid.HBgM${Date.now()}${waSequence++}${randomBytes(6).toString('hex')}`;
  return {
    id,
    messages: [
      {
        from_user_id: previous,
        id,
        timestamp: String(Math.floor(Date.now() / 1000)),
        type: 'system',
        system: { body: `User changed from ${previous} to ${current}`, user_id: current, type: 'user_changed_user_id' },
      },
    ],
  };
}

/** A WhatsApp status of an outbound message; `errors` as Meta sends them on `failed`. */
export function whatsappStatus(id: string, status: string, recipient: string, errors?: unknown[]): Record<string, unknown> {
  return { id, status, timestamp: String(Math.floor(Date.now() / 1000)), recipient_id: recipient, ...(errors && { errors }) };
}

/**
 * A WhatsApp inbound file (`type` image, video, audio, document or sticker) as the Cloud API's
 * messages webhook carries it: `{id, mime_type, sha256, caption?, filename?}` under its type.
 */
export function whatsappMedia(
  from: string,
  type: 'image' | 'video' | 'audio' | 'document' | 'sticker',
  media: { id: string; mimeType: string; sha256: string; caption?: string; filename?: string; voice?: boolean },
): { messages: unknown[]; contacts: unknown[]; id: string } {
  const id = `wamid.HBgM${Date.now()}${waSequence++}${randomBytes(6).toString('hex')}`;
  return {
    id,
    contacts: [{ profile: { name: 'Mariana Silva' }, wa_id: from }],
    messages: [
      {
        from,
        id,
        timestamp: String(Math.floor(Date.now() / 1000)),
        type,
        [type]: {
          ...(media.caption !== undefined && { caption: media.caption }),
          ...(media.filename !== undefined && { filename: media.filename }),
          mime_type: media.mimeType,
          sha256: media.sha256,
          id: media.id,
          ...(media.voice !== undefined && { voice: media.voice }),
        },
      },
    ],
  };
}

/** An Instagram messaging event whose message carries attachments (`{type, payload: {url}}`), with text or without. */
export function instagramAttachments(
  accountId: string,
  customerId: string,
  attachments: Array<{ type: string; url: string }>,
  text?: string,
): { event: unknown; mid: string } {
  const mid = `aWdfZAG1faXRlbToxOklH${randomBytes(12).toString('base64url')}`;
  return {
    mid,
    event: {
      sender: { id: customerId },
      recipient: { id: accountId },
      timestamp: Date.now(),
      message: { mid, ...(text !== undefined && { text }), attachments: attachments.map((a) => ({ type: a.type, payload: { url: a.url } })) },
    },
  };
}

/** An Instagram Messaging delivery (`object: instagram`, `entry[].messaging[]`). */
export function instagramDelivery(accountId: string, messaging: unknown[]): Record<string, unknown> {
  return { object: 'instagram', entry: [{ id: accountId, time: Date.now(), messaging }] };
}

/** One Instagram messaging event: a customer's text, or with `echo` the account's own message echoed back. */
export function instagramText(accountId: string, customerId: string, text: string, options: { echo?: boolean } = {}): { event: unknown; mid: string } {
  const mid = `aWdfZAG1faXRlbToxOklH${randomBytes(12).toString('base64url')}`;
  const [sender, recipient] = options.echo ? [accountId, customerId] : [customerId, accountId];
  return {
    mid,
    event: { sender: { id: sender }, recipient: { id: recipient }, timestamp: Date.now(), message: { mid, text, ...(options.echo && { is_echo: true }) } },
  };
}

/**
 * An Instagram messaging event of a tapped quick reply, as Meta documents it: the button's title as
 * `message.text` and its payload as `message.quick_reply.payload`; `mid` when given, else a fresh one.
 */
export function instagramQuickReply(
  accountId: string,
  customerId: string,
  title: string,
  payload: string,
  mid = `aWdfZAG1faXRlbToxOklH${randomBytes(12).toString('base64url')}`,
): { event: unknown; mid: string } {
  return {
    mid,
    event: { sender: { id: customerId }, recipient: { id: accountId }, timestamp: Date.now(), message: { mid, text: title, quick_reply: { payload } } },
  };
}
