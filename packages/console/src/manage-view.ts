import { createGrpcWebChannel, createTfsGrpcStub } from '@visionserve/client/grpc-web';
import { type ModelJson, adminToken, models } from './api.js';
import { h } from './dom.js';

const errorText = (error: unknown): string => (error instanceof Error ? error.message : String(error));

type Entry = Parameters<ReturnType<typeof createTfsGrpcStub>['reloadConfig']>[0][number];

function entryOf(m: ModelJson): Entry {
  const policy = m.versionPolicy as { kind: string; numVersions?: number; versions?: number[] } | null;
  return {
    name: m.name,
    basePath: m.basePath ?? '',
    versionPolicy:
      policy?.kind === 'all'
        ? { all: true }
        : policy?.kind === 'specific'
          ? { specific: policy.versions ?? [] }
          : { latest: policy?.numVersions ?? 1 },
    versionLabels: m.versionLabels,
  };
}

/**
 * The Manage view. After a change the model list is fetched again and redrawn in place: the
 * status line (role=status, `#manage-status`) keeps saying what happened, it is not replaced.
 */
export async function renderManage(view: HTMLElement): Promise<void> {
  let list = await models();
  const token = h('input', { id: 'manage-token', type: 'password', autocomplete: 'off' });
  token.value = adminToken();
  const status = h('p', { role: 'status', id: 'manage-status' });
  const apply = async (entries: Entry[], what: string): Promise<void> => {
    sessionStorage.setItem('visionserve-admin-token', token.value);
    const client = createTfsGrpcStub(createGrpcWebChannel({ baseUrl: '' }), {
      ...(token.value === '' ? {} : { metadata: { authorization: `Bearer ${token.value}` } }),
      defaultTimeoutMs: 300_000,
    });
    status.textContent = `${what}…`;
    try {
      await client.reloadConfig(entries);
    } catch (error) {
      status.textContent = `${what} failed: ${errorText(error)}`;
      return;
    }
    status.textContent = `${what}: done.`;
    try {
      list = await models();
      drawList();
    } catch (error) {
      status.textContent = `${what}: done (the model list could not be refreshed: ${errorText(error)}).`;
    }
  };
  const name = h('input', { id: 'load-name', required: true });
  const base = h('input', { id: 'load-path', required: true, size: '50' });
  const load = h('button', { type: 'submit' }, 'Load');
  const form = h(
    'form',
    { class: 'row' },
    h('label', {}, 'Model name', name),
    h('label', {}, 'Base path on the server', base),
    load,
  );
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    void apply([...list.map(entryOf), { name: name.value, basePath: base.value }], `Loading ${name.value}`);
  });
  const loaded = h('ul', {});
  const drawList = (): void => {
    loaded.replaceChildren(
      ...list.map((m) => {
        const unload = h(
          'button',
          { type: 'button', class: 'secondary', 'aria-label': `Unload ${m.name}` },
          'Unload',
        );
        const reload = h(
          'button',
          { type: 'button', class: 'secondary', 'aria-label': `Reload ${m.name}` },
          'Reload',
        );
        unload.addEventListener('click', () => {
          void apply(list.filter((x) => x !== m).map(entryOf), `Unloading ${m.name}`);
        });
        reload.addEventListener('click', () => {
          void apply(list.map(entryOf), `Reloading ${m.name}`);
        });
        return h(
          'li',
          {},
          h('strong', {}, m.name),
          ` (${m.basePath ?? 'base path hidden'}) `,
          unload,
          ' ',
          reload,
        );
      }),
    );
  };
  view.replaceChildren(
    h('h2', {}, 'Manage'),
    h(
      'p',
      {},
      'Loads, unloads and reloads go through ModelService.HandleReloadConfigRequest over gRPC-web, so the management guard (--admin_token_file, --disable_model_management) applies.',
    ),
    h('label', {}, 'Admin token (sent as Authorization: Bearer; empty when the guard is off)', token),
    status,
    h('h3', {}, 'Loaded models'),
    loaded,
    h('h3', {}, 'Load a model'),
    form,
  );
  drawList();
}
