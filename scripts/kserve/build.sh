#!/usr/bin/env bash
# Build the KServe controller (github.com/kserve/kserve cmd/manager, KSERVE_VERSION of
# scripts/controlplane/versions.env) from the Go module proxy, once per machine: the node
# test tier and `scripts/node/up --kserve` run it beside the control plane, in Standard
# (raw Deployment) mode. Idempotent: a binary already in the bin dir is kept.
#
# Built as upstream's Dockerfile builds it (CGO_ENABLED=0, -mod=readonly, `go build
# ./cmd/manager` in the module's own root): KServe's go.mod has replace directives, which
# `go install MODULE@VERSION` refuses, and building in the downloaded module itself keeps
# its go.mod and go.sum exactly (every dependency checked against upstream's sums).
#
#   scripts/kserve/build.sh            build what is missing, print the bin dir last
#   scripts/kserve/build.sh --bin-dir  print the bin dir only
#
# Cache: $TFJOB_KSERVE_CACHE (default ~/.cache/tfjob-launcher/kserve)/<version>/bin/kserve-manager.
# Go's own module and build caches (go env GOMODCACHE, GOCACHE) are kept as they are.
# Builds run under `nice -n 19`; KSERVE_BUILD_JOBS sets go build -p (default: nproc).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cp_dir="$here/../controlplane"
# shellcheck source=../controlplane/versions.env
source "$cp_dir/versions.env"
# shellcheck source=../controlplane/lib.sh
source "$cp_dir/lib.sh"
LOG_PREFIX=kserve

cache_root="${TFJOB_KSERVE_CACHE:-$HOME/.cache/tfjob-launcher/kserve}"
bin_dirs "$cache_root" "kserve-$KSERVE_VERSION" "${1:-}"  # lib.sh: bin, staging; --bin-dir
[[ $# -eq 0 ]] || { echo "scripts/kserve/build.sh: unknown argument $1 (use --bin-dir)" >&2; exit 2; }

require_go  # lib.sh
jobs="${KSERVE_BUILD_JOBS:-$(nproc)}"
export CGO_ENABLED=0 GOFLAGS="-p=$jobs -buildvcs=false -mod=readonly" GOTOOLCHAIN=local
mkdir -p "$bin" "$staging"

start=$SECONDS
log "bin dir: $bin ($(go version), go build -p $jobs, nice 19)"
if [[ -x "$bin/kserve-manager" ]]; then
  log "kserve-manager $KSERVE_VERSION: cached"
else
  module="github.com/kserve/kserve@$KSERVE_VERSION"
  dir="$(go mod download -json "$module" | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')"
  [[ -f "$dir/go.mod" ]] || { echo "scripts/kserve/build.sh: go mod download $module gave no module dir" >&2; exit 1; }
  # the module cache is read-only: -mod=readonly reads go.mod and go.sum there and writes nothing
  (cd "$dir" && timed "build kserve-manager $KSERVE_VERSION" go build -ldflags "-s -w" \
     -o "$staging/kserve-manager" ./cmd/manager)
  mv -f "$staging/kserve-manager" "$bin/kserve-manager"
fi
log "kserve-manager present after $((SECONDS - start))s"
ls -l "$bin"
echo "$bin"
