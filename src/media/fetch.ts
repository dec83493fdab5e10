// An inbound file fetched from Meta and stored, run by the queue (one `media-fetch` job per file).
// WhatsApp: `GET {META_GRAPH_URL}/{media-id}` with the channel's token answers `{url, mime_type,
// sha256, file_size}`, then `GET url` with the token (the URL lives minutes: asked again on every
// attempt). Instagram: the attachment's `payload.url`, through the SSRF guard. The bytes stream to
// the spool with their SHA-256, are checked against what Meta announced (digest bytes compared:
// Meta writes the hash in hex or base64) and the size limit (the type's, or Instagram's when larger),
// and stored; then the media row, the message's attachment and its message.updated event move in one
// statement with the job's end.
// Network errors, timeouts, 429 and 5xx are retried (RETRY_BASE_MS, RETRY_MAX_ATTEMPTS);
// a mismatch or any other refusal fails the file at once. An attempt has two time limits: each pause
// of the answer (META_GRAPH_TIMEOUT_MS) and the whole attempt (MEDIA_FETCH_TIMEOUT_MS), so bytes that
// trickle forever are a failed attempt too. One workspace, or one host, runs at most half of this
// process's fetches at once (./fetch-shares.ts): a job over its share steps aside, untried.
import { rm } from 'node:fs/promises';
import { sql } from 'kysely';
import { SYSTEM } from '../actor.js';
import { classifyGraphFailure } from '../channels/graph.js';
import type { SecretBox } from '../secrets.js';
import { openMetaSecrets } from '../channels/settings.js';
import { findChannelById } from '../db/channels.js';
import type { Db } from '../db/database.js';
import { findMedia, markMediaFailed, markMediaStored, patchMessageAttachment } from '../db/media.js';
import type { ChannelRow, MediaRow } from '../db/schema.js';
import type { Logger } from '../logger.js';
import { httpGetStream, httpRequest, type StreamOutcome } from '../outbound/http.js';
import { RefusedUrlError, resolveTarget } from '../outbound/ssrf.js';
import { finishJobQuery, type HeldJob, type Job } from '../jobs/queue.js';
import type { JobResult, QueueHandler } from '../jobs/worker.js';
import { metrics } from '../metrics/registry.js';
import { moveMessage } from '../services/message-statuses.js';
import { fetchShares, type FetchShares } from './fetch-shares.js';
import { CutShortError, spool, TooLargeError, type Spooled } from './spool.js';
import { mediaKey, type MediaStore } from './store.js';
import { bareMimeType, digestBytes, inboundLimit, mediaTypeOf } from './types.js';

export const MEDIA_FETCH_QUEUE = 'media-fetch';

export interface MediaFetchOptions {
  db: Db;
  store: MediaStore;
  secrets: SecretBox | undefined;
  graphUrl: string;
  /** The longest pause of an answer (META_GRAPH_TIMEOUT_MS). */
  timeoutMs: number;
  /** The longest a whole attempt may take (MEDIA_FETCH_TIMEOUT_MS). */
  deadlineMs: number;
  /** How many fetches this process runs at once (its worker's concurrency): a workspace or a host gets half. */
  slots: number;
  maxAttempts: number;
  retryBaseMs: number;
  /** OUTBOUND_ALLOW_PRIVATE_URLS: Instagram URLs may then be http:// and private (development, tests). */
  allowPrivateUrls: boolean;
  logger: Logger;
}

/** Why an attempt got no file: worth another attempt (`retry`), or not (`fail`), or its host holds its share (`busy`). */
type Miss = { retry: string } | { fail: string } | { busy: string };

/** How long a job over its share waits before it is claimed again (plus up to as much again, at random). */
const SHARE_FULL_WAIT_MS = 1_000;

/** What Meta told of the file before its bytes: where it is, and what it should be. */
interface Announced {
  url: URL | string;
  authorization?: string | undefined;
  pinTo?: { address: string; family: 4 | 6 } | undefined;
  mimeType?: string | undefined;
  sha256?: string | undefined;
  size?: number | undefined;
}

const MAX_INFO_BYTES = 64 * 1024;

