#!/usr/bin/env bash
# Installs what the test suites need from Debian's packages, and nothing when it is already there.
# As root with apt-get it installs; otherwise it prints the exact command and fails.
set -euo pipefail

# command -> Debian package (PostgreSQL's programs are not on PATH: checked by their full path)
declare -A packages=([redis-server]=redis-server [redis-cli]=redis-tools [chromium]=chromium [/usr/lib/postgresql/15/bin/postgres]=postgresql)

missing=()
for command in "${!packages[@]}"; do
  command -v "$command" >/dev/null 2>&1 || missing+=("${packages[$command]}")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "test dependencies present: $(redis-server --version | cut -d' ' -f1-3); $(chromium --version 2>/dev/null); $(/usr/lib/postgresql/15/bin/postgres --version)"
  exit 0
fi

if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing ${missing[*]} with apt-get"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "installed ${missing[*]}"
else
  echo "missing: ${missing[*]}. Install it with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
