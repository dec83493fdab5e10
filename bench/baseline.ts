// Scenario (a), the yardstick: GET /v1/agents the way a hand-rolled Express + pg service answers it,
// with Express' defaults, a page query and a count query (unnamed statements, one after the other),
// the same JSON as the service, and nothing else: no auth, no rate limit, no validation, no logs.
// PORT, DATABASE_URL and BENCH_WORKSPACE_ID (the workspace whose agents it lists) from the environment.
import express from 'express';
import pg from 'pg';

interface AgentRow {
  id: string;
  type: string;
  name: string;
  status: string;
  availability: string | null;
  capacity: number | null;
  instructions: string | null;
  model: string | null;
  created_at: Date;
  updated_at: Date;
}

const workspaceId = process.env.BENCH_WORKSPACE_ID!;
const pool = new pg.Pool({ connectionString: process.env.DATABASE_URL, max: Number(process.env.DATABASE_POOL_SIZE ?? 10) });
pool.on('error', () => {});

const app = express();

app.get('/healthz', (_req, res) => {
  res.json({ status: 'ok' });
});

app.get('/v1/agents', async (req, res) => {
  const page = Number(req.query.page ?? 1);
  const limit = Number(req.query.limit ?? 20);
  const rows = await pool.query<AgentRow>('select * from agents where workspace_id = $1 order by created_at, id limit $2 offset $3', [
    workspaceId,
    limit,
    (page - 1) * limit,
  ]);
  const count = await pool.query<{ n: number }>('select count(*)::int as n from agents where workspace_id = $1', [workspaceId]);
  res.json({
    data: rows.rows.map((row) => ({
      id: row.id,
      type: row.type,
      name: row.name,
      status: row.status,
      availability: row.availability,
      capacity: row.capacity,
      instructions: row.instructions,
      model: row.model,
      createdAt: row.created_at.toISOString(),
      updatedAt: row.updated_at.toISOString(),
    })),
    pagination: { total: count.rows[0]!.n, page, limit },
  });
});

const server = app.listen(Number(process.env.PORT), '127.0.0.1');
server.keepAliveTimeout = 65_000;
const stop = (): void => {
  server.close(() => void pool.end().finally(() => process.exit(0)));
  server.closeIdleConnections();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
