#!/usr/bin/env bash
# Build the real node of `scripts/node` and the node test tier once per machine: kubelet
# (through the control plane's wrapper module), containerd + its runc shim + ctr, runc
# (cgo, seccomp) and CoreDNS, from the Go module proxy; plus the Debian packages the node
# uses as they are (CNI plugins, catatonit as the pause image). Versions: one file,
# scripts/controlplane/versions.env. Idempotent: a binary already in the bin dir is kept.
#
#   scripts/node/build.sh            build what is missing, print the bin dir last
#   scripts/node/build.sh --bin-dir  print the bin dir only
#
# Cache: $TFJOB_NODE_CACHE (default ~/.cache/tfjob-launcher/node)/<key>/bin, <key> named
# after the versions. Builds run under `nice -n 19`; NODE_BUILD_JOBS sets go build -p.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cp_dir="$here/../controlplane"
# shellcheck source=../controlplane/versions.env
source "$cp_dir/versions.env"
# shellcheck source=../controlplane/lib.sh
source "$cp_dir/lib.sh"
LOG_PREFIX=node

cache_root="${TFJOB_NODE_CACHE:-$HOME/.cache/tfjob-launcher/node}"
key="kubelet-${KUBERNETES_VERSION}_containerd-${CONTAINERD_VERSION}_runc-${RUNC_VERSION}_coredns-${COREDNS_VERSION}"
bin="$cache_root/$key/bin"
staging="$cache_root/$key/staging"

if [[ "${1:-}" == "--bin-dir" ]]; then
  echo "$bin"
  exit 0
fi

debian_packages() {  # install the Debian packages the node needs when one is missing
  local missing=()
  for pkg in $NODE_DEBIAN_PACKAGES; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done
  if [[ ${#missing[@]} -eq 0 ]]; then log "debian packages: present"; return; fi
  if [[ $EUID -ne 0 ]] || ! command -v apt-get >/dev/null; then
    echo "build.sh: missing Debian packages ${missing[*]}: install them (apt-get install ${missing[*]})" >&2
    exit 2
  fi
  timed "apt-get update" apt-get -o DPkg::Lock::Timeout=600 update -qq
  timed "apt-get install ${missing[*]}" env DEBIAN_FRONTEND=noninteractive \
    apt-get -o DPkg::Lock::Timeout=600 install -y --no-install-recommends "${missing[@]}"
}

require_go  # lib.sh
jobs="${NODE_BUILD_JOBS:-$(nproc)}"
export GOFLAGS="-p=$jobs -buildvcs=false" GOTOOLCHAIN=local
mkdir -p "$bin" "$staging"
have() { for b in "$@"; do [[ -x "$bin/$b" ]] || return 1; done; }
publish() { for b in "$@"; do mv -f "$staging/$b" "$bin/$b"; done; }

build_kubelet() {  # the same wrapper module and version stamps as the control plane's binaries
  if have kubelet; then log "kubelet $KUBERNETES_VERSION: cached"; return; fi
  local cp_cache="${TFJOB_CONTROLPLANE_CACHE:-$HOME/.cache/tfjob-launcher/controlplane}" mod ldflags
  mod="$(k8s_module "$cp_cache/kubelet-${KUBERNETES_VERSION}/k8s-mod")"
  ldflags="$(k8s_ldflags)"
  (cd "$mod" && CGO_ENABLED=0 timed "build kubelet $KUBERNETES_VERSION" \
     go build -mod=mod -ldflags "$ldflags" -o "$staging/kubelet" k8s.io/kubernetes/cmd/kubelet)
  publish kubelet
}

go_install() {  # go_install CGO TAGS PACKAGE@VERSION BINARY...
  local cgo=$1 tags=$2 package=$3
  shift 3
  if have "$@"; then log "$*: cached"; return; fi
  CGO_ENABLED=$cgo GOBIN="$staging" timed "build $*" go install -ldflags "-s -w" -tags "$tags" "$package"
  publish "$@"
}

start=$SECONDS
log "bin dir: $bin ($(go version), go build -p $jobs, nice 19)"
debian_packages
ctd=github.com/containerd/containerd/v2/cmd
for cmd in containerd containerd-shim-runc-v2 ctr; do
  go_install 0 "" "$ctd/$cmd@$CONTAINERD_VERSION" "$cmd"
done
go_install 1 seccomp "github.com/opencontainers/runc@$RUNC_VERSION" runc
go_install 0 "" "github.com/coredns/coredns@$COREDNS_VERSION" coredns
build_kubelet  # last: with a control plane just built, most of its packages are in Go's cache
log "all node binaries present after $((SECONDS - start))s"
ls -l "$bin"
echo "$bin"
