// A cluster's metrics (WEB_CONCURRENCY > 1) are the sum of its workers': prom-client's
// AggregatorRegistry in the primary asks each worker for its registry over the cluster's IPC channel.
// A worker serving GET /metrics on the public port asks the primary for that sum the same way.
import cluster from 'node:cluster';
import { randomUUID } from 'node:crypto';
import { registry } from './registry.js';

const REQUEST = 'sf:metrics-request';
const ANSWER = 'sf:metrics-answer';

interface Request {
  type: typeof REQUEST;
  id: string;
}
interface Answer {
  type: typeof ANSWER;
  id: string;
  text?: string;
  error?: string;
}

/** In the primary: answers a worker's request with every worker's metrics, aggregated. */
export function serveWorkersMetrics(): void {
  cluster.on('message', (worker, message: Partial<Request> | null) => {
    if (message?.type !== REQUEST || typeof message.id !== 'string') return;
    const id = message.id;
    registry.clusterMetrics().then(
      (text) => worker.send({ type: ANSWER, id, text } satisfies Answer),
      (err: unknown) => worker.send({ type: ANSWER, id, error: err instanceof Error ? err.message : String(err) } satisfies Answer),
    );
  });
}

const pending = new Map<string, { resolve: (text: string) => void; reject: (err: Error) => void }>();
let listening = false;

/** In a worker: the whole cluster's metrics, from the primary; fails after `timeoutMs`. */
export function metricsFromPrimary(timeoutMs = 10_000): Promise<string> {
  if (!listening) {
    listening = true;
    process.on('message', (message: Partial<Answer> | null) => {
      if (message?.type !== ANSWER || typeof message.id !== 'string') return;
      const waiter = pending.get(message.id);
      pending.delete(message.id);
      if (message.error !== undefined) waiter?.reject(new Error(message.error));
      else waiter?.resolve(message.text ?? '');
    });
  }
  const id = randomUUID();
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      pending.delete(id);
      reject(new Error('the cluster primary did not answer'));
    }, timeoutMs);
    pending.set(id, {
      resolve: (text) => {
        clearTimeout(timer);
        resolve(text);
      },
      reject: (err) => {
        clearTimeout(timer);
        reject(err);
      },
    });
    process.send?.({ type: REQUEST, id } satisfies Request);
  });
}
