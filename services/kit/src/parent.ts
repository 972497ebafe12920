// How a process of ours notices that the process that started it is gone, whatever killed it
// (kill -9 included), so that nothing it started outlives it. Linux has prctl(PR_SET_PDEATHSIG)
// for this, which Node cannot reach without native code; these are the means it has.

/** How often a process without a channel to its parent checks who its parent is. */
const PPID_POLL_MS = 500;
/** Read when kit is loaded, first thing in a process: a channel that closed before anyone watched it is gone from `process.channel`. */
const startedWithChannel = process.channel !== undefined;

/**
 * How the parent is watched. `channel`: only through the IPC channel a Node parent opened
 * (`stdio: [..., 'ipc']`), whose close means the parent has exited or died; a process started
 * without one (from a shell, under nohup, by systemd) is not watched, since it may be meant to
 * outlive its shell. `channel-or-ppid`: without a channel, the parent's process id is read every
 * half second: on Linux an orphan is handed to init (or to the nearest subreaper), so a changed id
 * means the parent died.
 */
export type ParentWatch = 'channel' | 'channel-or-ppid';

/**
 * Calls `onGone` once, when the process that started this one is gone (at once if it is gone
 * already). Answers a function that stops watching. The watch never keeps the process alive.
 */
export function onParentGone(onGone: () => void, how: ParentWatch): () => void {
  if (startedWithChannel) {
    if (!process.connected) {
      onGone();
      return () => undefined;
    }
    process.once('disconnect', onGone);
    // A 'disconnect' listener holds the channel open, which would keep an idle process alive.
    process.channel?.unref();
    return () => void process.off('disconnect', onGone);
  }
  if (how === 'channel') return () => undefined;
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    onGone();
  }, PPID_POLL_MS);
  timer.unref();
  return () => clearInterval(timer);
}

/**
 * A program that is not Node (redis-server, Envoy) cannot watch its parent itself: it is started
 * through `sh`, whose background job waits for end of file on the program's stdin, a pipe only its
 * parent holds open, and then stops the program (SIGTERM, and SIGKILL 5 s later if it is still
 * there). The shell execs into the program, so its process id is the program's own, and signals
 * reach it directly. The job acts only while its own parent is still that program, so that a
 * program that already exited (and whose id may be reused) is never signalled.
 */
const WATCHED_PROGRAM_SH = [
  'program=$$',
  'mine() { read -r stat < /proc/self/stat; set -- $stat; [ "$4" = "$program" ]; }',
  // A background job's stdin is /dev/null unless redirected: it reads the pipe through fd 3, which the program does not keep.
  'exec 3<&0',
  '( while read -r _; do :; done; if mine; then kill -TERM "$program"; i=0; while mine && [ $i -lt 50 ]; do sleep 0.1; i=$((i + 1)); done; if mine; then kill -KILL "$program"; fi; fi ) <&3 &',
  'exec "$@" 3<&-',
].join('\n');

/**
 * `command` and `args` wrapped so the program exits once this process is gone (see above): spawn
 * what this answers with `stdio[0]` `'pipe'`, and end that pipe when the program has exited.
 */
export function exitingWithParent(command: string, args: readonly string[]): { command: string; args: string[] } {
  return { command: 'sh', args: ['-c', WATCHED_PROGRAM_SH, command, command, ...args] };
}
