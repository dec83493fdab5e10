// A TCP proxy between an app and PostgreSQL that counts round trips: each time the app writes
// after PostgreSQL answered. Unlike a rate, the count does not depend on what else the machine is
// doing. `onAppData` sees every chunk the app sends (e.g. to read its statements).
import net from 'node:net';

export interface CountingProxy {
  /** `databaseUrl` with its host and port replaced by the proxy's. */
  via(databaseUrl: string): string;
  /** Round trips so far. */
  turns(): number;
  close(): void;
}

export async function startCountingProxy(
  target: URL = new URL(process.env.DATABASE_URL ?? 'postgres://root@127.0.0.1:5432/test'),
  onAppData?: () => (data: Buffer) => void,
): Promise<CountingProxy> {
  let turns = 0;
  const proxy = net.createServer((app) => {
    const postgres = net.connect(Number(target.port || 5432), target.hostname);
    const read = onAppData?.();
    let last: 'app' | 'postgres' | undefined;
    app.on('data', (data) => {
      if (last !== 'app') turns++;
      last = 'app';
      read?.(data);
      postgres.write(data);
    });
    postgres.on('data', (data) => {
      last = 'postgres';
      app.write(data);
    });
    app.on('close', () => postgres.destroy());
    postgres.on('close', () => app.destroy());
    app.on('error', () => {});
    postgres.on('error', () => {});
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return {
    via(databaseUrl) {
      const url = new URL(databaseUrl);
      url.hostname = '127.0.0.1';
      url.port = String((proxy.address() as net.AddressInfo).port);
      return url.toString();
    },
    turns: () => turns,
    close: () => proxy.close(),
  };
}
