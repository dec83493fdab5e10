// /docs: an interactive reference (Swagger UI) rendered from the contract, its assets served from
// node_modules so the page works without internet and requests nothing off the machine. The page
// reads /docs/openapi.json: the contract with the host serving the page as its first server (so
// "Try it out" calls this server), the long guide of info.description moved below the
// operations and webhooks (so Authorize and the operations are on the first screen), and the
// Idempotency-Key header without its example (Swagger UI fills a parameter's example into "Try it
// out", so every POST tried out would send that one key: a second, different upload or contact
// from the same API key would be a 422 idempotency_key_reused; left empty, none is sent).
import { createRequire } from 'node:module';
import path from 'node:path';
import express, { Router, type Request } from 'express';
import { spec } from './contract.js';

const require = createRequire(import.meta.url);
const assetsDir = path.dirname(require.resolve('swagger-ui-dist/package.json'));

const PAGE = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>Support Funnel API v1 reference</title>
  <link rel="icon" href="data:,">
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
  <link rel="stylesheet" href="/docs/docs.css">
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>
`;

// The guide (the contract's `x-guide` in the page's copy) is rendered after the operations and
// the webhooks this service sends (OpenAPI 3.1's \`webhooks\`, drawn after the operations), with
// Swagger UI's own Markdown component.
const INIT = `const GuideBelowOperations = () => {
  const guide = (system) => {
    const React = system.React;
    const Markdown = system.getComponent('Markdown', true);
    const text = system.specSelectors.specJson().get('x-guide');
    return text ? React.createElement('section', { className: 'docs-guide', id: 'guide' }, React.createElement(Markdown, { source: text })) : null;
  };
  const hasWebhooks = (system) => (system.specSelectors.specJson().get('webhooks')?.size ?? 0) > 0;
  return {
    wrapComponents: {
      operations: (Operations, system) => (props) =>
        system.React.createElement('div', null, system.React.createElement(Operations, props), hasWebhooks(system) ? null : guide(system)),
      Webhooks: (Webhooks, system) => (props) =>
        system.React.createElement('div', null, system.React.createElement(Webhooks, props), guide(system)),
    },
  };
};
window.ui = SwaggerUIBundle({
  url: '/docs/openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: true,
  validatorUrl: null,
  persistAuthorization: true,
  displayRequestDuration: true,
  plugins: [GuideBelowOperations],
});
`;

const CSS = `.docs-guide { max-width: 1460px; margin: 40px auto 60px; padding: 0 20px; font-family: sans-serif; color: #3b4151; }
.docs-guide h2 { font-size: 24px; margin: 32px 0 12px; }
.docs-guide table { border-collapse: collapse; margin: 12px 0; }
.docs-guide th, .docs-guide td { border: 1px solid #d9d9d9; padding: 4px 10px; text-align: left; vertical-align: top; }
`;

// Only this origin: the page can neither load nor send anything elsewhere.
const CSP = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'";

/** Where the guide starts in info.description: its first section heading. */
const info = spec.info as { description: string };
const servers = spec.servers as unknown[];
const description = info.description;
const guideAt = description.search(/^## /m);
const intro = guideAt === -1 ? description : description.slice(0, guideAt).trimEnd();
const guide = guideAt === -1 ? undefined : description.slice(guideAt);

const components = spec.components as { parameters: Record<string, Record<string, unknown>> };
const { example: _sharedKey, ...idempotencyKey } = components.parameters.IdempotencyKey!;
const pageComponents = { ...components, parameters: { ...components.parameters, IdempotencyKey: idempotencyKey } };

const HOST = /^(?:[a-z0-9.-]+|\[[0-9a-f:.]+\])(?::\d{1,5})?$/i;

/** The contract as the page shows it: this host first, the guide apart, no shared Idempotency-Key. */
function pageSpec(req: Request): Record<string, unknown> {
  const host = req.get('host') ?? '';
  const here = HOST.test(host) ? `${req.protocol}://${host}/v1` : '/v1';
  return {
    ...spec,
    info: { ...info, description: guide ? `${intro}\n\nThe guide follows the operations, [below](#guide).` : intro },
    servers: [{ url: here, description: 'This server (the one serving this page)' }, ...servers],
    components: pageComponents,
    ...(guide && { 'x-guide': guide }),
  };
}

export function docsRouter(): Router {
  const router = Router();
  router.get('/docs', (_req, res) => {
    res.set({ 'Content-Security-Policy': CSP, 'Cache-Control': 'no-cache' }).type('html').send(PAGE);
  });
  router.get('/docs/init.js', (_req, res) => {
    res.set('Cache-Control', 'no-cache').type('application/javascript').send(INIT);
  });
  router.get('/docs/docs.css', (_req, res) => {
    res.type('text/css').send(CSS);
  });
  router.get('/docs/openapi.json', (req, res) => {
    res.json(pageSpec(req));
  });
  router.use(
    '/docs/assets',
    (_req, res, next) => {
      // The assets are versioned with the package: cacheable for an hour (serve-static keeps a set header).
      res.removeHeader('Cache-Control');
      next();
    },
    express.static(assetsDir, { index: false, maxAge: '1h' }),
  );
  return router;
}
