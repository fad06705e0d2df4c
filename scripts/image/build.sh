#!/usr/bin/env bash
# Build the trainer image without Docker: the project's Dockerfile, unchanged, built by
# buildah on a local test base (Debian bookworm minbase + python3 from mmdebstrap, a venv on
# PATH with tensorflow-cpu and tensorboard from PyPI), then saved as an OCI archive that
# containerd's `ctr images import` and `podman load` take. Idempotent and cached: the base
# is rebuilt only when versions.env, requirements.lock or base.Containerfile change, the
# trainer layer only when Dockerfile, .dockerignore or the build context it lets in change
# (pyproject.toml, LICENSE, trainer/: what pip installs into the image).
#
#   scripts/image/build.sh          build what is missing; stdout: IMAGE=... and ARCHIVE=...
#   scripts/image/build.sh --print  print the same two lines only (no build, no check)
#   scripts/image/build.sh --lock   regenerate requirements.lock from versions.env
#
# Output (stdout, nothing else; progress goes to stderr):
#   IMAGE=localhost/tfjob-trainer:<tag>      in podman/buildah storage (/var/lib/containers)
#   ARCHIVE=<cache>/trainer-<tag>/tfjob-trainer.oci.tar   OCI archive of that image, its
#            index.json names it IMAGE (org.opencontainers.image.ref.name)
# <tag> is a hash of the base key, Dockerfile, .dockerignore and every file of the build
# context: the paths .dockerignore allows (its "!" lines), without __pycache__ and *.py[co].
#
# Cache: $TFJOB_IMAGE_CACHE (default ~/.cache/tfjob-launcher/image)
#   debian-<key>/rootfs.tar   mmdebstrap output, imported as localhost/tfjob-debian:<key>
#   trainer-<tag>/            the OCI archive, layers uncompressed (one older tag is kept)
# Images: localhost/tfjob-debian:<key>, localhost/tfjob-base:<key>, localhost/tfjob-trainer:<tag>.
# Needs root (mmdebstrap, buildah, podman with runc: crun fails on cgroup-hybrid hosts);
# installs buildah podman mmdebstrap runc uidmap from Debian when missing. Runs under nice 19.
# Downloads: Debian packages checked by apt against the Debian archive keyring; every
# PyPI wheel pinned by sha256 (pip --require-hashes). The host CA bundle
# (/etc/ssl/certs/ca-certificates.crt, for TLS-intercepting proxies) is a build secret
# mounted for the pip step only and never lands in a layer (checked after each build).
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

cache_root="${TFJOB_IMAGE_CACHE:-$HOME/.cache/tfjob-launcher/image}"
host_ca=/etc/ssl/certs/ca-certificates.crt
lock="$here/requirements.lock"

