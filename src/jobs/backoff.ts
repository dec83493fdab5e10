// When a failed attempt is tried again: exponential backoff with jitter, capped. Pure.

/** The longest wait between two attempts. */
export const MAX_RETRY_DELAY_MS = 10 * 60_000;

/**
 * The wait after the `attempt`-th failed attempt (1-based): `baseMs` × 2^(attempt−1), capped at
 * 10 minutes, then spread by ±25 % (`random` in [0, 1)) so retries of many jobs that failed
 * together do not come back together; never above the cap, never below 1 ms.
 */
export function retryDelayMs(attempt: number, baseMs: number, random: number = Math.random()): number {
  const exponential = Math.min(MAX_RETRY_DELAY_MS, baseMs * 2 ** Math.max(0, Math.min(attempt - 1, 40)));
  const jittered = exponential * (0.75 + 0.5 * random);
  return Math.max(1, Math.min(MAX_RETRY_DELAY_MS, Math.round(jittered)));
}
