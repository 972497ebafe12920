#!/usr/bin/env bash
# Builds the pinned Go tools the checks use into $(go env GOPATH)/bin, once; later runs reuse them.
# Go and its module proxy are on these machines; nothing is downloaded from anywhere else.
set -euo pipefail

# tool -> module@version
declare -A tools=(
  [buf]=github.com/bufbuild/buf/cmd/buf@v1.50.0
)

if ! command -v go >/dev/null 2>&1; then
  echo "go is not on PATH: install Go 1.26 (https://go.dev/doc/install) to build ${!tools[*]}" >&2
  exit 1
fi
bin="$(go env GOPATH)/bin"
for tool in "${!tools[@]}"; do
  module="${tools[$tool]}"
  version="${module##*@}"
  if [ -x "$bin/$tool" ] && "$bin/$tool" --version 2>/dev/null | grep -qx "${version#v}"; then
    echo "$tool ${version} present"
    continue
  fi
  echo "building $tool ${version} with go install (a few minutes the first time)"
  go install "$module"
done
