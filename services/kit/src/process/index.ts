// @agentroom/kit/process: a service process's life: start-up problems, the admin port (metrics, /livez, /readyz), signals and draining, the parent watch.
export * from '../admin.js';
export * from '../lifecycle.js';
export * from '../parent.js';
export * from '../startup.js';
