// A connected pg.Client whose connection errors (the server ending it, e.g. when the bench drops its
// database on Ctrl-C) reach the pending query instead of crashing the bench as an unhandled event.
import pg from 'pg';

export async function connectClient(connectionString: string): Promise<pg.Client> {
  const client = new pg.Client({ connectionString });
  client.on('error', () => {});
  await client.connect();
  return client;
}
