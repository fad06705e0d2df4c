#!/usr/bin/env bash
# Build the real node of `scripts/node` and the node test tier once per machine: kubelet
# (through the control plane's wrapper module), containerd + its runc shim + ctr, runc
# (cgo, seccomp) and a slim CoreDNS, from the Go module proxy; plus the Debian packages the
# node uses as they are (CNI plugins, catatonit as the pause image). Versions: one file,
# scripts/controlplane/versions.env. Idempotent: a binary already in the bin dir is kept.
#
# CoreDNS is built with only the plugins of the node's Corefile (k8s/node/Corefile.j2),
# from a generated main package (upstream's coredns.go, with dnsserver.Directives filtered
# in upstream's plugin.cfg order: the way coredns.io documents for a build with chosen
# plugins). A directive added to the Corefile is built in by the next run. Cold (empty Go
# caches, 2 cores, nice 10, other tests sharing them at load average 1.5-7.6), measured
# twice each: upstream's full `go install` 276 s and 381 s (194 modules, 77 MB), the slim
# one 125 s and 135 s (69 modules, 52 MB; 295 of its 554 non-std packages are the
# kubernetes plugin's k8s.io clients). `coredns.stamp` beside the bin dir records the
# version and plugins; a CoreDNS without a matching stamp (e.g. an older full build) is
# rebuilt, the other binaries are kept (the cache key stays).
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
bin_dirs "$cache_root" "$key" "${1:-}"  # lib.sh: bin, staging; --bin-dir
coredns_stamp="$cache_root/$key/coredns.stamp"
corefile="$here/../../k8s/node/Corefile.j2"

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

coredns_plugins() {  # the directives of the node's Corefile: words opening a line inside a server block
  awk '{ sub(/#.*/, ""); gsub(/\{\{[^}]*\}\}/, "x"); gsub(/\{%[^%]*%\}/, "")
         if (depth == 1 && NF && $1 !~ /^[{}]/) print $1
         depth += gsub(/\{/, "{") - gsub(/\}/, "}") }' "$corefile" | sort -u
}

coredns_module() {  # coredns_module DIR PLUGIN...: write the main module of a CoreDNS with these plugins only
  local mod=$1 upstream line name pkg
  shift
  local -A wanted=()
  for name in "$@"; do wanted[$name]=1; done
  mkdir -p "$mod"
  upstream="$(cd "$mod" && go mod download -json "github.com/coredns/coredns@$COREDNS_VERSION" \
    | sed -n 's/^\s*"Dir": "\(.*\)",$/\1/p')"
  local imports=() directives=()
  while IFS= read -r line; do  # plugin.cfg: NAME:PACKAGE in execution order (upstream's go generate input)
    [[ "$line" == \#* || "$line" != *:* ]] && continue
    name="${line%%:*}" pkg="${line#*:}"
    [[ -n "${wanted[$name]:-}" ]] || continue
    unset "wanted[$name]"
    directives+=("$name")
    if [[ -d "$upstream/plugin/$pkg" ]]; then imports+=("github.com/coredns/coredns/plugin/$pkg"); else imports+=("$pkg"); fi
  done <"$upstream/plugin.cfg"
  if [[ ${#wanted[@]} -gt 0 ]]; then
    echo "build.sh: $corefile uses ${!wanted[*]}, not a plugin of CoreDNS $COREDNS_VERSION (its plugin.cfg)" >&2
    exit 1
  fi
  {
    echo "// Generated by scripts/node/build.sh: CoreDNS $COREDNS_VERSION with the plugins of k8s/node/Corefile.j2."
    echo "module tfjob-launcher.local/coredns"
    echo
    echo "go $(sed -n 's/^go //p' "$upstream/go.mod")"
    echo
    echo "require github.com/coredns/coredns $COREDNS_VERSION"
  } >"$mod/go.mod"
  {
    echo "// Generated by scripts/node/build.sh: upstream's coredns.go with only the plugins of"
    echo "// k8s/node/Corefile.j2, run in upstream's order (plugin.cfg, core/dnsserver/zdirectives.go)."
    echo "package main"
    echo
    echo "import ("
    printf '\t"github.com/coredns/coredns/core/dnsserver"\n\t"github.com/coredns/coredns/coremain"\n\n'
    printf '\t_ "%s"\n' "${imports[@]}" | sort
    echo ")"
    echo
    echo "func init() {"
    echo "	dnsserver.Directives = []string{"
    printf '\t\t"%s",\n' "${directives[@]}"
    echo "	}"
    echo "}"
    echo
    echo "func main() {"
    echo "	coremain.Run()"
    echo "}"
  } >"$mod/main.go"
  echo "$mod"
}

build_coredns() {  # the slim CoreDNS, rebuilt when its stamp (version, plugins) differs
  local plugins stamp mod
  mapfile -t plugins < <(coredns_plugins)
  if [[ ${#plugins[@]} -eq 0 ]]; then echo "build.sh: no plugin directive found in $corefile" >&2; exit 1; fi
  stamp="CoreDNS $COREDNS_VERSION slim, plugins: ${plugins[*]}"
  if have coredns && [[ "$(cat "$coredns_stamp" 2>/dev/null)" == "$stamp" ]]; then log "coredns: cached ($stamp)"; return; fi
  mod="$(coredns_module "$cache_root/$key/coredns-mod" "${plugins[@]}")"
  (cd "$mod" && CGO_ENABLED=0 timed "build coredns $COREDNS_VERSION with ${plugins[*]}" \
     go build -mod=mod -ldflags "-s -w" -o "$staging/coredns" .)
  publish coredns
  echo "$stamp" >"$coredns_stamp"
}

start=$SECONDS
log "bin dir: $bin ($(go version), go build -p $jobs, nice 19)"
debian_packages
ctd=github.com/containerd/containerd/v2/cmd
for cmd in containerd containerd-shim-runc-v2 ctr; do
  go_install 0 "" "$ctd/$cmd@$CONTAINERD_VERSION" "$cmd"
done
go_install 1 seccomp "github.com/opencontainers/runc@$RUNC_VERSION" runc
build_coredns
build_kubelet  # last: with a control plane just built, most of its packages are in Go's cache
log "all node binaries present after $((SECONDS - start))s"
ls -l "$bin"
echo "$bin"
