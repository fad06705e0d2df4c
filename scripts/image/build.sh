#!/usr/bin/env bash
# Build the trainer image and the serving image without Docker: the project's Dockerfile,
# unchanged, its default target and its `serve` target, built by buildah on a local test
# base (Debian bookworm minbase + python3 from mmdebstrap, a venv on PATH with
# tensorflow-cpu and tensorboard from PyPI), then saved as OCI archives that containerd's
# `ctr images import` and `podman load` take. Idempotent and cached: the base is rebuilt
# only when versions.env, requirements.lock or base.Containerfile change, the images only
# when Dockerfile, .dockerignore or the build context it lets in change (pyproject.toml,
# LICENSE, trainer/: what pip installs into the image; serve-requirements.lock: the
# serving image's wheels).
#
#   scripts/image/build.sh          build what is missing; stdout: the four lines below
#   scripts/image/build.sh --print  print the same four lines only (no build, no check)
#   scripts/image/build.sh --lock   regenerate the locks that no longer match their inputs:
#                                   requirements.lock (versions.env), serve-requirements.lock
#                                   (kserve of pyproject.toml's [serve] extra, resolved in the
#                                   base image); delete one to refresh it
#
# Output (stdout, nothing else; progress goes to stderr):
#   IMAGE=localhost/tfjob-trainer:<tag>      in podman/buildah storage (/var/lib/containers)
#   ARCHIVE=<cache>/trainer-<tag>/tfjob-trainer.oci.tar   OCI archive of that image, its
#            index.json names it IMAGE (org.opencontainers.image.ref.name)
#   SERVE_IMAGE=localhost/tfjob-serve:<tag>  the Dockerfile's `serve` target (+ kserve)
#   SERVE_ARCHIVE=<cache>/serve-<tag>/tfjob-serve.oci.tar  its OCI archive
# <tag> is a hash of the base key, Dockerfile, .dockerignore and every file of the build
# context: the paths .dockerignore allows (its "!" lines), without __pycache__ and *.py[co].
#
# Cache: $TFJOB_IMAGE_CACHE (default ~/.cache/tfjob-launcher/image)
#   debian-<key>/rootfs.tar   mmdebstrap output, imported as localhost/tfjob-debian:<key>
#   trainer-<tag>/, serve-<tag>/   the OCI archives, layers uncompressed (another tag's stay
#                             while a run used them in the last 2 days, at most 2 other tags of
#                             each kind: checkouts share this cache; see prune-cache.sh)
# Images: localhost/tfjob-debian:<key>, localhost/tfjob-base:<key>, localhost/tfjob-trainer:<tag>,
# localhost/tfjob-serve:<tag>.
# Needs root (mmdebstrap, buildah, podman with runc: crun fails on cgroup-hybrid hosts);
# installs buildah podman mmdebstrap runc uidmap from Debian when missing. Runs under nice 19.
# Downloads: Debian packages checked by apt against the Debian archive keyring; every
# PyPI wheel pinned by sha256 (pip --require-hashes). The host CA bundle
# (/etc/ssl/certs/ca-certificates.crt, for TLS-intercepting proxies) is a build secret
# mounted for the pip steps only (the base's and the serving image's) and never lands in a
# layer (checked after each build). The trainer image builds without network.
set -Eeuo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

