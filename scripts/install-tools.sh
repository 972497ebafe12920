#!/usr/bin/env bash
# Builds the pinned Go tools the checks use into $(go env GOPATH)/bin, once; later runs reuse them.
# Go and its module proxy are on these machines; nothing is downloaded from anywhere else.
# A cold first build took about 11 minutes on two busy cores (helm 239 s, kubectl-validate 228 s, k6 204 s,
# module downloads included), promtool and Jaeger add about 2.5 and 3.5 minutes; later runs take well under a
# second: each binary's embedded module version is checked.
set -euo pipefail

# tool -> module@version (kubectl-validate: the tagged v0.0.4 knows Kubernetes only up to 1.30;
# this pseudo-version knows 1.23 to 1.35; k6: v1.8.1, since the v2 module does not go install)
declare -A tools=(
  [buf]=github.com/bufbuild/buf/cmd/buf@v1.50.0
  [helm]=helm.sh/helm/v4/cmd/helm@v4.3.1
  [kubectl-validate]=sigs.k8s.io/kubectl-validate@v0.0.5-0.20260105161640-a97ccfaca20b
  [k6]=go.k6.io/k6@v1.8.1
  [promtool]=github.com/prometheus/prometheus/cmd/promtool@v0.316.0
)

if ! command -v go >/dev/null 2>&1; then
  echo "go is not on PATH: install Go 1.26 (https://go.dev/doc/install) to build ${!tools[*]}" >&2
  exit 1
fi
bin="$(go env GOPATH)/bin"
for tool in buf helm kubectl-validate k6 promtool; do
  module="${tools[$tool]}"
  version="${module##*@}"
  # `go version -m` reads the module version Go embedded in the binary: one check for every tool.
  if [ -x "$bin/$tool" ] && go version -m "$bin/$tool" 2>/dev/null | awk '$1 == "mod" { print $3 }' | grep -qx -- "$version"; then
    echo "$tool ${version} present"
    continue
  fi
  echo "building $tool ${version} with go install (about 4 minutes each the first time)"
  start=$(date +%s)
  go install "$module"
  echo "built $tool in $(( $(date +%s) - start )) s"
done

# Jaeger, the trace backend of the tracing tests: `go install jaeger@version` is refused (its go.mod has
# replace directives), so it is a tool of the small module in scripts/go-tools/jaeger, pinned by its go.sum.
jaeger_version=v1.75.0
if [ -x "$bin/jaeger" ] && go version -m "$bin/jaeger" 2>/dev/null | awk '$1 == "mod" { print $3 }' | grep -qx -- "$jaeger_version"; then
  echo "jaeger ${jaeger_version} present"
else
  echo "building jaeger ${jaeger_version} with go build (about 3.5 minutes the first time)"
  start=$(date +%s)
  (cd "$(dirname "$0")/go-tools/jaeger" && go build -o "$bin/jaeger" github.com/jaegertracing/jaeger/cmd/jaeger)
  echo "built jaeger in $(( $(date +%s) - start )) s"
fi

# The Prometheus Operator's own CRDs (its module holds them under example/prometheus-operator-crd), for
# kubectl-validate to check the chart's ServiceMonitor and PrometheusRule against the real schemas.
operator=github.com/prometheus-operator/prometheus-operator@v0.85.0
crds="$(go mod download -json "$operator" | awk -F'"' '$2 == "Dir" { print $4 }')/example/prometheus-operator-crd"
if [ ! -f "$crds/monitoring.coreos.com_prometheusrules.yaml" ]; then
  echo "the Prometheus Operator's CRDs are missing from $crds" >&2
  exit 1
fi
echo "prometheus-operator CRDs ${operator##*@} present"
