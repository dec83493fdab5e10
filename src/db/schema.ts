// Table types of the database, combined into the one Database interface Kysely is typed with.
import type { ColumnType, Insertable, Selectable, Updateable } from 'kysely';

type CreatedAt = ColumnType<Date, Date | undefined, never>;
type Timestamp = ColumnType<Date, Date | undefined, Date>;
type NullableTimestamp = ColumnType<Date | null, Date | null | undefined, Date | null>;

export type Plan = 'free' | 'pro' | 'enterprise';
export type Scope =
  | 'agents:read'
  | 'agents:write'
  | 'contacts:read'
  | 'contacts:write'
  | 'messages:read'
  | 'messages:write';

export interface WorkspaceTable {
  id: string;
  name: string;
  created_at: CreatedAt;
}

export interface ApiKeyTable {
  workspace_id: string;
  id: string;
  /** Hex SHA-256 of the whole key; the key itself is never stored. */
  key_hash: string;
  /** The first characters of the key, to tell keys apart in listings and logs. */
  prefix: string;
  plan: Plan;
  scopes: Scope[];
  created_at: CreatedAt;
  revoked_at: NullableTimestamp;
}

export interface ChannelTable {
  workspace_id: string;
  id: string;
  type: 'whatsapp' | 'instagram';
  name: string;
  created_at: CreatedAt;
}

export interface AgentTable {
  workspace_id: string;
  id: string;
  name: string;
  status: 'active' | 'inactive';
  instructions: string;
  model: string;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export interface ContactTable {
  workspace_id: string;
  id: string;
  name: string;
  phone: string | null;
  email: string | null;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export interface ThreadTable {
  workspace_id: string;
  id: string;
  contact_id: string;
  channel_id: string;
  agent_id: string | null;
  status: 'open' | 'closed';
  nps_score: number | null;
  nps_created_at: NullableTimestamp;
  last_message_at: NullableTimestamp;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

/** The NPS answers of a workspace per UTC day of nps_created_at, kept exact by setNpsAnswer. */
export interface NpsDailyTable {
  workspace_id: string;
  /** The UTC day; written as 'YYYY-MM-DD'. Read it as `day::text`: the drivers make a Date of local midnight. */
  day: ColumnType<Date, string, never>;
  promotores: number;
  neutros: number;
  detratores: number;
}

export interface MessageTable {
  workspace_id: string;
  id: string;
  thread_id: string;
  contact_id: string;
  channel_id: string;
  direction: 'outbound' | 'inbound';
  content: string;
  status: 'queued' | 'sent' | 'delivered' | 'failed';
  created_at: CreatedAt;
}

export interface Database {
  workspaces: WorkspaceTable;
  api_keys: ApiKeyTable;
  channels: ChannelTable;
  agents: AgentTable;
  contacts: ContactTable;
  threads: ThreadTable;
  messages: MessageTable;
  nps_daily: NpsDailyTable;
}

export type ApiKeyRow = Selectable<ApiKeyTable>;
export type ChannelRow = Selectable<ChannelTable>;
export type AgentRow = Selectable<AgentTable>;
export type NewAgent = Insertable<AgentTable>;
export type AgentPatch = Updateable<AgentTable>;
export type ContactRow = Selectable<ContactTable>;
export type NewContact = Insertable<ContactTable>;
export type ThreadRow = Selectable<ThreadTable>;
export type NewThread = Insertable<ThreadTable>;
export type MessageRow = Selectable<MessageTable>;
export type NewMessage = Insertable<MessageTable>;
