// /docs: an interactive reference (Swagger UI) rendered from /openapi.json, its assets served from
// node_modules so the page works without internet and requests nothing off the machine.
import { createRequire } from 'node:module';
import path from 'node:path';
import express, { Router } from 'express';

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
</head>
<body>
  <div id="swagger-ui"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>
`;

const INIT = `window.ui = SwaggerUIBundle({
  url: '/openapi.json',
  dom_id: '#swagger-ui',
  deepLinking: true,
  validatorUrl: null,
  persistAuthorization: true,
  displayRequestDuration: true,
});
`;

// Only this origin: the page can neither load nor send anything elsewhere.
const CSP = "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'";

export function docsRouter(): Router {
  const router = Router();
  router.get('/docs', (_req, res) => {
    res.set('Content-Security-Policy', CSP).type('html').send(PAGE);
  });
  router.get('/docs/init.js', (_req, res) => {
    res.type('application/javascript').send(INIT);
  });
  router.use('/docs/assets', express.static(assetsDir, { index: false, maxAge: '1h' }));
  return router;
}
