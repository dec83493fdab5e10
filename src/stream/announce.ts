// The live stream as a consumer of the event log (events/fan-out.ts, registered as `stream` by
// src/event-consumers.ts): its part of the statement that records an event sends `NOTIFY
// events_added`, payload the writing transaction's id (xid8, as text), only while some instance
// holds an unexpired lease on the event's workspace (leases.ts), so while nobody streams a workspace
// its events wake no listening connection (each NOTIFY wakes every one of the database, job workers'
// included). PostgreSQL sends it at the commit, once per transaction however many events it records.
// Before migration 0030 a trigger on `events` did this; now every event is recorded by
// events/record.ts, whose statement runs the registered consumers, so whoever records an event
// announces it. The notification only wakes the streams at once: they read the log (log.ts), and
// every second without one, so an event is never missed without it.
import { sql } from 'kysely';
import type { EventConsumer } from '../events/fan-out.js';

/** The channel the hub LISTENs on. */
export const EVENTS_CHANNEL = 'events_added';

export const streamAnnouncement: EventConsumer = ({ workspaceId }) => ({
  with: sql``,
  notify: sql`, (select pg_notify(${EVENTS_CHANNEL}, pg_current_xact_id()::text)
                   from event
                  where exists (select 1 from stream_listeners l where l.workspace_id = ${workspaceId}::uuid and l.expires_at > now())) as stream_announced`,
});
