// A Server-Sent Events client for tests: node's http client reading GET /v1/events/stream and
// parsing frames as the EventSource specification does (id, event, data lines; comments).
import http from 'node:http';

export interface Frame {
  id: string | undefined;
  event: string;
  data: string;
}

export interface SseStream {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The error body of a non-200 answer. */
  body: string;
  frames: Frame[];
  comments: string[];
  /** Resolves when the server ends the stream. */
  ended: Promise<void>;
  isEnded(): boolean;
  /** The event frames (not reset) so far. */
  events(): Frame[];
  close(): void;
}

export async function openStream(
  baseUrl: string,
  /** `types`: one comma-separated value, or (an array) one `types=` per type, as generic clients send arrays. */
  options: { key?: string; token?: string; types?: string | string[]; lastEventId?: string; query?: Record<string, string> } = {},
): Promise<SseStream> {
  const url = new URL(`${baseUrl}/v1/events/stream`);
  for (const types of [options.types ?? []].flat()) url.searchParams.append('types', types);
  if (options.token !== undefined) url.searchParams.set('token', options.token);
  for (const [name, value] of Object.entries(options.query ?? {})) url.searchParams.set(name, value);
  const headers: Record<string, string> = { accept: 'text/event-stream' };
  if (options.key) headers.authorization = `Bearer ${options.key}`;
  if (options.lastEventId !== undefined) headers['last-event-id'] = options.lastEventId;
  const agent = new http.Agent({ keepAlive: false });
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers, agent }, (res) => {
      const frames: Frame[] = [];
      const comments: string[] = [];
      let ended = false;
      let buffer = '';
      let body = '';
      res.setEncoding('utf8');
      const endedPromise = new Promise<void>((done) => {
        res.on('end', () => {
          ended = true;
          done();
        });
        res.on('close', () => {
          ended = true;
          done();
        });
        res.on('error', () => undefined);
      });
      res.on('data', (chunk: string) => {
        if (res.statusCode !== 200) {
          body += chunk;
          return;
        }
        // Looks for a frame's end only in what is new (a large frame comes in many chunks).
        const from = Math.max(0, buffer.length - 1);
        buffer += chunk;
        let at = buffer.indexOf('\n\n', from);
        for (; at !== -1; at = buffer.indexOf('\n\n')) {
          const block = buffer.slice(0, at);
          buffer = buffer.slice(at + 2);
          const frame: Frame = { id: undefined, event: 'message', data: '' };
          let isEvent = false;
          for (const line of block.split('\n')) {
            if (line.startsWith(':')) comments.push(line.slice(1).trim());
            else if (line.startsWith('id: ')) frame.id = line.slice(4);
            else if (line.startsWith('event: ')) frame.event = line.slice(7);
            else if (line.startsWith('data: ')) {
              frame.data = line.slice(6);
              isEvent = true;
            }
          }
          if (isEvent) frames.push(frame);
        }
      });
      const stream: SseStream = {
        status: res.statusCode!,
        headers: res.headers,
        get body() {
          return body;
        },
        frames,
        comments,
        ended: endedPromise,
        isEnded: () => ended,
        events: () => frames.filter((f) => f.event !== 'reset'),
        close: () => {
          req.destroy();
          agent.destroy();
        },
      };
      resolve(stream);
    });
    req.on('error', reject);
  });
}
