import { h } from './lib.js';

// The live view: written in its own change.
export function mount(el) {
  el.append(h('h2', null, 'live'));
}