cache_root="${TFJOB_IMAGE_CACHE:-$HOME/.cache/tfjob-launcher/image}"
host_ca=/etc/ssl/certs/ca-certificates.crt
lock="$here/requirements.lock"
serve_lock="$root/serve-requirements.lock"

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
  local allowed present=() path
  mapfile -t allowed < <(sed -n 's|^!\(.*[^/]\)/*$|\1|p' "$root/.dockerignore")
  ((${#allowed[@]})) || die "$root/.dockerignore allows nothing into the build context"
  for path in "${allowed[@]}"; do  # one not there (serve-requirements.lock before --lock) hashes as absent
    [[ -e "$root/$path" ]] && present+=("$path")
  done
  (cd "$root" && find "${present[@]}" -type f ! -path '*/__pycache__/*' ! -name '*.pyc' ! -name '*.pyo' -print0 \
    | LC_ALL=C sort -z | xargs -0 sha256sum)
}
tag="$( { echo "$base_key"; cat "$root/Dockerfile" "$root/.dockerignore"; context_files; } | hash12)"

debian_image="localhost/tfjob-debian:$debian_key"
base_image="localhost/tfjob-base:$base_key"
image="localhost/tfjob-trainer:$tag"
archive="$cache_root/trainer-$tag/tfjob-trainer.oci.tar"
serve_image="localhost/tfjob-serve:$tag"
serve_archive="$cache_root/serve-$tag/tfjob-serve.oci.tar"
print_images() {
  echo "IMAGE=$image"
  echo "ARCHIVE=$archive"
  echo "SERVE_IMAGE=$serve_image"
  echo "SERVE_ARCHIVE=$serve_archive"
}

if [[ "${1:-}" == "--print" ]]; then
  print_images
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

# ---- requirements.lock from versions.env, serve-requirements.lock from pyproject.toml ----
wanted="# for: tensorflow-cpu==$TENSORFLOW_CPU_VERSION tensorboard==$TENSORBOARD_VERSION"
kserve_pins="$(sed -n 's/^ *"kserve==\([^"]*\)",\{0,1\}$/\1/p' "$root/pyproject.toml" | sort -u)"
[[ -n "$kserve_pins" && "$kserve_pins" != *$'\n'* ]] \
  || die "pyproject.toml must pin kserve==VERSION once (its [serve] extra); found: ${kserve_pins:-none}"
serve_wanted="# for: kserve==$kserve_pins on requirements.lock $(hash12 <"$lock")"
write_lock() {  # write_lock IMAGE LOCK HEADER RESOLVED_FOR PYTHON PIP_INSTALL_ARGS...: pip's resolution in IMAGE
  local from=$1 target=$2 header=$3 resolved=$4 python=$5 out
  shift 5
  out="$(mktemp -d)"
  # pip resolves inside the image (its python 3.11, its platform, what it has installed), host CA read-only;
  # PYTHON "venv": a new venv's (nothing installed)
  timed "resolve $* in $from" \
    podman run --rm --network host "${run_opts[@]}" \
      --volume "$host_ca:/run/host-ca.crt:ro" --volume "$out:/out" --env PIP_CERT=/run/host-ca.crt \
      "$from" sh -c 'if [ "$0" = venv ]; then python3 -m venv /tmp/v && set -- /tmp/v/bin/python "$@"; else set -- "$0" "$@"; fi
        py=$1; shift; exec "$py" -m pip install -q --dry-run --only-binary=:all: --report /out/report.json "$@"' \
      "$python" "$@"
  {
    echo "# Generated by scripts/image/build.sh --lock; do not edit."
    echo "$header"
    echo "# Resolved for $resolved (linux x86_64); one wheel per package, pinned by sha256."
    podman run --rm --network none "${run_opts[@]}" --volume "$out:/out:ro" "$debian_image" python3 -c '
import json
for item in sorted(json.load(open("/out/report.json"))["install"], key=lambda i: i["metadata"]["name"].lower()):
    meta, sha = item["metadata"], item["download_info"]["archive_info"]["hashes"]["sha256"]
    print(meta["name"] + "==" + meta["version"] + " \\\n    --hash=sha256:" + sha)'
  } >"$target.tmp"
  rm -rf "$out"
  mv "$target.tmp" "$target"
  log "wrote $target ($(grep -c -- '--hash=' "$target") wheels)"
}
relock() {  # each lock whose header does not name its inputs any more (delete a lock to refresh it)
  build_debian
  if grep -qxF -- "$wanted" "$lock" 2>/dev/null; then
    log "$lock: matches versions.env"
  else
    write_lock "$debian_image" "$lock" "$wanted" "python3 of Debian $DEBIAN_SUITE" venv --ignore-installed \
      "tensorflow-cpu==$TENSORFLOW_CPU_VERSION" "tensorboard==$TENSORBOARD_VERSION"
    base_key="$( { echo "$debian_key"; cat "$here/versions.env" "$lock" "$here/base.Containerfile"; } | hash12)"
    base_image="localhost/tfjob-base:$base_key"
    serve_wanted="# for: kserve==$kserve_pins on requirements.lock $(hash12 <"$lock")"
  fi
  if grep -qxF -- "$serve_wanted" "$serve_lock" 2>/dev/null; then
    log "$serve_lock: matches pyproject.toml and requirements.lock"
    return
  fi
  build_base
  # what kserve needs beyond the base (its TensorFlow, numpy, protobuf, grpcio stay as they are)
  write_lock "$base_image" "$serve_lock" "$serve_wanted" "the base's /opt/venv (python3 of Debian $DEBIAN_SUITE)" \
    /opt/venv/bin/python "kserve==$kserve_pins"
}
check_locks() {
  grep -qxF -- "$wanted" "$lock" \
    || die "$lock does not match versions.env ($wanted); run scripts/image/build.sh --lock"
  grep -qxF -- "$serve_wanted" "$serve_lock" \
    || die "$serve_lock does not match pyproject.toml and requirements.lock ($serve_wanted); run scripts/image/build.sh --lock"
}

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

remove_working_containers() {  # and their overlay mounts: buildah 1.28 leaves the working container
  # of the serve stage (FROM trainer, whose image is the tagged trainer image) mounted after `bud`
  local ids
  ids="$(buildah containers --format '{{.ContainerID}} {{.ImageName}}' | awk '$2 ~ /^localhost\/tfjob-/ {print $1}')"
  if [[ -n "$ids" ]]; then
    # shellcheck disable=SC2086  # one ID per word
    buildah rm $ids >/dev/null
  fi
}

check_no_build_mounts() {  # the build-time mounts must leave nothing behind in the image
  local leftovers
  leftovers="$(podman run --rm --network none "${run_opts[@]}" --entrypoint sh "$1" -c \
    'ls -d /run/host-ca.crt /run/requirements.lock /run/tfjob-src /tmp/tfjob-src /run/pip-ca.crt \
       /run/serve-requirements.lock 2>/dev/null || true')"
  if [[ -n "$leftovers" ]]; then
    podman rmi "$1" >/dev/null || true
    die "$1 holds build-time files ($leftovers); removed it"
  fi
}

# ---- trainer and serving images: the project's Dockerfile, unchanged ----------------------
save_archive() {  # save_archive IMAGE ARCHIVE: the image as an OCI archive, written once
  if [[ ! -s "$2" ]]; then
    mkdir -p "$(dirname "$2")"
    rm -f "$2.tmp"
    timed "save $2" podman save --format oci-archive --uncompressed --output "$2.tmp" "$1"
    mv "$2.tmp" "$2"
  fi
}

build_image() {  # build_image IMAGE ARCHIVE WHAT BUILDAH_ARGS...: the Dockerfile's target, cached, saved
  local name=$1 out=$2 what=$3
  shift 3
  if podman image exists "$name"; then
    log "$name: cached"
  elif [[ -s "$out" ]]; then
    timed "load $name from $out" podman load --input "$out"
  else
    build_base
    rm -f "$out"  # an archive of an earlier build of this tag would differ in digest
    timed "build $name ($what, BASE_IMAGE=$base_image)" \
      buildah bud --pull=never "${run_opts[@]}" --layers=false "$@" \
        --build-arg "BASE_IMAGE=$base_image" -f "$root/Dockerfile" -t "$name" "$root"
    remove_working_containers
    check_no_build_mounts "$name"
  fi
  save_archive "$name" "$out"
}

prune() {  # archives of other tags (prune-cache.sh: by age and count), then images without an archive
  local line ref
  "$here/prune-cache.sh" "$cache_root" "$tag" | while IFS= read -r line; do log "$line"; done
  for ref in $(podman images --format '{{.Repository}}:{{.Tag}}' | grep -E '^localhost/tfjob-' || true); do
    case "$ref" in
      "$image" | "$serve_image" | "$base_image" | "$debian_image") ;;
      localhost/tfjob-trainer:*) [[ -d "$cache_root/trainer-${ref##*:}" ]] || podman rmi "$ref" >/dev/null 2>&1 || true ;;
      localhost/tfjob-serve:*) [[ -d "$cache_root/serve-${ref##*:}" ]] || podman rmi "$ref" >/dev/null 2>&1 || true ;;
      localhost/tfjob-base:* | localhost/tfjob-debian:*) podman rmi "$ref" >/dev/null 2>&1 || true ;;
    esac
  done
}

if [[ "${1:-}" == "--lock" ]]; then
  relock
  exit 0
fi
check_locks
start=$SECONDS
remove_working_containers  # what an interrupted earlier build left
log "cache: $cache_root (base $base_image, trainer $image, serving $serve_image)"
build_image "$image" "$archive" "Dockerfile" --network none  # the trainer: no network at all
# the `serve` target: pip downloads serve-requirements.lock's wheels, the host CA a secret
build_image "$serve_image" "$serve_archive" "Dockerfile --target serve, $(grep -c -- '--hash=' "$serve_lock") pinned wheels" \
  --network host --target serve --secret "id=pip-ca,src=$host_ca"
prune
log "images and archives ready after $((SECONDS - start))s ($(du -h "$archive" | cut -f1) and $(du -h "$serve_archive" | cut -f1))"
print_images
