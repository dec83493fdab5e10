// Which files the service keeps, as pure rules: the MIME types of each attachment type and its size
// limit (1 MB = 2^20 bytes), as openapi.yaml's POST /media lists them, and what each
// channel can carry.
import type { ChannelType, MediaType } from '../db/schema.js';

const MB = 2 ** 20;

/** Each accepted MIME type (lowercase, no parameters) and the attachment type it is. */
export const MEDIA_TYPES: ReadonlyMap<string, MediaType> = new Map<string, MediaType>([
  ['image/jpeg', 'image'],
  ['image/png', 'image'],
  ['image/webp', 'sticker'],
  ['audio/aac', 'audio'],
  ['audio/mp4', 'audio'],
  ['audio/mpeg', 'audio'],
  ['audio/amr', 'audio'],
  ['audio/ogg', 'audio'],
  ['video/mp4', 'video'],
  ['video/3gpp', 'video'],
  ['application/pdf', 'document'],
  ['text/plain', 'document'],
  ['application/msword', 'document'],
  ['application/vnd.ms-excel', 'document'],
  ['application/vnd.ms-powerpoint', 'document'],
  ['application/vnd.openxmlformats-officedocument.wordprocessingml.document', 'document'],
  ['application/vnd.openxmlformats-officedocument.spreadsheetml.sheet', 'document'],
  ['application/vnd.openxmlformats-officedocument.presentationml.presentation', 'document'],
]);

/** The most bytes a file of each type may have. */
export const MEDIA_LIMITS: Readonly<Record<MediaType, number>> = Object.freeze({
  image: 5 * MB,
  sticker: 500 * 1024,
  audio: 16 * MB,
  video: 16 * MB,
  document: 100 * MB,
});

/** The largest file of any type. */
export const MAX_MEDIA_BYTES = Math.max(...Object.values(MEDIA_LIMITS));

/** `image/jpeg; charset=x` -> `image/jpeg`; undefined for nothing. */
export function bareMimeType(contentType: string | undefined): string | undefined {
  const bare = contentType?.split(';', 1)[0]!.trim().toLowerCase();
  return bare ? bare : undefined;
}

/** The attachment type of a Content-Type, or undefined when the service does not take it. */
export function mediaTypeOf(contentType: string | undefined): MediaType | undefined {
  const bare = bareMimeType(contentType);
  return bare === undefined ? undefined : MEDIA_TYPES.get(bare);
}

/**
 * What Instagram (Messenger Platform attachment upload) takes of the types above: images png and
 * jpeg, audio aac and m4a/mp4, video mp4, files PDF; not amr, mpeg or ogg audio, 3gpp video or stickers.
 */
const INSTAGRAM_MIME_TYPES: ReadonlySet<string> = new Set(['image/jpeg', 'image/png', 'audio/aac', 'audio/mp4', 'video/mp4', 'application/pdf']);

/** The most bytes Instagram takes (and sends) of a file: 8 MB for an image, 25 MB otherwise. */
const instagramLimit = (type: MediaType): number => (type === 'image' ? 8 * MB : 25 * MB);

/**
 * The most bytes an inbound file of the channel may have: the type's limit above, or more when the
 * channel carries more (an Instagram video of 20 MB is the customer's, and is kept).
 */
export function inboundLimit(channelType: ChannelType, type: MediaType): number {
  return channelType === 'instagram' ? Math.max(MEDIA_LIMITS[type], instagramLimit(type)) : MEDIA_LIMITS[type];
}

/**
 * What a channel's type refuses of an attachment, in words, or undefined when it takes it.
 * Instagram takes the formats of INSTAGRAM_MIME_TYPES, up to 8 MB for images and 25 MB otherwise,
 * and no stickers; WhatsApp the types and limits above (a file received on Instagram may pass them).
 */
export function channelRefuses(channelType: ChannelType, media: { type: MediaType; mimeType: string; size: number }): string | undefined {
  if (channelType === 'whatsapp') {
    if (!MEDIA_TYPES.has(media.mimeType)) return `WhatsApp does not take files of type ${media.mimeType}`;
    if (media.size > MEDIA_LIMITS[media.type]) return `WhatsApp takes a ${media.type} of at most ${MEDIA_LIMITS[media.type] / MB} MB`;
    return undefined;
  }
  if (media.type === 'sticker') return 'Instagram does not take stickers';
  if (media.type === 'document' && media.mimeType !== 'application/pdf') return 'Instagram takes only PDF documents';
  if (!INSTAGRAM_MIME_TYPES.has(media.mimeType)) return `Instagram does not take ${media.type} files of type ${media.mimeType}`;
  if (media.size > instagramLimit(media.type)) return `Instagram takes a ${media.type} of at most ${instagramLimit(media.type) / MB} MB`;
  return undefined;
}

/** A SHA-256 as Meta writes it (lowercase or uppercase hex, base64 or base64url) as its 32 bytes; undefined if it is neither. */
export function digestBytes(text: string): Buffer | undefined {
  if (/^[0-9a-fA-F]{64}$/.test(text)) return Buffer.from(text, 'hex');
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(text)) {
    const bytes = Buffer.from(text.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    return bytes.length === 32 ? bytes : undefined;
  }
  return undefined;
}
