/**
 * The OpenAPI contract: the document passes a real OpenAPI 3.1 validator, the server serves
 * it and its docs UI from the package (no CDN), and the contract hook that checks every
 * integration-test response notices drift.
 */
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Validator } from '@seriousme/openapi-schema-validator';
import { openApiDocument } from '@visionserve/server';
import { halfPlusTwoModel } from '../src/tools/demo-models.js';
import { checkResponse, contractChecks } from './helpers/contract.js';
import { placeModel, tempRepo } from './helpers/model-repo.js';
import { startHarness, type Harness } from './helpers/server-harness.js';
import { DEFAULTS } from '@visionserve/server';

describe('OpenAPI 3.1 contract', () => {
  let h: Harness;
  before(async () => {
    const root = await tempRepo();
    const base = await placeModel(root, 'half_plus_two', 1, halfPlusTwoModel());
    h = await startHarness({ modelBasePath: base, modelName: 'half_plus_two', fileSystemPollSeconds: 0 });
  });
  after(async () => {
    await h.close();
  });

  it('passes the OpenAPI schema validator (@seriousme/openapi-schema-validator), with metrics and without', async () => {
    for (const metricsPath of [undefined, '/monitoring/prometheus/metrics']) {
      const validator = new Validator();
      const result = await validator.validate(
        openApiDocument({ consolePath: DEFAULTS.consolePath, version: '1.0.0', metricsPath }),
      );
      assert.deepEqual(result.errors, undefined, JSON.stringify(result.errors, null, 1));
      assert.equal(result.valid, true);
      assert.equal(validator.version, '3.1');
    }
  });

  it('covers every HTTP API', () => {
    const paths = Object.keys(
      openApiDocument({ consolePath: DEFAULTS.consolePath, version: 'x' })['paths'] as object,
    );
    for (const p of [
      '/v1/models/{model}:predict',
      '/v1/models/{model}/versions/{version}/metadata',
      '/v2/models/{model}/infer',
      '/v2/repository/models/{model}/load',
      '/ping',
      '/execution-parameters',
      '/invocations',
      '/models/{model}',
      '/healthz',
      '/readyz',
      '/openapi.json',
      '/console/api/models',
      '/console/api/traffic',
      '/tensorflow.serving.PredictionService/Predict',
    ]) {
      assert.ok(paths.includes(p), p);
    }
  });

  it('is served at /openapi.json, with a docs UI from the package (no CDN)', async () => {
    const served = (await (await fetch(`${h.rest}/openapi.json`)).json()) as {
      openapi: string;
      paths: object;
    };
    assert.equal(served.openapi, '3.1.0');
    assert.deepEqual(
      Object.keys(served.paths),
      Object.keys(openApiDocument({ consolePath: DEFAULTS.consolePath, version: 'x' })['paths'] as object),
    );
    const docs = await fetch(`${h.rest}/docs`, { redirect: 'manual' });
    assert.equal(docs.status, 302);
    const page = await (await fetch(`${h.rest}/docs/`)).text();
    assert.doesNotMatch(page, /https?:\/\//, 'no external URL in the docs page');
    for (const asset of ['swagger-ui-bundle.js', 'swagger-ui.css', 'docs-init.js']) {
      assert.match(page, new RegExp(asset.replace('.', '\\.')));
      const res = await fetch(`${h.rest}/docs/${asset}`);
      assert.equal(res.status, 200, asset);
      await res.arrayBuffer();
    }
    assert.equal((await fetch(`${h.rest}/docs/..%2f..%2fpackage.json`)).status, 404);
  });

  it('the contract hook flags answers that drift from the document', () => {
    const before = contractChecks();
    assert.equal(
      checkResponse('GET', '/v2/health/live', 200, 'application/json', Buffer.from('{"live":true}')),
      undefined,
    );
    assert.match(
      checkResponse(
        'GET',
        '/v1/models/m',
        200,
        'application/json',
        Buffer.from('{"model_version_status":[{}]}'),
      ) ?? '',
      /must have required property/,
    );
    assert.match(
      checkResponse('GET', '/v1/models/m', 200, 'text/html', Buffer.from('<p>')) ?? '',
      /Content-Type/,
    );
    assert.match(
      checkResponse('GET', '/v1/models/m', 299, 'application/json', Buffer.from('{}')) ?? '',
      /not documented/,
    );
    assert.match(
      checkResponse('GET', '/nowhere', 200, 'application/json', Buffer.from('{}')) ?? '',
      /undocumented/,
    );
    assert.equal(
      checkResponse('GET', '/nowhere', 404, 'application/json', Buffer.from('{"error":"x"}')),
      undefined,
    );
    assert.ok(contractChecks() > before);
  });
});
