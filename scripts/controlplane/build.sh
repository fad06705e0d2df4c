#!/usr/bin/env bash
# Build the e2e control plane once per machine: etcd, kube-apiserver, kube-scheduler,
# kube-controller-manager (from k8s.io/kubernetes through a wrapper module), Kubeflow
# training-operator and KWOK. Idempotent: a binary already in the bin dir is kept.
#
#   scripts/controlplane/build.sh            build what is missing, print the bin dir last
#   scripts/controlplane/build.sh --bin-dir  print the bin dir only
#
# Cache: $TFJOB_CONTROLPLANE_CACHE (default ~/.cache/tfjob-launcher/controlplane)
#   <key>/bin/      the binaries, <key> named after versions.env
#   <key>/staging/  where a build writes before its binaries move to bin/
#   <key>/k8s-mod/  the generated wrapper Go module (go.mod, go.sum)
# Go's own module and build caches (go env GOMODCACHE, GOCACHE) are kept as they are.
# Builds run under `nice -n 19`; CONTROLPLANE_BUILD_JOBS sets go build -p (default: nproc).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=lib.sh
source "$here/lib.sh"
LOG_PREFIX=controlplane

cache_root="${TFJOB_CONTROLPLANE_CACHE:-$HOME/.cache/tfjob-launcher/controlplane}"
key="k8s-${KUBERNETES_VERSION}_training-operator-${TRAINING_OPERATOR_VERSION}_kwok-${KWOK_VERSION}"
bin_dirs "$cache_root" "$key" "${1:-}"  # lib.sh: bin, staging; --bin-dir

require_go  # lib.sh
jobs="${CONTROLPLANE_BUILD_JOBS:-$(nproc)}"
export CGO_ENABLED=0 GOFLAGS="-p=$jobs -buildvcs=false" GOTOOLCHAIN=local
mkdir -p "$bin" "$staging"

have() { for b in "$@"; do [[ -x "$bin/$b" ]] || return 1; done; }

build_kubernetes() {
  local cmds=(etcd kube-apiserver kube-scheduler kube-controller-manager)
  if have "${cmds[@]}"; then log "kubernetes $KUBERNETES_VERSION + etcd: cached"; return; fi
  local mod
  mod="$(k8s_module "$cache_root/$key/k8s-mod")"
  local v="$KUBERNETES_VERSION"
  local ldflags
  ldflags="$(k8s_ldflags)"
  local pkgs=(k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-scheduler
              k8s.io/kubernetes/cmd/kube-controller-manager)
  (
    cd "$mod"
    # -mod=mod: take every module at the version kubernetes pins and record go.sum; no upgrades
    timed "build etcd (the version kubernetes $v pins)" \
      go build -mod=mod -ldflags "-s -w" -o "$staging/etcd" go.etcd.io/etcd/server/v3
    timed "build kubernetes $v" go build -mod=mod -ldflags "$ldflags" -o "$staging/" "${pkgs[@]}"
  )
  publish "${cmds[@]}"
}

publish() {  # move finished binaries into the bin dir, so it never holds a half-written one
  for b in "$@"; do mv -f "$staging/$b" "$bin/$b"; done
}

go_install() {  # go_install BINARY PACKAGE@VERSION
  if have "$1"; then log "$1: cached"; return; fi
  GOBIN="$staging" timed "build $1" go install "$2"
  publish "$1"
}

start=$SECONDS
log "bin dir: $bin ($(go version), go build -p $jobs, nice 19)"
build_kubernetes
go_install training-operator.v1 "github.com/kubeflow/training-operator/cmd/training-operator.v1@$TRAINING_OPERATOR_VERSION"
go_install kwok "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
# the module launcher/schemas takes KServe's InferenceService CRD from (scripts/crds/update.py):
# in the Go module cache, tests/unit/test_schemas.py compares the packaged copy with it
kserve_module="github.com/kserve/kserve@$KSERVE_VERSION"
if [[ -d "$(go env GOMODCACHE)/$kserve_module" ]]; then
  log "$kserve_module: in the Go module cache"
else
  timed "download $kserve_module" go mod download "$kserve_module"
fi
log "all binaries present after $((SECONDS - start))s"
ls -l "$bin"
echo "$bin"
