// The one computed backoff (a failed job's retry, the worker's poll while the database fails, the
// LISTEN reconnect, a crashed cluster worker's restart): exponential, capped, with jitter. Pure.
// The webhook retries follow a configured table (WEBHOOK_RETRY_DELAYS) instead.

/** The longest wait between two attempts of a job. */
export const MAX_RETRY_DELAY_MS = 10 * 60_000;

export interface Backoff {
  /** The wait after the first failure. */
  baseMs: number;
  /** The longest wait, jitter included. */
  maxMs: number;
  /**
   * The spread around the wait, as a fraction (0.25: ±25 %), so many callers that failed together
   * do not come back together; 0 for a plain doubling.
   */
  jitter: number;
}

/**
 * The wait after the `failures`-th failure in a row (1-based): `baseMs` × 2^(failures−1), capped at
 * `maxMs`, then spread by ±`jitter` (`random` in [0, 1)); never above `maxMs`, never below 1 ms.
 */
export function backoffMs(failures: number, backoff: Backoff, random: number = Math.random()): number {
  const exponential = Math.min(backoff.maxMs, backoff.baseMs * 2 ** Math.max(0, Math.min(failures - 1, 40)));
  const jittered = exponential * (1 - backoff.jitter + 2 * backoff.jitter * random);
  return Math.max(1, Math.min(backoff.maxMs, Math.round(jittered)));
}

/**
 * A failed job's wait after its `attempt`-th attempt (1-based): `baseMs` doubling, at most
 * 10 minutes, ±25 %.
 */
export function retryDelayMs(attempt: number, baseMs: number, random: number = Math.random()): number {
  return backoffMs(attempt, { baseMs, maxMs: MAX_RETRY_DELAY_MS, jitter: 0.25 }, random);
}
