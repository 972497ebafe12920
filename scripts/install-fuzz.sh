#!/usr/bin/env bash
# Installs schemathesis (pinned, with every dependency pinned, in scripts/fuzz-requirements.txt) into a
# project-local virtualenv, .venv/, for launcher/test/fuzz.test.ts and `npm run fuzz`; nothing when it
# is already there. pip reads the machine's package index (PyPI or its mirror); nothing else is downloaded.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
requirements="$root/scripts/fuzz-requirements.txt"
# A copy of the requirements the virtualenv was built from: when it matches, there is nothing to do.
stamp="$venv/.fuzz-requirements.txt"
version="$(grep -E '^schemathesis==' "$requirements" | cut -d= -f3)"

if [ -x "$venv/bin/st" ] && cmp -s "$requirements" "$stamp"; then
  echo "schemathesis $version present in .venv"
  exit 0
fi

python="$(command -v python3 || true)"
if [ -z "$python" ] || ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)'; then
  echo "python3 3.10 or newer is needed for schemathesis: install it with: sudo apt-get install -y python3 python3-venv" >&2
  exit 1
fi

echo "installing schemathesis $version into .venv with pip (a minute the first time)"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
cp "$requirements" "$stamp"
"$venv/bin/st" --version
