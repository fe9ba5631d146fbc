import { h } from './lib.js';

// The search view: written in its own change.
export function mount(el) {
  el.append(h('h2', null, 'search'));
}
