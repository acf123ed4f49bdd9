import { renderCompare } from './compare-view.js';
import { h } from './dom.js';
import { renderManage } from './manage-view.js';
import { renderModels } from './models-view.js';
import { renderTraffic, stopTraffic } from './traffic-view.js';
import { renderTry } from './try-view.js';
import { renderLive, stopLive } from './live-view.js';

const view = document.getElementById('view')!;
const tabs = ['models', 'traffic', 'try', 'live', 'compare', 'manage'] as const;
type Tab = (typeof tabs)[number];

function current(): Tab {
  const hash = location.hash.slice(1);
  return (tabs as readonly string[]).includes(hash) ? (hash as Tab) : 'models';
}

function show(): void {
  const tab = current();
  for (const a of document.querySelectorAll<HTMLAnchorElement>('nav a[data-tab]')) {
    if (a.dataset['tab'] === tab) a.setAttribute('aria-current', 'page');
    else a.removeAttribute('aria-current');
  }
  if (tab !== 'traffic') stopTraffic();
  if (tab !== 'live') stopLive();
  const fail = (error: unknown): void => {
    view.replaceChildren(h('p', { class: 'error', role: 'alert' }, `Could not load: ${String(error)}`));
  };
  switch (tab) {
    case 'models':
      renderModels(view).catch(fail);
      break;
    case 'traffic':
      renderTraffic(view);
      break;
    case 'try':
      renderTry(view).catch(fail);
      break;
    case 'live':
      renderLive(view).catch(fail);
      break;
    case 'compare':
      renderCompare(view).catch(fail);
      break;
    case 'manage':
      renderManage(view).catch(fail);
      break;
  }
}

window.addEventListener('hashchange', show);
show();
