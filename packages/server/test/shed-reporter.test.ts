/**
 * Every admission refusal (in-flight budget, queue wait, JSON decode backlog) is counted per
 * reason in `visionserve_shed_requests_total` and logged, throttled per reason.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createInflightBudget } from '../src/frontends/shared/inflight-budget.js';
import { createServingMetrics } from '../src/observability/serving-metrics.js';
import { createShedReporter } from '../src/observability/shed-reporter.js';
import { createMemoryLogger } from './fakes.js';

describe('shed reporter', () => {
  it('counts every refusal per reason and logs at most once per interval and reason', () => {
    const logger = createMemoryLogger();
    let clock = 0;
    const reporter = createShedReporter({ logger, logIntervalMs: 1000, now: () => clock });
    for (let i = 0; i < 5; i++) reporter.report('queue-wait', 'm', `wait ${i}`);
    reporter.report('json-decode', undefined, 'decode backlog');
    clock = 999;
    reporter.report('queue-wait', 'm', 'wait 5');
    clock = 1000;
    reporter.report('queue-wait', 'm', 'wait 6');
    assert.deepEqual(
      [...reporter.counts()],
      [
        ['queue-wait', 7],
        ['json-decode', 1],
      ],
    );
    const lines = logger.records.filter((r) => r.message === 'overloaded: shedding requests');
    assert.deepEqual(
      lines.map((r) => [r.fields['reason'], r.fields['refused'], r.fields['example']]),
      [
        ['queue-wait', 1, 'wait 0'],
        ['json-decode', 1, 'decode backlog'],
        ['queue-wait', 6, 'wait 6'],
      ],
    );
  });

  it('the in-flight budget reports which limit refused, and the metric counts it by reason', async () => {
    const logger = createMemoryLogger();
    const reporter = createShedReporter({ logger });
    const budget = createInflightBudget({
      maxBytes: 100,
      maxRequests: 2,
      onShed: ({ message, ...details }) => {
        reporter.report('inflight-budget', undefined, message, details);
      },
    });
    const a = budget.tryReserve(60);
    assert.ok(a);
    assert.equal(budget.tryReserve(50), undefined);
    const b = budget.tryReserve(10);
    assert.ok(b);
    assert.equal(budget.tryReserve(1), undefined);
    assert.equal(b.grow(40), false);
    a.release();
    b.release();
    assert.equal(reporter.counts().get('inflight-budget'), 3);
    assert.equal(budget.usedBytes, 0);
    const line = logger.records.find((r) => r.message === 'overloaded: shedding requests');
    assert.equal(line?.fields['example'], '110 request bytes in flight (limit 100)');
    assert.equal(line?.fields['requestBytes'], 50);

    reporter.report('queue-wait', 'm', 'queued');
    const metrics = createServingMetrics({ shed: () => reporter.counts(), processMetrics: false });
    const text = await metrics.render();
    assert.match(text, /visionserve_shed_requests_total\{reason="inflight-budget"\} 3/);
    assert.match(text, /visionserve_shed_requests_total\{reason="queue-wait"\} 1/);
    reporter.report('queue-wait', 'm', 'queued');
    assert.match(await metrics.render(), /visionserve_shed_requests_total\{reason="queue-wait"\} 2/);
  });
});
