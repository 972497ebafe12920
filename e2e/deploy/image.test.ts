import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { discoveryDocuments } from '@agentroom/gateway';
import { HealthChecker } from '@agentroom/kit/grpc';
import { EMBEDDED_NODE_FLAGS, freePort, type LocalRedis, NODE_FLAGS, startRedisServer } from '@agentroom/kit/local';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readDockerignore, readRuntimeImage, type RuntimeImage } from '../support/image-dockerfile.js';
import { asImageUser, assembleRuntimeTree, type RuntimeTree } from '../support/image-tree.js';

const repo = fileURLToPath(new URL('../../', import.meta.url));
const rootPackage = JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as {
  version: string;
  license: string;
  packageManager: string;
  engines: { node: string };
  scripts: Record<string, string>;
};

const SITE_URL = 'https://room.example.test';
const API_URL = `${SITE_URL}/api`;
const CURSOR_SECRET = 'image-test-cursor-secret-of-at-least-32-bytes';
const READY_TIMEOUT_MS = 30_000;

/** Every file under `folder`, as paths relative to it, without descending into `skip` folders. */
function filesUnder(folder: string, skip: (path: string) => boolean = () => false): string[] {
  const files: string[] = [];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      const rel = relative(folder, path);
      if (skip(rel)) continue;
      if (entry.isDirectory()) walk(path);
      else files.push(rel);
    }
  };
  walk(folder);
  return files;
}

interface Running {
  name: string;
  child: ChildProcess;
  output: string[];
  exit: Promise<number | null>;
}

/**
 * Agent Room's image, without a Docker engine: the runtime stage's file tree is rebuilt from the
 * Dockerfile (its COPY lines, its `npm ci`) out of the built repository, made read-only, and each
 * service is started from it the way a pod starts the image: its entry point with the service's
 * arguments, as the image's user, with only the image's environment and a deployment's variables.
 */
