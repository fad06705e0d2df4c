#!/usr/bin/env bash
# scripts/image/prune-cache.sh CACHE TAG: remove the archive folders (trainer-<t>/, serve-<t>/)
# of tags other than TAG that no build used in the last KEEP_DAYS days, and of each kind all
# but the KEEP_OTHERS most recently used other tags. An archive is about 2 GB, and each
# change to the trainer's sources is a new tag: without the count, a day of changes filled
# the disk, and a node on a nearly full disk evicts its imported images. TAG's folders are
# touched first (used now; other checkouts sharing the cache touch theirs when they build).
# Prints one line per folder removed. Called by build.sh after each build.
# Env: TFJOB_IMAGE_KEEP_DAYS (default 2), TFJOB_IMAGE_KEEP_OTHERS (default 2).
set -Eeuo pipefail

if [[ $# -ne 2 || ! -d "$1" ]]; then
  echo "usage: scripts/image/prune-cache.sh CACHE_DIR TAG" >&2
  exit 2
fi
cache="$1" tag="$2"
keep_days="${TFJOB_IMAGE_KEEP_DAYS:-2}"
keep_others="${TFJOB_IMAGE_KEEP_OTHERS:-2}"
for value in "$keep_days" "$keep_others"; do
  [[ "$value" =~ ^[0-9]+$ ]] || { echo "scripts/image/prune-cache.sh: TFJOB_IMAGE_KEEP_DAYS and TFJOB_IMAGE_KEEP_OTHERS take whole numbers, not '$value'" >&2; exit 2; }
done

others() {  # others KIND: the other tags' folders of KIND, most recently used first
  find "$cache" -mindepth 1 -maxdepth 1 -type d -name "$1-*" ! -name "$1-$tag" -printf '%T@ %p\n' \
    | sort -rn | cut -d' ' -f2-
}

for kind in trainer serve; do
  if [[ -d "$cache/$kind-$tag" ]]; then touch "$cache/$kind-$tag"; fi
  while IFS= read -r -d '' old; do
    echo "prune $old (unused for $keep_days days)"
    rm -rf "$old"
  done < <(find "$cache" -mindepth 1 -maxdepth 1 -type d -name "$kind-*" ! -name "$kind-$tag" \
             -mtime "+$keep_days" -print0)
  while IFS= read -r old; do
    echo "prune $old (only the $keep_others most recently used other tags are kept)"
    rm -rf "$old"
  done < <(others "$kind" | tail -n "+$((keep_others + 1))")
done
