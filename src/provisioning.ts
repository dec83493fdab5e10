// Making workspaces and keys: shared by `npm run provision` and the embedded demo at first start.
import { v7 as uuidv7 } from 'uuid';
import type { components } from '../generated/api.js';
import { generateApiKey } from './keys.js';
import { insertApiKey } from './db/api-keys.js';
import type { Db } from './db/database.js';
import type { Plan, Scope } from './db/schema.js';
import { createWorkspace, listWorkspaceChannels, workspaceExists } from './db/workspaces.js';

export const PLANS: readonly Plan[] = ['free', 'pro', 'enterprise'];
export const SCOPES: readonly Scope[] = [
  'agents:read',
  'agents:write',
  'contacts:read',
  'contacts:write',
  'messages:read',
  'messages:write',
  'channels:write',
  'funnel:read',
  'funnel:write',
  'webhooks:read',
  'webhooks:write',
  'settings:read',
  'settings:write',
  'automations:read',
  'automations:write',
  'reports:read',
];

/** The funnel every new workspace starts with, in order; a new thread enters the first stage. */
export const DEFAULT_STAGES: readonly string[] = ['Novo', 'Em atendimento', 'Aguardando cliente', 'Resolvido'];

export interface ProvisionRequest {
  plan: Plan;
  scopes: Scope[];
  /** An existing workspace to add the key to; a new workspace is created when absent. */
  workspaceId?: string | undefined;
  workspaceName?: string | undefined;
}

export interface Provisioned {
  workspaceId: string;
  keyId: string;
  apiKey: string;
  plan: Plan;
  scopes: Scope[];
  /** As the provision command prints them: id, type and name. */
  channels: Array<Pick<components['schemas']['Channel'], 'id' | 'type' | 'name'>>;
}

export class ProvisionError extends Error {}

/** Parses `all` or a comma list of scopes; throws ProvisionError naming an unknown scope. */
export function parseScopes(list: string): Scope[] {
  if (list.trim() === 'all') return [...SCOPES];
  const scopes = [
    ...new Set(
      list
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ];
  const unknown = scopes.filter((s) => !SCOPES.includes(s as Scope));
  if (unknown.length > 0) throw new ProvisionError(`unknown scope ${unknown.join(', ')}; use ${SCOPES.join(', ')} or all`);
  if (scopes.length === 0) throw new ProvisionError('give at least one scope, or all');
  return scopes as Scope[];
}

export async function provision(db: Db, request: ProvisionRequest): Promise<Provisioned> {
  let workspaceId = request.workspaceId;
  let channels;
  if (workspaceId) {
    if (!(await workspaceExists(db, workspaceId))) throw new ProvisionError(`workspace ${workspaceId} does not exist`);
    channels = await listWorkspaceChannels(db, workspaceId);
  } else {
    ({ workspaceId, channels } = await createWorkspace(db, request.workspaceName ?? 'Workspace', DEFAULT_STAGES));
  }
  const key = generateApiKey();
  const keyId = uuidv7();
  await insertApiKey(db, { workspaceId, id: keyId, hash: key.hash, prefix: key.prefix, plan: request.plan, scopes: request.scopes });
  return {
    workspaceId,
    keyId,
    apiKey: key.key,
    plan: request.plan,
    scopes: request.scopes,
    channels: channels.map((row) => ({ id: row.id, type: row.type, name: row.name })),
  };
}
