"""What the trainer's commands write (`--out`): why a local path cannot be written, said
before any work (it was a traceback after the download or the reading). Stdout (`-`) and
URLs (gs://) are left to the write."""
from __future__ import annotations

import os


def unwritable_file(out: str, example: str) -> str | None:
    """Why the local file `out` cannot be written, or None; `example`: the file name offered
    in `out` when it is a directory."""
    if out == "-" or "://" in out:
        return None
    if os.path.isdir(out):
        return f"{out} is a directory; give a file in it, e.g. {os.path.join(out, example)}"
    folder = os.path.dirname(out) or "."
    if problem := _blocked(folder):
        return problem
    if not os.path.isdir(folder):  # its write makes no folders
        return f"its folder {folder} does not exist; create it or give another path"
    return None


def unwritable_dir(out: str) -> str | None:
    """Why the local directory `out` cannot be written into, or None; a missing one is made
    with its parents (tf.io.gfile.makedirs)."""
    if out == "-" or "://" in out:
        return None
    return _blocked(out.rstrip("/") or "/")


def _blocked(path: str) -> str | None:
    """Why `path`, or the dirs made on the way to it, cannot be written: the nearest of them
    that exists is a file, or a directory this process cannot write in."""
    base = path
    while not os.path.lexists(base):
        base = os.path.dirname(base) or "."
    if not os.path.isdir(base):
        return f"{base} is not a directory; give another path"
    if not os.access(base, os.W_OK | os.X_OK):
        return f"cannot write in {base} (permission denied); give a path you can write in"
    return None
