#!/usr/bin/env bash
# Runs an npm script's command line with a Node.js that Agent Room supports first on PATH: the
# machine's when it is 24.11 or newer, else the project's own Node.js 24 in .tools/node24
# (scripts/install-node.sh installs it from the npm registry the first time). Every npm script that
# runs Node.js goes through it, so `npm ci && npm start` and `npm test` work on an older Node.js.
#   bash scripts/with-node.sh 'node a.js && node b.js' [args]   (args go to the last command, as npm appends them)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
script="$1"
shift

machine="$(command -v node || true)"
bin="$(bash "$here/install-node.sh" --quiet)"
if [ "$bin" != "$(dirname "${machine:-/}")" ]; then
  # npm runs `preX` and then `X` as two commands: the first of them says it, once.
  event="${npm_lifecycle_event:-}"
  if [[ "$event" == pre* ]] || ! grep -q "\"pre$event\":" package.json 2>/dev/null; then
    have="$( [ -n "$machine" ] && node --version || echo 'missing')"
    where="${bin%/bin}"
    echo "Agent Room runs on Node.js $("$bin/node" --version) from ${where#"$root/"} (this machine's Node.js is $have; it needs 24.11 or newer)" >&2
  fi
  PATH="$bin:$PATH"
  export PATH
fi
exec bash -c "$script"' "$@"' "$script" "$@"
