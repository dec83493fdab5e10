// npm run --silent provision -- --plan free|pro|enterprise --scopes <list>|all [--workspace <uuid>]
// Prints exactly one JSON object: {workspaceId, keyId, apiKey, plan, scopes, channels}.
import { parseArgs } from 'node:util';
import type { Plan } from '../src/db/schema.js';
import { parseScopes, PLANS, provision, ProvisionError } from '../src/provisioning.js';
import { runCommand, UsageError } from './cli.js';

const USAGE = 'usage: npm run --silent provision -- --plan free|pro|enterprise --scopes <comma list>|all [--workspace <uuid>]';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

await runCommand(
  async (db) => {
    let values;
    try {
      ({ values } = parseArgs({
        options: { plan: { type: 'string' }, scopes: { type: 'string' }, workspace: { type: 'string' } },
        strict: true,
      }));
    } catch (err) {
      throw new UsageError(`${(err as Error).message}\n${USAGE}`);
    }
    if (!values.plan || !PLANS.includes(values.plan as Plan)) throw new UsageError(`--plan must be free, pro or enterprise\n${USAGE}`);
    if (!values.scopes) throw new UsageError(`--scopes is required\n${USAGE}`);
    if (values.workspace !== undefined && !UUID.test(values.workspace)) throw new UsageError('--workspace must be a UUID');
    try {
      return await provision(db, {
        plan: values.plan as Plan,
        scopes: parseScopes(values.scopes),
        workspaceId: values.workspace?.toLowerCase(),
      });
    } catch (err) {
      if (err instanceof ProvisionError) throw new UsageError(err.message);
      throw err;
    }
  },
  { needsDatabaseUrl: 'provision' },
);
