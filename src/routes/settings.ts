// Handlers of the workspace's settings (services/settings.ts holds the defaults and the rules).
import { changeSettings, loadSettings } from '../services/settings.js';
import type { Handlers } from './handler.js';

export const settingsHandlers: Pick<Handlers, 'getSettings' | 'updateSettings'> = {
  async getSettings({ db, auth }) {
    return { status: 200, body: await loadSettings(db, auth.workspaceId) };
  },

  async updateSettings({ db, auth, body }) {
    return { status: 200, body: await changeSettings(db, auth.workspaceId, body, new Date()) };
  },
};