async function whatsappAnnounced(options: MediaFetchOptions, channel: ChannelRow, mediaId: string, signal: AbortSignal): Promise<Announced | Miss> {
  const { accessToken } = openMetaSecrets(options.secrets, channel);
  const authorization = `Bearer ${accessToken}`;
  const info = await httpRequest(`${options.graphUrl}/${encodeURIComponent(mediaId)}`, {
    method: 'GET',
    headers: { authorization },
    timeoutMs: options.timeoutMs,
    maxBodyBytes: MAX_INFO_BYTES,
    signal,
  });
  if ('failure' in info) return { retry: `the Graph API could not be reached: ${info.message}` };
  let body: unknown;
  try {
    body = JSON.parse(info.body.toString('utf8'));
  } catch {
    body = undefined;
  }
  if (info.status < 200 || info.status >= 300) {
    const failure = classifyGraphFailure(info.status, body);
    return failure.transient ? { retry: `${failure.code}: ${failure.message}` } : { fail: `${failure.code}: ${failure.message}` };
  }
  const answer = (body ?? {}) as { url?: unknown; mime_type?: unknown; sha256?: unknown; file_size?: unknown };
  if (typeof answer.url !== 'string' || !/^https?:\/\//.test(answer.url)) return { fail: 'the Graph API named no URL for the media' };
  const size = Number(answer.file_size);
  return {
    url: answer.url,
    authorization,
    mimeType: typeof answer.mime_type === 'string' ? bareMimeType(answer.mime_type) : undefined,
    sha256: typeof answer.sha256 === 'string' ? answer.sha256 : undefined,
    size: answer.file_size !== undefined && Number.isSafeInteger(size) && size >= 0 ? size : undefined,
  };
}

async function instagramAnnounced(options: MediaFetchOptions, url: string): Promise<Announced | Miss> {
  try {
    const target = await resolveTarget(url, options.allowPrivateUrls);
    return { url: target.url, pinTo: { address: target.address, family: target.family } };
  } catch (err) {
    if (err instanceof RefusedUrlError) return { fail: `the attachment URL is refused: ${err.message}` };
    throw err;
  }
}

/** The file's bytes spooled and checked, with its MIME type, or why not. */
async function fetchFile(
  options: MediaFetchOptions,
  shares: FetchShares,
  media: MediaRow,
  channel: ChannelRow,
  signal: AbortSignal,
): Promise<{ spooled: Spooled; mimeType: string } | Miss> {
  const source = media.source;
  if (!source) return { fail: 'the file has no source' };
  const announced =
    'whatsappMediaId' in source ? await whatsappAnnounced(options, channel, source.whatsappMediaId, signal) : await instagramAnnounced(options, source.url);
  if (!('url' in announced)) return announced;
  const host = new URL(announced.url).host;
  shares.learn(channel.id, channel.workspace_id, host);
  if (!shares.take({ host })) return { busy: `${host} already serves ${shares.share} downloads here` };
  try {
    return await download(options, media, channel, announced, signal);
  } finally {
    shares.release({ host });
  }
}

/** The announced file's bytes spooled and checked, with its MIME type, or why not. */
async function download(
  options: MediaFetchOptions,
  media: MediaRow,
  channel: ChannelRow,
  announced: Announced,
  signal: AbortSignal,
): Promise<{ spooled: Spooled; mimeType: string } | Miss> {
  const source = media.source!;
  const answer: StreamOutcome = await httpGetStream(announced.url, {
    headers: announced.authorization ? { authorization: announced.authorization } : undefined,
    timeoutMs: options.timeoutMs,
    signal,
    pinTo: announced.pinTo,
  });
  if ('failure' in answer) return { retry: `the media could not be downloaded: ${answer.message}` };
  if (answer.status < 200 || answer.status >= 300) {
    answer.body.resume();
    // A WhatsApp URL that expired is asked for again on the next attempt; an Instagram URL that is refused stays so.
    const passing = answer.status === 429 || answer.status >= 500 || 'whatsappMediaId' in source;
    return passing ? { retry: `the media download answered HTTP ${answer.status}` } : { fail: `the media download answered HTTP ${answer.status}` };
  }
  let spooled: Spooled;
  try {
    spooled = await spool(answer.body, options.store.spoolDir, inboundLimit(channel.type, media.type));
  } catch (err) {
    answer.body.destroy();
    if (err instanceof TooLargeError) return { fail: `the file is larger than ${err.limit} bytes, the limit of a ${media.type}` };
    if (err instanceof CutShortError) return { retry: `the media download was cut short: ${err.message}` };
    throw err;
  }
  const expectedSha = announced.sha256 ?? ('whatsappMediaId' in source ? source.sha256 : undefined);
  const expected = expectedSha === undefined ? undefined : digestBytes(expectedSha);
  const problem =
    expectedSha !== undefined && !expected?.equals(Buffer.from(spooled.sha256, 'hex'))
      ? 'the bytes do not match the SHA-256 Meta announced'
      : announced.size !== undefined && announced.size !== spooled.size
        ? `the file has ${spooled.size} bytes, Meta announced ${announced.size}`
        : spooled.size === 0
          ? 'the file is empty'
          : undefined;
  if (problem) {
    await rm(spooled.path, { force: true });
    return { fail: problem };
  }
  // Instagram names no type before the download: its Content-Type does, when it is one of the file's kind.
  const served = bareMimeType(answer.headers['content-type']);
  const mimeType = announced.mimeType ?? (served && mediaTypeOf(served) === media.type ? served : media.mime_type);
  return { spooled, mimeType };
}

/**
 * fetchFile within the attempt's deadline: past it the download is aborted and the attempt is a
 * passing failure that says so (the worker's own abort, a stop, still ends it as before).
 */
async function fetchFileInTime(
  options: MediaFetchOptions,
  shares: FetchShares,
  media: MediaRow,
  channel: ChannelRow,
  signal: AbortSignal,
): Promise<{ spooled: Spooled; mimeType: string } | Miss> {
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(new Error(`the download took longer than ${options.deadlineMs} ms`)), options.deadlineMs);
  const late = (): Miss => ({ retry: `the media download took longer than ${options.deadlineMs} ms (MEDIA_FETCH_TIMEOUT_MS)` });
  try {
    const outcome = await fetchFile(options, shares, media, channel, AbortSignal.any([signal, deadline.signal]));
    return deadline.signal.aborted && !signal.aborted && !('spooled' in outcome) ? late() : outcome;
  } catch (err) {
    if (deadline.signal.aborted && !signal.aborted) return late();
    throw err;
  } finally {
    clearTimeout(timer);
  }
}

