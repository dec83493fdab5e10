// Table types of the database, combined into the one Database interface Kysely is typed with, and
// the constants stored in its tables. A column holding a value the API shows as it is (an enum, an
// attachment, a message's error) takes its type from the contract (generated/api.ts), never a copy.
import type { ColumnType, Insertable, Selectable, Updateable } from 'kysely';
import type { components } from '../../generated/api.js';

type Schemas = components['schemas'];

type CreatedAt = ColumnType<Date, Date | undefined, never>;
type Timestamp = ColumnType<Date, Date | undefined, Date>;
type NullableTimestamp = ColumnType<Date | null, Date | null | undefined, Date | null>;

export type Plan = Schemas['Plan'];
export type Scope = Schemas['Scope'];
export type ChannelType = Schemas['ChannelType'];
export type ChannelProvider = Schemas['ChannelProvider'];
export type AgentStatus = Schemas['AgentStatus'];
export type AgentType = Schemas['AgentType'];
export type AgentAvailability = Schemas['AgentAvailability'];
export type ContactAttributes = Schemas['ContactAttributes'];
export type ThreadStatus = Schemas['ThreadStatus'];
export type HistoryField = Schemas['ThreadHistoryField'];
/** Who made a change (src/actor.ts); thread_history admits all four since migration 0016. */
export type ActorType = Schemas['Actor']['type'];
export type MessageDirection = Schemas['MessageDirection'];
export type MessageStatus = Schemas['MessageStatus'];
/** A message's file as the API shows it; messages.attachments holds them as they are. */
export type Attachment = Schemas['Attachment'];
/** The kind of a media file (the contract's AttachmentType). */
export type MediaType = Schemas['AttachmentType'];
export type MediaStatus = Schemas['AttachmentStatus'];
export type AutomationRunStatus = Schemas['AutomationRun']['status'];
export type WebhookDeliveryStatus = Schemas['WebhookDelivery']['status'];

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
  type: ChannelType;
  name: string;
  provider: ColumnType<ChannelProvider, ChannelProvider | undefined, ChannelProvider>;
  /** The WhatsApp phone_number_id or Instagram account id of a meta channel. */
  external_id: string | null;
  /** The Meta secrets, sealed by src/secrets.ts; null on sandbox channels. */
  secrets: string | null;
  /** The agent a thread opened on the channel is assigned to when none is given. */
  default_agent_id: ColumnType<string | null, string | null | undefined, string | null>;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export interface AgentTable {
  workspace_id: string;
  id: string;
  name: string;
  status: AgentStatus;
  /** Fixed at creation (migration 0015: existing rows are 'ai'). */
  type: ColumnType<AgentType, AgentType | undefined, never>;
  /** AI agents only (null for people). */
  instructions: string | null;
  model: string | null;
  /** People only (null for AI agents). */
  availability: ColumnType<AgentAvailability | null, AgentAvailability | null | undefined, AgentAvailability | null>;
  /** People only: at most this many open threads from the round robin; null for no limit. */
  capacity: ColumnType<number | null, number | null | undefined, number | null>;
  /** When the round robin last gave this person a thread; null when it never did. */
  last_assigned_at: ColumnType<Date | null, Date | null | undefined, Date | null>;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

export interface ContactTable {
  workspace_id: string;
  id: string;
  name: string;
  phone: string | null;
  email: string | null;
  instagram_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** The labels as first spelled (migration 0016); label_keys holds them as the filter finds them (db/labels.ts). */
  labels: ColumnType<string[], string[] | undefined, string[]>;
  label_keys: ColumnType<string[], string[] | undefined, string[]>;
  /** jsonb object of custom attributes; written as JSON text. */
  attributes: ColumnType<ContactAttributes, string | undefined, string>;
  created_at: CreatedAt;
  updated_at: Timestamp;
  /** Set when the person was erased (name '', phone, email, labels and attributes gone); such a contact no longer exists for the API. */
  erased_at: NullableTimestamp;
  /** The WhatsApp business-scoped user id (BSUID) Meta sends, unique per workspace (migration 0027). */
  whatsapp_user_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** The WhatsApp username Meta last delivered: shown, never a key. */
  whatsapp_username: ColumnType<string | null, string | null | undefined, string | null>;
  /** The integrator's own id, unique per workspace. */
  external_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** Set (with erased_at) when the contact was merged into this one: its id answers contact_merged. */
  merged_into: ColumnType<string | null, string | null | undefined, string | null>;
}

export interface ThreadTable {
  workspace_id: string;
  id: string;
  contact_id: string;
  channel_id: string;
  agent_id: string | null;
  stage_id: string;
  /** When the thread entered its current stage: a stay's duration is measured from it. */
  stage_entered_at: ColumnType<Date, Date, Date>;
  status: ThreadStatus;
  closed_at: NullableTimestamp;
  nps_score: number | null;
  nps_created_at: NullableTimestamp;
  /** The thread's agent and stage when its NPS answer was registered (the answer's groups). */
  nps_agent_id: ColumnType<string | null, string | null | undefined, string | null>;
  nps_stage_id: ColumnType<string | null, string | null | undefined, string | null>;
  last_message_at: NullableTimestamp;
  last_inbound_at: NullableTimestamp;
  /** When its NPS question was last sent (migration 0023); pending until answered or expired. */
  nps_requested_at: NullableTimestamp;
  /** As a contact's (migration 0016). */
  labels: ColumnType<string[], string[] | undefined, string[]>;
  label_keys: ColumnType<string[], string[] | undefined, string[]>;
  /** The API's `sla` (migration 0028), written by src/sla only; null when no policy applies. */
  sla: ColumnType<ThreadSla | null, string | null | undefined, string | null>;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

/** A thread's `sla` as the API shows it. */
/** A thread's service level as the API shows it (null when no policy applies). */
export type ThreadSla = NonNullable<Schemas['ThreadSla']>;

export type SlaMetric = Schemas['SlaMetric'];

/** A workspace's SLA policy (src/sla/); conditions and targets as the API shows them. */
export interface SlaPolicyTable {
  workspace_id: string;
  id: string;
  name: string;
  enabled: boolean;
  position: number;
  conditions: ColumnType<components['schemas']['AutomationConditions'], string, string>;
  targets: ColumnType<components['schemas']['SlaTargets'], string, string>;
  business_hours_only: boolean;
  human_only: boolean;
  warn_before_minutes: number | null;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

/** A thread's running clock of one metric (src/sla/clocks.ts): its start, due and warning times, what was recorded. */
export interface SlaClockTable {
  workspace_id: string;
  thread_id: string;
  metric: SlaMetric;
  started_at: ColumnType<Date, Date, Date>;
  policy_id: string | null;
  due_at: NullableTimestamp;
  warn_at: NullableTimestamp;
  warned: ColumnType<boolean, boolean | undefined, boolean>;
  breached: ColumnType<boolean, boolean | undefined, boolean>;
}

/** One response or closing, as it happened (src/sla/clocks.ts writes it, the report reads it). */
export interface SlaMetricTable {
  workspace_id: string;
  id: string;
  thread_id: string;
  metric: SlaMetric;
  channel_id: string;
  stage_id: string | null;
  agent_id: string | null;
  by_ai: boolean | null;
  started_at: ColumnType<Date, Date, never>;
  happened_at: ColumnType<Date, Date, never>;
  seconds: number;
  business_seconds: number;
  policy_id: string | null;
  due_at: ColumnType<Date | null, Date | null, never>;
  within_sla: boolean | null;
}

/** The stages of a workspace's funnel, positions 1..n without gaps. */
export interface StageTable {
  workspace_id: string;
  id: string;
  name: string;
  position: number;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

/** A workspace's rule (src/automations/); trigger, conditions and actions as the API shows them. */
export interface AutomationTable {
  workspace_id: string;
  id: string;
  name: string;
  enabled: boolean;
  position: number;
  /** jsonb; written as JSON text. */
  trigger: ColumnType<Schemas['AutomationTrigger'], string, string>;
  /** jsonb; written as JSON text. */
  conditions: ColumnType<Schemas['AutomationConditions'], string, string>;
  /** jsonb: the conditions with their text values folded when saved (automations/conditions.ts foldConditions); null for rows from before. */
  folded_conditions: ColumnType<Schemas['AutomationConditions'] | null, string | null | undefined, string>;
  /** jsonb; written as JSON text. */
  actions: ColumnType<Schemas['AutomationActions'], string, string>;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

/** How an nps.answered answer came: `POST /threads/{id}/nps`, or a score the customer wrote. */
export type EventSource = Schemas['NpsAnsweredEvent']['data']['source'];

/**
 * One change of one field of a thread. Status values sit in from_status/to_status, stage and agent
 * ids in from_id/to_id, label lists in from_labels/to_labels (jsonb arrays; from null at opening);
 * a stage change out of a stage also keeps how long the thread stayed in it.
 */
export interface ThreadHistoryTable {
  workspace_id: string;
  id: string;
  thread_id: string;
  field: HistoryField;
  from_status: ThreadStatus | null;
  to_status: ThreadStatus | null;
  from_id: string | null;
  to_id: string | null;
  from_labels: ColumnType<string[] | null, string | null | undefined, never>;
  to_labels: ColumnType<string[] | null, string | null | undefined, never>;
  stay_ms: ColumnType<string | null, number | null, never>;
  actor_type: ActorType;
  actor_id: string | null;
  reason: string | null;
  created_at: ColumnType<Date, Date, never>;
}

/**
 * The key of nps_daily_groups' agent groups for answers given without an agent (the nil UUID). The
 * same value as migration 0004's, which keeps its own copy: a migration is frozen.
 */
export const NO_AGENT = '00000000-0000-0000-0000-000000000000';

/** nps_daily broken down by the thread's channel, agent (nil UUID: none) or stage at answer time. */
export interface NpsDailyGroupTable {
  workspace_id: string;
  dimension: 'channel' | 'agent' | 'stage';
  day: ColumnType<Date, string, never>;
  key: string;
  promotores: number;
  neutros: number;
  detratores: number;
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
  direction: MessageDirection;
  /** Null once the contact was erased. */
  content: string | null;
  status: MessageStatus;
  external_id: ColumnType<string | null, string | null | undefined, string | null>;
  /** jsonb {code, message}; written as JSON text. */
  error: ColumnType<Schemas['MessageError'] | null, string | null | undefined, string | null>;
  /** jsonb {name, language, parameters?}; written as JSON text. */
  template: ColumnType<Schemas['MessageTemplate'] | null, string | null | undefined, never>;
  /** The AI agent that wrote an outbound message; kept after the agent is deleted. */
  agent_id: ColumnType<string | null, string | null | undefined, never>;
  /** The automation that sent an outbound message; kept after the automation is deleted. */
  automation_id: ColumnType<string | null, string | null | undefined, never>;
  /** jsonb: the API's Attachment objects of the message (empty for text); written as JSON text. */
  attachments: ColumnType<Attachment[], string | undefined, string>;
  /** jsonb [{title, payload}]: the buttons an Instagram message offers (the NPS question's 0..10); null for none. */
  quick_replies: ColumnType<QuickReply[] | null, string | null | undefined, never>;
  /** The message this one answers (quotes); null for none, or a quoted message unknown here. */
  reply_to: ColumnType<string | null, string | null | undefined, never>;
  /** jsonb: the reactions on the message, at most one per direction; written as JSON text. */
  reactions: ColumnType<Reaction[], string | undefined, string>;
  /** The provider ids of the last customer reactions applied (at most 20): one delivered again is not applied again. */
  reaction_ids: ColumnType<string[], string[] | undefined, string[]>;
  /** jsonb: the buttons or list an outbound message offers, or the reply an inbound one tapped; written as JSON text. */
  interactive: ColumnType<Interactive | null, string | null | undefined, never>;
  created_at: CreatedAt;
}

/** An emoji reaction on a message, as the API shows it. */
export interface Reaction {
  emoji: string;
  direction: MessageDirection;
  createdAt: string;
}

/** A message's buttons or list (outbound), or the button or row a customer tapped (inbound), as the API shows them. */
export type Interactive = NonNullable<components['schemas']['Message']['interactive']>;

/** A quick reply of an outbound message: the button's title, and the payload Meta sends back when it is tapped. */
export interface QuickReply {
  title: string;
  payload: string;
}

/** Where Meta has an inbound file: a WhatsApp media id, or an Instagram attachment URL. */
export type MediaSource = { whatsappMediaId: string; sha256?: string | undefined; size?: number | undefined } | { url: string };

/** A media file's facts and where its bytes are in the media store (src/media/); never the bytes. */
export interface MediaTable {
  workspace_id: string;
  id: string;
  type: MediaType;
  mime_type: string;
  /** bigint: pg reads it as text (read it with Number). */
  size: ColumnType<string | number | null, number | null | undefined, number | null>;
  sha256: string | null;
  filename: string | null;
  status: MediaStatus;
  storage_key: string | null;
  /** The person whose message brought it (inbound); erasing them deletes it. */
  contact_id: ColumnType<string | null, string | null | undefined, never>;
  /** jsonb MediaSource of an inbound file; written as JSON text. */
  source: ColumnType<MediaSource | null, string | null | undefined, never>;
  created_at: CreatedAt;
}

/** One automation's run for one event or silence (migration 0022). */
export interface AutomationRunTable {
  workspace_id: string;
  id: string;
  automation_id: string;
  /** The event's id, or `idle:<message id>`: unique per automation. */
  trigger_key: string;
  event_id: string | null;
  thread_id: string | null;
  status: AutomationRunStatus;
  reason: string | null;
  /** jsonb; written as JSON text. */
  actions: ColumnType<Schemas['AutomationRunAction'][], string, string>;
  /** The event id, or `idle:<message id>`, that began the run's chain of automations; null for runs from before. */
  root_key: ColumnType<string | null, string | null | undefined, never>;
  created_at: CreatedAt;
}

/** Unfinished background work (src/jobs); a row is deleted when its job finishes. */
export interface JobTable {
  workspace_id: string;
  id: string;
  queue: string;
  /** Jobs with the same key run one at a time, in (created_at, id) order. */
  ordering_key: string | null;
  /** jsonb; written as JSON text. */
  payload: ColumnType<Record<string, unknown>, string, never>;
  run_at: Timestamp;
  attempts: ColumnType<number, number | undefined, number>;
  locked_by: string | null;
  locked_until: NullableTimestamp;
  last_error: string | null;
  created_at: CreatedAt;
}

/** The stored result of a POST sent with an Idempotency-Key, written with the change it made. */
export interface IdempotencyKeyTable {
  workspace_id: string;
  api_key_id: string;
  key: string;
  method: string;
  path: string;
  body_sha256: string;
  status: number;
  /** The response body as sent (JSON text), or sealed under SECRETS_KEY when response_sealed. */
  response: string;
  /** Whether `response` is sealed (an answer holding a secret); false by default. */
  response_sealed: ColumnType<boolean, boolean | undefined, boolean>;
  /** Renewed when an expired key is used again. */
  created_at: Timestamp;
}

/**
 * A workspace's settings (migration 0017), at most one row, made by its first change. A null column
 * is a key the workspace never set: it reads as the default (services/settings.ts), so changing a
 * default reaches every workspace that kept it.
 */
export interface WorkspaceSettingsTable {
  workspace_id: string;
  timezone: string | null;
  /** jsonb {mon..sun: [[start, end], ...]}; written as JSON text. */
  business_hours: ColumnType<Record<string, string[][]> | null, string | null | undefined, string | null>;
  /** jsonb {question, thanks, template, expiresAfterHours}; written as JSON text. */
  nps: ColumnType<Record<string, unknown> | null, string | null | undefined, string | null>;
  updated_at: Timestamp;
}

/** A change the API exposed, kept 30 days: the event log and what webhooks deliver. */
export interface EventTable {
  workspace_id: string;
  id: string;
  type: string;
  /** jsonb: the object as the API returns it; written as JSON text. */
  data: ColumnType<Record<string, unknown>, string, string>;
  /** The contact the event is about, so erasing them finds it. */
  contact_id: string | null;
  /** Who made the change (migration 0013); null on events recorded before actors were. */
  actor_type: ActorType | null;
  actor_id: string | null;
  /** Where an nps.answered came from (migration 0023): `api` or `conversation`; null for other types. */
  source: ColumnType<EventSource | null, EventSource | null | undefined, never>;
  /** Which clock an sla.warning or sla.breached is about (migration 0028); null for other types. */
  metric: ColumnType<SlaMetric | null, SlaMetric | null | undefined, never>;
  created_at: ColumnType<Date, Date, never>;
  /** The contacts a contact.merged folded into its object (migration 0027); null for other types. */
  merged_ids: ColumnType<string[] | null, string[] | null | undefined, never>;
  /** The writing transaction's id (xid8, as text), set by PostgreSQL: the live stream's order. */
  commit_xid: ColumnType<string | null, never, never>;
}

/** Short-lived tokens that open an event stream in place of the key (src/stream/tokens.ts). */
export interface StreamTokenTable {
  token_hash: string;
  workspace_id: string;
  api_key_id: string;
  expires_at: Date;
}

/** Leases of the instances streaming a workspace: its events are announced only while one is unexpired (src/stream/leases.ts). */
export interface StreamListenerTable {
  workspace_id: string;
  instance_id: string;
  expires_at: Date;
}

/** Where the integrator wants events delivered. */
export interface WebhookEndpointTable {
  workspace_id: string;
  id: string;
  url: string;
  /** Event types, or '*'. */
  events: string[];
  description: string | null;
  /** The whsec_ secret, sealed by src/secrets.ts. */
  secret: string;
  enabled: ColumnType<boolean, boolean | undefined, boolean>;
  disabled_reason: ColumnType<string | null, string | null | undefined, string | null>;
  /** Since when every attempt has failed; null after a success. */
  failing_since: NullableTimestamp;
  created_at: CreatedAt;
  updated_at: Timestamp;
}

/** One event to one endpoint, and how its attempts went. */
export interface WebhookDeliveryTable {
  workspace_id: string;
  id: string;
  endpoint_id: string;
  event_id: string;
  status: WebhookDeliveryStatus;
  attempts: ColumnType<number, number | undefined, number>;
  last_attempt_at: NullableTimestamp;
  last_response_status: ColumnType<number | null, number | null | undefined, number | null>;
  last_error: ColumnType<string | null, string | null | undefined, string | null>;
  next_attempt_at: NullableTimestamp;
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
  media: MediaTable;
  nps_daily: NpsDailyTable;
  idempotency_keys: IdempotencyKeyTable;
  jobs: JobTable;
  stages: StageTable;
  thread_history: ThreadHistoryTable;
  nps_daily_groups: NpsDailyGroupTable;
  events: EventTable;
  webhook_endpoints: WebhookEndpointTable;
  webhook_deliveries: WebhookDeliveryTable;
  workspace_settings: WorkspaceSettingsTable;
  stream_tokens: StreamTokenTable;
  automations: AutomationTable;
  automation_runs: AutomationRunTable;
  stream_listeners: StreamListenerTable;
  sla_policies: SlaPolicyTable;
  sla_clocks: SlaClockTable;
  sla_metrics: SlaMetricTable;
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
export type MediaRow = Selectable<MediaTable>;
export type StageRow = Selectable<StageTable>;
export type AutomationRow = Selectable<AutomationTable>;
export type SlaPolicyRow = Selectable<SlaPolicyTable>;
export type SlaClockRow = Selectable<SlaClockTable>;
export type AutomationRunRow = Selectable<AutomationRunTable>;
export type ThreadHistoryRow = Selectable<ThreadHistoryTable>;
export type NewThreadHistory = Insertable<ThreadHistoryTable>;
export type NewMessage = Insertable<MessageTable>;
export type JobRow = Selectable<JobTable>;
export type EventRow = Selectable<EventTable>;
export type WebhookEndpointRow = Selectable<WebhookEndpointTable>;
export type WebhookDeliveryRow = Selectable<WebhookDeliveryTable>;
