// @agentroom/kit/web: the human pages' one shell: the page frame, stylesheet, icon, HTML escaping (docs/decisions.md §23).
export * from './shell.js';
export * from './favicon.js';
export * from './site-css.js';
export * from '../html.js';