export function mediaFetchHandler(options: MediaFetchOptions): QueueHandler<typeof MEDIA_FETCH_QUEUE> {
  const { db, store } = options;
  const shares = fetchShares(options.slots);
  const stepAside = (): JobResult => ({ kind: 'later', runAt: new Date(Date.now() + SHARE_FULL_WAIT_MS * (1 + Math.random())) });

  /**
   * The file failed: its row, the message's attachment and message.updated, with the job's end, in one
   * statement. Bytes an earlier attempt stored before its commit failed go too, unless that commit
   * did happen (the row is `stored`).
   */
  const fail = async (job: HeldJob, payload: { mediaId: string; messageId: string }, reason: string): Promise<JobResult> => {
    options.logger.warn({ mediaId: payload.mediaId, reason }, 'media fetch failed');
    // No bytes, so no hash of them: the one Meta announced (shown while pending) goes.
    const failed = patchMessageAttachment(db, job.workspace_id, payload.messageId, payload.mediaId, { status: 'failed', sha256: null });
    await moveMessage(db, job.workspace_id, failed, SYSTEM, {
      also: sql`failed as (${markMediaFailed(db, job.workspace_id, payload.mediaId)}), finished as (${finishJobQuery(job)})`,
    });
    metrics.mediaFetches.inc({ outcome: 'failed' });
    if ((await findMedia(db, job.workspace_id, payload.mediaId))?.status !== 'stored') {
      await store.delete(mediaKey(job.workspace_id, payload.mediaId)).catch((err: unknown) => {
        options.logger.warn({ err, mediaId: payload.mediaId }, 'the bytes of a failed media fetch could not be deleted from the store');
      });
    }
    return { kind: 'finished' };
  };

  return {
    queue: MEDIA_FETCH_QUEUE,
    maxAttempts: options.maxAttempts,
    retryBaseMs: options.retryBaseMs,
    claimGroups: () => shares.claimGroups(),

    async run(job, signal) {
      shares.learn(job.payload.channelId, job.workspace_id);
      const workspace = { workspaceId: job.workspace_id };
      if (!shares.take(workspace)) return stepAside();
      try {
        return await fetchAndStore(job, signal);
      } finally {
        shares.release(workspace);
      }
    },

    async giveUp(job, lastError) {
      await fail(job, job.payload, lastError);
    },
  };

  async function fetchAndStore(job: Job<typeof MEDIA_FETCH_QUEUE>, signal: AbortSignal): Promise<JobResult> {
    const { mediaId, messageId, channelId } = job.payload;
    const media = await findMedia(db, job.workspace_id, mediaId);
    if (!media || media.status !== 'pending') return { kind: 'done' };
    const channel = await findChannelById(db, channelId);
    if (!channel || channel.workspace_id !== job.workspace_id || channel.provider !== 'meta') {
      return fail(job, job.payload, 'the channel is no longer connected to Meta');
    }
    const outcome = await fetchFileInTime(options, shares, media, channel, signal);
    if ('busy' in outcome) return stepAside();
    if ('retry' in outcome) {
      // On the last attempt the give-up that follows counts it as failed.
      if (job.attempts < options.maxAttempts) metrics.mediaFetches.inc({ outcome: 'retrying' });
      return { kind: 'retry', error: outcome.retry };
    }
    if ('fail' in outcome) return fail(job, job.payload, outcome.fail);
    const { spooled, mimeType } = outcome;
    const key = mediaKey(job.workspace_id, mediaId);
    // A store that refuses the file leaves its spooled part here (a rename that failed): it goes now.
    await store.putFile(key, spooled.path, spooled.size, mimeType).catch(async (err: unknown) => {
      await rm(spooled.path, { force: true });
      throw err;
    });
    const facts = { size: spooled.size, sha256: spooled.sha256, mimeType };
    await moveMessage(db, job.workspace_id, patchMessageAttachment(db, job.workspace_id, messageId, mediaId, { status: 'stored', ...facts }), SYSTEM, {
      also: sql`stored as (${markMediaStored(db, job.workspace_id, mediaId, { ...facts, storageKey: key })}), finished as (${finishJobQuery(job)})`,
    });
    metrics.mediaFetches.inc({ outcome: 'stored' });
    // Erased while it was fetched: its row is gone, and so go its bytes.
    if (!(await findMedia(db, job.workspace_id, mediaId))) await store.delete(key);
    return { kind: 'finished' };
  }
}