trap 'echo "scripts/image/build.sh: failed (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
die() { echo "scripts/image/build.sh: $*" >&2; exit 1; }
log() { printf '[image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
timed() {  # timed LABEL CMD...: run a step niced, its output on stderr, and say how long it took
  local label=$1 start=$SECONDS
  shift
  log "$label"
  nice -n 19 "$@" >&2
  log "$label: done in $((SECONDS - start))s"
}
hash12() { sha256sum | cut -c1-12; }

# ---- keys: what each image depends on ---------------------------------------------------
debian_key="$(printf '%s\n' "$DEBIAN_SUITE" "$DEBIAN_MIRROR" "$DEBIAN_PACKAGES" | hash12)"
base_key="$( { echo "$debian_key"; cat "$here/versions.env" "$lock" "$here/base.Containerfile"; } | hash12)"
context_files() {  # what .dockerignore lets into the build context, as "sha256  path" lines
  local allowed
  mapfile -t allowed < <(sed -n 's|^!\(.*[^/]\)/*$|\1|p' "$root/.dockerignore")
  ((${#allowed[@]})) || die "$root/.dockerignore allows nothing into the build context"
  (cd "$root" && find "${allowed[@]}" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' ! -name '*.pyo' -print0 \
    | LC_ALL=C sort -z | xargs -0 sha256sum)
}
tag="$( { echo "$base_key"; cat "$root/Dockerfile" "$root/.dockerignore"; context_files; } | hash12)"

debian_image="localhost/tfjob-debian:$debian_key"
base_image="localhost/tfjob-base:$base_key"
image="localhost/tfjob-trainer:$tag"
archive="$cache_root/trainer-$tag/tfjob-trainer.oci.tar"

if [[ "${1:-}" == "--print" ]]; then
  echo "IMAGE=$image"
  echo "ARCHIVE=$archive"
  exit 0
fi
[[ $# -eq 0 || "$1" == "--lock" ]] || die "unknown argument $1 (use --print or --lock)"

# ---- tools -------------------------------------------------------------------------------
[[ $EUID -eq 0 ]] || die "needs root (mmdebstrap, buildah and podman with runc); run it with sudo"
missing=()
for pair in buildah:buildah podman:podman mmdebstrap:mmdebstrap runc:runc newuidmap:uidmap; do
  command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
done
if ((${#missing[@]})); then
  timed "apt-get install ${missing[*]}" \
    env DEBIAN_FRONTEND=noninteractive sh -c \
    "apt-get update -q && apt-get install -y -q --no-install-recommends ${missing[*]}"
fi
runc_path="$(command -v runc)"
[[ -s "$host_ca" ]] || die "no CA bundle at $host_ca (install ca-certificates)"
# Build containers share the host network (no bridge, no iptables rule on this machine).
run_opts=(--runtime "$runc_path" --ulimit nofile=20000:20000 --ulimit nproc=4096:4096)

mkdir -p "$cache_root"
exec 9>"$cache_root/.lock"
flock -w 3600 9 || die "another build.sh holds $cache_root/.lock for over an hour"

# ---- debian: mmdebstrap minbase + python3 -----------------------------------------------
build_debian() {
  if podman image exists "$debian_image"; then log "$debian_image: cached"; return; fi
  local dir="$cache_root/debian-$debian_key"
  if [[ ! -s "$dir/rootfs.tar" ]]; then
    mkdir -p "$dir"
    rm -f "$dir/rootfs.tmp.tar"
    timed "mmdebstrap $DEBIAN_SUITE minbase + $DEBIAN_PACKAGES" \
      mmdebstrap --variant=minbase --include="$DEBIAN_PACKAGES" --aptopt='Acquire::Retries "3"' \
        "$DEBIAN_SUITE" "$dir/rootfs.tmp.tar" "$DEBIAN_MIRROR"
    mv "$dir/rootfs.tmp.tar" "$dir/rootfs.tar"
  fi
  timed "import $debian_image" podman import --message "mmdebstrap $DEBIAN_SUITE minbase + $DEBIAN_PACKAGES" \
    "$dir/rootfs.tar" "$debian_image"
}

# ---- requirements.lock from versions.env ---------------------------------------------------
wanted="# for: tensorflow-cpu==$TENSORFLOW_CPU_VERSION tensorboard==$TENSORBOARD_VERSION"
relock() {
  build_debian
  local out
  out="$(mktemp -d)"
  # pip resolves inside the Debian image (its python 3.11, its platform), host CA read-only.
  timed "resolve tensorflow-cpu==$TENSORFLOW_CPU_VERSION tensorboard==$TENSORBOARD_VERSION" \
    podman run --rm --network host "${run_opts[@]}" \
      --volume "$host_ca:/run/host-ca.crt:ro" --volume "$out:/out" --env PIP_CERT=/run/host-ca.crt \
      "$debian_image" sh -c 'python3 -m venv /tmp/v && /tmp/v/bin/pip install -q --dry-run --ignore-installed \
        --only-binary=:all: --report /out/report.json "$@"' sh \
      "tensorflow-cpu==$TENSORFLOW_CPU_VERSION" "tensorboard==$TENSORBOARD_VERSION"
  {
    echo "# Generated by scripts/image/build.sh --lock from versions.env; do not edit."
    echo "$wanted"
    echo "# Resolved for python3 of Debian $DEBIAN_SUITE (linux x86_64); one wheel per package, pinned by sha256."
    podman run --rm --network none "${run_opts[@]}" --volume "$out:/out:ro" "$debian_image" python3 -c '
import json
for item in sorted(json.load(open("/out/report.json"))["install"], key=lambda i: i["metadata"]["name"].lower()):
    meta, sha = item["metadata"], item["download_info"]["archive_info"]["hashes"]["sha256"]
    print(meta["name"] + "==" + meta["version"] + " \\\n    --hash=sha256:" + sha)'
  } >"$lock.tmp"
  rm -rf "$out"
  mv "$lock.tmp" "$lock"
  log "wrote $lock ($(grep -c -- '--hash=' "$lock") wheels)"
}
if [[ "${1:-}" == "--lock" ]]; then
  relock
  exit 0
fi
grep -qxF -- "$wanted" "$lock" \
  || die "$lock does not match versions.env ($wanted); run scripts/image/build.sh --lock"

# ---- base: venv with tensorflow-cpu + tensorboard ----------------------------------------
build_base() {
  if podman image exists "$base_image"; then log "$base_image: cached"; return; fi
  build_debian
  timed "build $base_image (pip install, $(grep -c -- '--hash=' "$lock") pinned wheels)" \
    buildah bud --pull=never --network host "${run_opts[@]}" --layers=false \
      --secret "id=hostca,src=$host_ca" \
      --build-arg "DEBIAN_IMAGE=$debian_image" -f "$here/base.Containerfile" -t "$base_image" "$here"
  check_no_build_mounts "$base_image"
}

check_no_build_mounts() {  # the build-time mounts must leave nothing behind in the image
  local leftovers
  leftovers="$(podman run --rm --network none "${run_opts[@]}" --entrypoint sh "$1" -c \
    'ls -d /run/host-ca.crt /run/requirements.lock /run/tfjob-src /tmp/tfjob-src 2>/dev/null || true')"
  if [[ -n "$leftovers" ]]; then
    podman rmi "$1" >/dev/null || true
    die "$1 holds build-time files ($leftovers); removed it"
  fi
}

# ---- trainer: the project's Dockerfile, unchanged ------------------------------------------
build_trainer() {
  if podman image exists "$image"; then
    log "$image: cached"
  elif [[ -s "$archive" ]]; then
    timed "load $image from $archive" podman load --input "$archive"
  else
    build_base
    rm -f "$archive"  # an archive of an earlier build of this tag would differ in digest
    timed "build $image (Dockerfile, BASE_IMAGE=$base_image)" \
      buildah bud --pull=never --network none "${run_opts[@]}" --layers=false \
        --build-arg "BASE_IMAGE=$base_image" -f "$root/Dockerfile" -t "$image" "$root"
    check_no_build_mounts "$image"
  fi
  if [[ ! -s "$archive" ]]; then
    mkdir -p "$(dirname "$archive")"
    rm -f "$archive.tmp"
    timed "save $archive" podman save --format oci-archive --uncompressed --output "$archive.tmp" "$image"
    mv "$archive.tmp" "$archive"
  fi
}

prune() {  # keep this tag's archive and the newest other one; images without an archive go
  local old others ref kept=0
  # shellcheck disable=SC2012  # newest first; the names are hex tags
  mapfile -t others < <(ls -1dt "$cache_root"/trainer-*)
  for old in "${others[@]}"; do
    [[ "$old" != "$cache_root/trainer-$tag" ]] || continue
    if ((kept++ == 0)); then continue; fi
    log "prune $old"
    rm -rf "$old"
  done
  for ref in $(podman images --format '{{.Repository}}:{{.Tag}}' | grep -E '^localhost/tfjob-' || true); do
    case "$ref" in
      "$image" | "$base_image" | "$debian_image") ;;
      localhost/tfjob-trainer:*) [[ -d "$cache_root/trainer-${ref##*:}" ]] || podman rmi "$ref" >/dev/null 2>&1 || true ;;
      localhost/tfjob-base:* | localhost/tfjob-debian:*) podman rmi "$ref" >/dev/null 2>&1 || true ;;
    esac
  done
}

start=$SECONDS
log "cache: $cache_root (base $base_image, trainer $image)"
build_trainer
prune
log "image and archive ready after $((SECONDS - start))s ($(du -h "$archive" | cut -f1) archive)"
echo "IMAGE=$image"
echo "ARCHIVE=$archive"
