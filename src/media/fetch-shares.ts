// Fair shares of this process's media-fetch slots: one workspace, or one host files come from, runs
// at most half of them at once, so eight files trickling from one place leave the other half to
// everyone else's. Counted in process, as the slots are. The workspace's share is kept twice: the
// claim takes no more of a channel's jobs than its workspace and its last known host have room for
// (the queue's claim groups, by the payload's channelId), and the run checks both again, the host
// once the download's URL is known; a job over a share then goes back to the queue untried.
import type { ClaimGroups } from '../jobs/queue.js';

export interface FetchShares {
  /** The most fetches one workspace, or one host, runs at once here: half the slots (at least one). */
  readonly share: number;
  /** Takes a place of `workspaceId` (or, with `host`, of that host) if it holds fewer than `share`; false when it is full. */
  take(place: Place): boolean;
  release(place: Place): void;
  /** The channel's workspace (and the host its last download came from), for claimGroups. */
  learn(channelId: string, workspaceId: string, host?: string): void;
  /** What the claim may take per channel: the room its workspace and its last host have. */
  claimGroups(): ClaimGroups;
}

export type Place = { workspaceId: string } | { host: string };

const keyOf = (place: Place): string => ('host' in place ? `host:${place.host}` : `workspace:${place.workspaceId}`);

export function fetchShares(slots: number): FetchShares {
  const share = Math.max(1, Math.floor(slots / 2));
  const running = new Map<string, number>();
  const channels = new Map<string, { workspaceId: string; host?: string | undefined }>();
  const count = (key: string): number => running.get(key) ?? 0;

  return {
    share,
    take(place) {
      const key = keyOf(place);
      if (count(key) >= share) return false;
      running.set(key, count(key) + 1);
      return true;
    },
    release(place) {
      const key = keyOf(place);
      const left = count(key) - 1;
      if (left > 0) running.set(key, left);
      else running.delete(key);
    },
    learn(channelId, workspaceId, host) {
      channels.set(channelId, { workspaceId, host: host ?? channels.get(channelId)?.host });
    },
    claimGroups() {
      const allowance: Record<string, number> = {};
      for (const [channelId, { workspaceId, host }] of channels) {
        const room = Math.min(share - count(keyOf({ workspaceId })), host === undefined ? share : share - count(keyOf({ host })));
        if (room < share) allowance[channelId] = Math.max(0, room);
      }
      return { field: 'channelId', allowance, otherwise: share };
    },
  };
}