describe('the container image', () => {
  let image: RuntimeImage;
  let tree: RuntimeTree;
  let redis: LocalRedis;
  const running: Running[] = [];
  const ports = { room: 0, record: 0, messaging: 0, delivery: 0, auth: 0, authWeb: 0, edge: 0 };
  /** Each service's admin port (9090 in the chart): /metrics and the probes /livez and /readyz. */
  const admin = { room: 0, record: 0, messaging: 0, delivery: 0, auth: 0, edge: 0 };

  /** The image's environment: PATH finds the Node.js the tests run on, staged where the image's user runs it; nothing else of this machine's. */
  const imageEnv = (): Record<string, string> => ({ PATH: `${tree.nodeBin}:/usr/local/bin:/usr/bin:/bin`, ...image.env });

  /** The image's entry point with `args`, in its WORKDIR, with the image's env and `env` only. */
  function run(name: string, args: string[], env: Record<string, string>): Running {
    const [command, ...options] = image.entrypoint as [string, ...string[]];
    const child = spawn(command, [...options, ...args], {
      cwd: tree.root,
      env: { ...imageEnv(), ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
      ...asImageUser(),
    });
    const output: string[] = [];
    child.stdout?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => output.push(chunk.toString()));
    const exit = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
    const started = { name, child, output, exit };
    running.push(started);
    return started;
  }

  async function until(service: Running, ready: () => Promise<boolean>): Promise<void> {
    const deadline = Date.now() + READY_TIMEOUT_MS;
    while (!(await ready())) {
      if (service.child.exitCode !== null)
        throw new Error(`${service.name} exited with ${service.child.exitCode} before serving:\n${service.output.join('').slice(-2_000)}`);
      if (Date.now() > deadline)
        throw new Error(`${service.name} did not serve within ${READY_TIMEOUT_MS / 1000} s:\n${service.output.join('').slice(-2_000)}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  async function grpcHealth(port: number): Promise<string> {
    const checker = new HealthChecker(`127.0.0.1:${port}`);
    try {
      return await checker.check();
    } finally {
      checker.close();
    }
  }

  /** A readiness check: `url` answers 200. */
  const answers = (url: string) => async (): Promise<boolean> => {
    const response = await fetch(url).catch(() => undefined);
    await response?.body?.cancel();
    return response?.status === 200;
  };

  beforeAll(async () => {
    const started = performance.now();
    image = readRuntimeImage(readFileSync(join(repo, 'Dockerfile'), 'utf8'));
    // The runtime tree is installed (its `npm ci`, engines checked) and its services run by the
    // Node.js running these tests: on another major than the image's, they would prove nothing.
    const imageMajor = /^node:(\d+)\./.exec(image.baseImage)?.[1];
    if (imageMajor !== process.versions.node.split('.')[0]) {
      throw new Error(
        `the image runs ${image.baseImage} and these tests build its runtime tree with Node.js ${process.versions.node}: run them on Node.js ${imageMajor ?? '?'} (export PATH="$(bash scripts/install-node.sh):$PATH")`,
      );
    }
    const ignored = readDockerignore(readFileSync(join(repo, '.dockerignore'), 'utf8'));
    [tree, redis] = await Promise.all([assembleRuntimeTree(repo, image, ignored), startRedisServer()]);
    const assembled = performance.now();
    // The `node` the entry point finds is that Node.js, wherever the checkout lies: as the image's
    // user, a node it could not reach would be skipped for the machine's, of another version.
    const found = spawnSync('node', ['--version'], { cwd: tree.root, env: imageEnv(), encoding: 'utf8', ...asImageUser() });
    if (found.stdout.trim() !== process.version)
      throw new Error(
        `the image's user finds node ${found.stdout.trim() || `nowhere (${found.error?.message ?? found.stderr})`} on PATH, not ${process.version} at ${tree.nodeBin}`,
      );
    for (const name of Object.keys(ports) as (keyof typeof ports)[]) ports[name] = await freePort();
    for (const name of Object.keys(admin) as (keyof typeof admin)[]) admin[name] = await freePort();

    // What a deployment gives every service (the Helm chart's values, on loopback ports here).
    const common = { SITE_URL, API_URL, REDIS_URL: redis.url };
    const room = run('room', ['services/room/dist/main.js'], {
      ...common,
      ADMIN_PORT: String(admin.room),
      ROOM_GRPC_ADDR: `127.0.0.1:${ports.room}`,
      CURSOR_SECRET,
    });
    // The record on PGlite in memory (no DATABASE_URL): it writes nothing under /app either.
    const record = run('record', ['services/record/dist/main.js'], {
      ...common,
      ADMIN_PORT: String(admin.record),
      RECORD_GRPC_ADDR: `127.0.0.1:${ports.record}`,
      ROOM_ADDR: `127.0.0.1:${ports.room}`,
      CURSOR_SECRET,
    });
    const messaging = run('messaging', ['services/messaging/dist/main.js'], {
      ...common,
      ADMIN_PORT: String(admin.messaging),
      MESSAGING_GRPC_ADDR: `127.0.0.1:${ports.messaging}`,
      ROOM_ADDR: `127.0.0.1:${ports.room}`,
      CURSOR_SECRET,
    });
    const delivery = run('delivery', ['services/delivery/dist/main.js'], {
      ...common,
      ADMIN_PORT: String(admin.delivery),
      DELIVERY_GRPC_ADDR: `127.0.0.1:${ports.delivery}`,
      MESSAGING_ADDR: `127.0.0.1:${ports.messaging}`,
    });
    const auth = run('auth', ['services/auth/dist/main.js'], {
      ...common,
      ADMIN_PORT: String(admin.auth),
      AUTH_GRPC_ADDR: `127.0.0.1:${ports.auth}`,
      AUTH_HTTP_HOST: '127.0.0.1',
      AUTH_HTTP_PORT: String(ports.authWeb),
      ROOM_ADDR: `127.0.0.1:${ports.room}`,
    });
    // The image's default command: edge.
    const edge = run('edge', image.cmd, {
      ...common,
      ADMIN_PORT: String(admin.edge),
      EDGE_HOST: '127.0.0.1',
      EDGE_PORT: String(ports.edge),
      ROOM_ADDR: `127.0.0.1:${ports.room}`,
      AUTH_ADDR: `127.0.0.1:${ports.auth}`,
      MESSAGING_ADDR: `127.0.0.1:${ports.messaging}`,
      DELIVERY_ADDR: `127.0.0.1:${ports.delivery}`,
      RECORD_ADDR: `127.0.0.1:${ports.record}`,
    });
    await Promise.all([
      until(room, async () => (await grpcHealth(ports.room)) === 'SERVING'),
      until(record, async () => (await grpcHealth(ports.record)) === 'SERVING'),
      until(messaging, async () => (await grpcHealth(ports.messaging)) === 'SERVING'),
      until(delivery, async () => (await grpcHealth(ports.delivery)) === 'SERVING'),
      until(auth, async () => (await grpcHealth(ports.auth)) === 'SERVING'),
      until(auth, answers(`http://127.0.0.1:${ports.authWeb}/signin`)),
      until(edge, answers(`http://127.0.0.1:${ports.edge}/api/v1/posts?limit=1`)),
      ...[room, record, messaging, delivery, auth, edge].map((service) =>
        until(service, answers(`http://127.0.0.1:${admin[service.name as keyof typeof admin]}/readyz`)),
      ),
    ]);
    const seconds = (ms: number) => (ms / 1000).toFixed(1);
    console.log(
      `image tree: npm ci ${seconds(tree.installMs)} s${tree.cached ? ' (its layer from node_modules/.cache)' : ''}, assembled in ${seconds(assembled - started)} s, six services serving ${seconds(performance.now() - assembled)} s later`,
    );
  }, 240_000);

  afterAll(async () => {
    for (const service of running) if (service.child.exitCode === null) service.child.kill('SIGKILL');
    await Promise.all(running.map((service) => service.exit));
    await redis?.stop();
    tree?.remove();
  }, 60_000);

  it('runs Node.js 24 LTS as package.json asks, with the npm of its packageManager, as the contract starts it', () => {
    const node = /^node:(\d+)\.(\d+)\.(\d+)-[a-z]+-slim$/.exec(image.baseImage);
    expect(node, `base image ${image.baseImage}: an official node:<x.y.z>-<debian>-slim`).not.toBeNull();
    const [major, minor] = [Number(node?.[1]), Number(node?.[2])];
    const [needMajor, needMinor] = (/>=\s*(\d+)\.(\d+)/.exec(rootPackage.engines.node) ?? []).slice(1).map(Number);
    expect(major).toBe(24);
    expect(minor).toBeGreaterThanOrEqual(major === needMajor ? (needMinor as number) : 0);
    expect(image.labels['org.opencontainers.image.base.name']).toBe(`docker.io/library/${image.baseImage}`);
    // The tree these tests run was installed for that Node.js, by it.
    expect(process.versions.node.split('.')[0]).toBe(String(major));
    expect(`npm@${image.npmVersion}`).toBe(rootPackage.packageManager);

    expect(image.workdir).toBe('/app');
    expect(image.user).toMatch(/^(node|1000)(:(node|1000))?$/);
    // Every service runs with the flags npm run cluster gives node (kit's NODE_FLAGS); npm start with the embedded default's.
    expect(image.entrypoint).toEqual(['node', ...NODE_FLAGS]);
    expect(rootPackage.scripts.start).toBe(`bash scripts/with-node.sh 'node ${EMBEDDED_NODE_FLAGS.join(' ')} launcher/dist/start.js'`);
    expect(image.cmd).toEqual(['services/edge/dist/main.js']);
    expect(image.env).toMatchObject({ NODE_ENV: 'production' });
    expect(image.expose.sort()).toEqual([8080, 8081, 9090, 50051, 50052, 50053, 50054, 50055].sort());
    expect(image.labels).toMatchObject({ 'org.opencontainers.image.version': rootPackage.version, 'org.opencontainers.image.licenses': rootPackage.license });
  });

  it("holds manifests, compiled JavaScript, .proto files, the record's PGlite template and the room's MCP App only: no sources, tests or dev dependencies, nothing writable", () => {
    const ours = filesUnder(tree.root, (path) => path.split('/').includes('node_modules'));
    const unexpected = ours.filter(
      (path) =>
        !/^(package\.json|package-lock\.json|\.npmrc|LICENSE|([\w-]+\/)+package\.json|([\w-]+\/)+dist\/.+\.(js|js\.map|d\.ts|d\.ts\.map)|gateway\/dist\/assets\/.+\.js\.(br|gz)|services\/edge\/dist\/app\/room\.html|services\/record\/dist\/pglite-template\.tar\.gz|proto\/agentroom\/.+\.proto)$/.test(
          path,
        ),
    );
    expect(unexpected).toEqual([]);
    expect(ours.filter((path) => /(^|\/)(src|test)\/|\.test\.|(?<!\.d)\.ts$/.test(path))).toEqual([]);
    for (const main of ['room', 'record', 'messaging', 'delivery', 'auth', 'edge'].map((service) => `services/${service}/dist/main.js`))
      expect(ours).toContain(main);
    expect(ours).toContain('services/edge/dist/assets/room.js');
    // The room's MCP App: one built HTML file, served as a resource's text (docs/decisions.md §48).
    expect(ours).toContain('services/edge/dist/app/room.html');

    // No package the lockfile marks as a development dependency was installed.
    const lock = JSON.parse(readFileSync(join(tree.root, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
    const devPackages = Object.entries(lock.packages).filter(([path, entry]) => entry.dev === true && path.includes('node_modules/'));
    expect(devPackages.length).toBeGreaterThan(0);
    expect(devPackages.map(([path]) => path).filter((path) => existsSync(join(tree.root, path)))).toEqual([]);

    // The image's user cannot write there: the services above started without writing under /app.
    const write = spawnSync(join(tree.nodeBin, 'node'), ['-e', "require('node:fs').writeFileSync('written-at-run-time', '')"], {
      cwd: tree.root,
      ...asImageUser(),
      encoding: 'utf8',
    });
    expect(write.status).not.toBe(0);
    expect(write.stderr).toContain('EACCES');
  });

  it('answers the probes and metrics on every admin port: /livez and /readyz (Redis and its gRPC peers up) 200, /metrics', async () => {
    for (const [service, port] of Object.entries(admin)) {
      for (const path of ['/livez', '/readyz', '/metrics']) {
        const response = await fetch(`http://127.0.0.1:${port}${path}`);
        expect(`${service} ${path} ${response.status}`).toBe(`${service} ${path} 200`);
        if (path === '/metrics') expect(await response.text()).toContain('process_cpu_seconds_total');
        else await response.body?.cancel();
      }
    }
  });

  it('serves gRPC health SERVING on room, record, messaging, delivery and auth', async () => {
    expect(await grpcHealth(ports.room)).toBe('SERVING');
    expect(await grpcHealth(ports.record)).toBe('SERVING');
    expect(await grpcHealth(ports.messaging)).toBe('SERVING');
    expect(await grpcHealth(ports.delivery)).toBe('SERVING');
    expect(await grpcHealth(ports.auth)).toBe('SERVING');
  });

  it("answers HTTP on edge (the API, through room and Redis, and the room page's script) and on auth's pages", async () => {
    const posts = await fetch(`http://127.0.0.1:${ports.edge}/api/v1/posts?limit=1`);
    expect(posts.status).toBe(200);
    expect(await posts.json()).toMatchObject({ data: [] });
    const script = await fetch(`http://127.0.0.1:${ports.edge}/assets/room.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toMatch(/^text\/javascript/);
    expect((await script.text()).length).toBeGreaterThan(100);
    const signin = await fetch(`http://127.0.0.1:${ports.authWeb}/signin`);
    expect(signin.status).toBe(200);
    expect(await signin.text()).toContain('<form');
  });

  it('renders every discovery document with gateway/dist/render.js into a folder outside /app, as the init container does', async () => {
    const out = mkdtempSync(join(tmpdir(), 'agentroom-image-docs-'));
    // An emptyDir volume: writable by the pod's user.
    chmodSync(out, 0o777);
    try {
      const render = run('render', ['gateway/dist/render.js', 'docs', '--out', out], { SITE_URL, API_URL });
      const code = await render.exit;
      expect(code, render.output.join('').slice(-2_000)).toBe(0);
      const written = new Set(
        filesUnder(out).map((file) =>
          createHash('sha256')
            .update(readFileSync(join(out, file)))
            .digest('hex'),
        ),
      );
      const documents = discoveryDocuments({ siteUrl: SITE_URL, apiUrl: API_URL, baseUrl: `${API_URL}/v1` });
      const missing = [...documents].filter(([, document]) => !written.has(createHash('sha256').update(document.body).digest('hex'))).map(([path]) => path);
      expect(missing, 'documents with no file of the same bytes').toEqual([]);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });

  it('stops every service on SIGTERM with status 0, as a pod does when it ends', async () => {
    const services = running.filter((service) => service.name !== 'render');
    for (const service of services) service.child.kill('SIGTERM');
    const codes = await Promise.all(services.map((service) => service.exit));
    expect(Object.fromEntries(services.map((service, i) => [service.name, codes[i]]))).toEqual({
      room: 0,
      record: 0,
      messaging: 0,
      delivery: 0,
      auth: 0,
      edge: 0,
    });
  });
});
