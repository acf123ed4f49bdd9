/**
 * /readyz (and SageMaker /ping's readiness): not ready while the initial configuration loads
 * and from the moment shutdown starts; afterwards ready when every model has an AVAILABLE version.
 */
import type { ModelManager } from '../core/model-manager.js';
import type { ReadinessCheck } from '../frontends/ops/ops-api.js';

export interface Readiness {
  readonly check: ReadinessCheck;
  /** The initial configuration's models while they load; undefined once it settled. */
  loading(models: readonly string[] | undefined): void;
  /** Shutdown started: not ready from now on. */
  drain(): void;
}

export function createReadiness(manager: ModelManager<unknown>): Readiness {
  let draining = false;
  let initialModels: readonly string[] | undefined = [];
  const check: ReadinessCheck = () => {
    if (draining) return { ready: false, reason: 'draining' };
    const waiting: { model: string; state: string }[] = [];
    for (const model of initialModels ?? manager.modelNames()) {
      const states = statesOf(manager, model);
      if (initialModels !== undefined || !states.includes('AVAILABLE')) {
        waiting.push({ model, state: states.includes('AVAILABLE') ? 'AVAILABLE' : (states[0] ?? 'START') });
      }
    }
    if (initialModels !== undefined) {
      return { ready: false, reason: 'loading the configured models', models: waiting };
    }
    return waiting.length === 0
      ? { ready: true }
      : { ready: false, reason: 'models without an AVAILABLE version', models: waiting };
  };
  return {
    check,
    loading(models) {
      initialModels = models;
    },
    drain() {
      draining = true;
    },
  };
}

function statesOf(manager: ModelManager<unknown>, model: string): string[] {
  try {
    return manager.status(model).map((s) => s.state);
  } catch {
    return []; // no version known yet
  }
}
