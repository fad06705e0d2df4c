"""`predict`: instances in, predictions out, as `gcloud ml-engine predict` and
`gcloud ai-platform jobs submit prediction` do it.

- `--json-instances FILE`: one JSON instance per line; the answer is printed as a table,
  one line per instance, one column per output (`key` first, then by name), numbers at
  full precision (the server's JSON values, unrounded). `--text-instances FILE`: each line
  one string instance; `--json-request FILE`: one request body. As gcloud, `-` is stdin
  and a UTF-8 byte order mark is no part of the first line.
- `--input-paths PATTERN[,PATTERN] --output-path DIR`: every line of every matching file,
  sent in batches; `DIR/prediction.results-00000-of-00001` gets one JSON line per instance
  and `DIR/prediction.errors_stats-00000-of-00001` one line per failed batch (the names of
  `gcloud ai-platform jobs submit prediction`'s output, in one shard). Local paths or gs://
  (gcs.py: the google-cloud-storage client). Both files are written once, after the last
  batch (errors first, results last), so a failed or interrupted run leaves no results file.

Without --signature-name, when an instance's fields are not the inputs of
`serving_default` but are exactly those of one other signature (e.g. `image` alone for the
MNIST export's `unkeyed`; its `serving_default` takes `image` and `key`), or the instances
are bare values and exactly one signature has a single input, that signature is used, and
said on stderr.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator

from trainer.serve import body_key

from ..backends.base import BackendError
from ..events import terminal_safe
from ..spec import SpecError
from . import client, gcs

RESULTS = "prediction.results-00000-of-00001"
ERRORS = "prediction.errors_stats-00000-of-00001"


_UNREADABLE = (FileNotFoundError, IsADirectoryError, PermissionError, UnicodeDecodeError)


def _unreadable(path: str, flag: str, error: Exception, what: str) -> SpecError:
    return SpecError(flag, f"cannot read {path} ({error.__class__.__name__}); pass {what}")


STDIN = "-"  # gcloud's name for standard input (--json-instances, --text-instances, --json-request)


def where(path: str) -> str:
    """How a file is named in messages: stdin for `-`."""
    return "stdin" if path == STDIN else path


def _stdin(flag: str, what: str) -> str:
    try:
        return sys.stdin.buffer.read().decode("utf-8-sig")
    except UnicodeDecodeError:
        raise SpecError(flag, f"cannot read stdin (not UTF-8 text); pass {what}") from None


def _text(path: str, flag: str, storage=None, what: str = "a file with one request body") -> str:
    """A whole file, local, gs:// or stdin (`-`), without a UTF-8 byte order mark (as gcloud reads it)."""
    if gcs.is_gcs(path):
        return gcs.read_text(path, flag, storage)
    if path == STDIN:
        return _stdin(flag, what)
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except _UNREADABLE as error:
        raise _unreadable(path, flag, error, what) from None


def _lines(path: str, flag: str, storage=None) -> Iterator[tuple[int, str]]:
    if gcs.is_gcs(path) or path == STDIN:
        text = _text(path, flag, storage, "a file of one instance per line")
        # "\n" only, as reading a local file does (str.splitlines would also split at U+2028 inside a string)
        yield from ((number, line) for number, line in enumerate(text.split("\n"), 1) if line.strip())
        return
    try:
        with open(path, encoding="utf-8-sig") as handle:
            for number, line in enumerate(handle, 1):
                if line.strip():
                    yield number, line
    except _UNREADABLE as error:
        raise _unreadable(path, flag, error, "a file of one instance per line") from None


def read_placed(path: str, flag: str = "--json-instances", storage=None, text: bool = False
                ) -> list[tuple[str, object]]:
    """Every instance of a JSON-lines file, local, gs:// or stdin (`-`), with where it is
    ("FILE line N"); SpecError naming the line for a bad one. `text`: gcloud's
    --text-instances, each line one string instance (its line end left out)."""
    placed = []
    for number, line in _lines(path, flag, storage):
        if text:
            placed.append((f"{where(path)} line {number}", line.rstrip("\r\n")))
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as error:
            raise SpecError(flag, f"{where(path)} line {number} is not JSON ({error.msg}); write one JSON "
                            "instance per line") from None
        if key := body_key(value):
            raise SpecError(flag, f"{where(path)} line {number} is a whole request body ({{\"{key}\": [...]}}), "
                            "not an instance; pass the file with --json-request, or write one JSON instance per line")
        placed.append((f"{where(path)} line {number}", value))
    if not placed:
        raise SpecError(flag, f"{where(path)} holds no instances; write one {'' if text else 'JSON '}instance "
                        "per line")
    return placed


def read_request(path: str, flag: str = "--json-request", storage=None) -> tuple[list[tuple[str, object]], str | None]:
    """gcloud's --json-request: a file holding one request body, {"instances": [...]} (and
    perhaps "signature_name"), local or gs://; its instances with where they are, and its
    signature name. SpecError naming the file for anything else."""
    text = _text(path, flag, storage)
    try:
        body = json.loads(text) if text.strip() else None
    except json.JSONDecodeError as error:
        raise SpecError(flag, f"{where(path)} is not JSON ({error.msg} at line {error.lineno}); write one request "
                        'body, {"instances": [...]}') from None
    instances = body.get("instances") if isinstance(body, dict) else None
    if not isinstance(instances, list) or not instances:
        raise SpecError(flag, f'{where(path)} has no "instances" list; write one request body, '
                        '{"instances": [...]} (or one instance per line with --json-instances)')
    signature = body.get("signature_name")
    if signature is not None and not isinstance(signature, str):
        raise SpecError(flag, f'{where(path)}: "signature_name" is {signature!r}, not a name; give it as a string')
    return [(f"{where(path)} instance {number}", instance) for number, instance in enumerate(instances, 1)], signature


def instances_of(placed: list[tuple[str, object]]) -> list:
    """The instances of `read_placed`'s pairs, without where they are."""
    return [instance for _, instance in placed]


def first_refused(server: client.Server, name: str, instances: list, signature: str | None) -> int | None:
    """Which of `instances`, refused together with HTTP 400, is the first the server refuses
    on its own: found by halving the request (at most 2 log2(n) more requests). None when
    no part is refused alone (the instances only clash together) or the server fails
    otherwise meanwhile."""
    def refused(start: int, end: int) -> bool | None:
        return refused_alone(server, name, instances[start:end], signature)

    start, end = 0, len(instances)
    while end - start > 1:
        middle = (start + end) // 2
        first = refused(start, middle)
        if first is None:
            return None
        if first:
            end = middle
            continue
        second = refused(middle, end)
        if not second:
            return None
        start = middle
    return start


def predict_placed(server: client.Server, name: str, placed: list[tuple[str, object]],
                   signature: str | None) -> list:
    """client.predict of the instances; an HTTP 400 also names where the first instance
    the server refuses on its own is (`FILE line N`)."""
    sent = instances_of(placed)
    try:
        return client.predict(server, name, sent, signature)
    except client.ServingError as error:
        if error.status != 400:
            raise
        index = first_refused(server, name, sent, signature)
        if index is None:
            raise
        where = f"the first instance refused on its own: {placed[index][0]}"
        if index == 0 and len(sent) > 1 and refused_alone(server, name, sent[-1:], signature):
            where += (f"; the last, {placed[-1][0]}, is refused on its own too: the request may be wrong "
                      "for every instance")
        raise client.ServingError(f"{error} ({where})", error.status) from None


def refused_alone(server: client.Server, name: str, instances: list, signature: str | None) -> bool | None:
    """Whether the server refuses `instances`, sent on their own, with HTTP 400 (None: it
    fails otherwise)."""
    try:
        client.predict(server, name, instances, signature)
    except client.ServingError as error:
        return True if error.status == 400 else None
    return False


def choose_signature(instances: list, signatures: dict[str, list[str]], note: Callable[[str], None]) -> str | None:
    """The signature whose inputs are exactly the instances' fields (or the one with a
    single input, for bare values), when serving_default's are not."""
    if not any(isinstance(row, dict) for row in instances):
        default = signatures.get("serving_default")
        if default is None or len(default) == 1:
            return None
        matches = [name for name, inputs in sorted(signatures.items()) if len(inputs) == 1]
        what = "it takes one input ({}), and the instances are bare values"
    else:
        if not all(isinstance(row, dict) for row in instances):
            return None
        fields = sorted(instances[0])
        if any(sorted(row) != fields for row in instances) or signatures.get("serving_default") == fields:
            return None
        matches = [name for name, inputs in sorted(signatures.items()) if inputs == fields]
        what = "its inputs are the instances' fields ({})"
    if len(matches) != 1:
        return None
    note(f"Using signature {matches[0]!r}: {what.format(', '.join(signatures[matches[0]]))}; "
         "pass --signature-name to choose another.")
    return matches[0]


def _cell(value) -> str:
    """A prediction's value as shown: a string as text (a model's output is the server's words,
    its control characters shown, not acted on), anything else as JSON."""
    return terminal_safe(value) if isinstance(value, str) else json.dumps(value)


def table(predictions: list) -> list[str]:
    """One line per prediction under upper-case output names (`key` first); the cells' and
    names' control characters shown as text (launcher.events.terminal_safe)."""
    if not all(isinstance(p, dict) for p in predictions):
        return [_cell(p) for p in predictions]
    names = sorted({name for p in predictions for name in p}, key=lambda n: (n != "key", n))
    rows = [tuple(terminal_safe(n.upper()) for n in names)]  # output names: the server's too
    rows += [tuple(_cell(p.get(n, "")) for n in names) for p in predictions]
    widths = [max(len(row[i]) for row in rows) for i in range(len(names))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


def input_files(patterns: str) -> list[str]:
    """The files of comma-separated glob patterns, local or gs:// (SpecError when one matches nothing)."""
    files: list[str] = []
    storage = None
    given = [p.strip() for p in patterns.split(",") if p.strip()]
    for pattern in filter(gcs.is_gcs, given):
        gcs.split(pattern, "--input-paths")  # every URL well formed before any request
    for pattern in given:
        if gcs.is_gcs(pattern):
            storage = storage or gcs.client("--input-paths")
            matched = gcs.expand(pattern, "--input-paths", storage)
        else:
            matched = local_files(pattern)
            if not matched:
                hint = (f"it is a folder, use {pattern.rstrip('/')}/*" if Path(pattern).is_dir()
                        else "pass files of JSON instances")
                raise SpecError("--input-paths", f"{pattern!r} matches no file; {hint}")
        files.extend(m for m in matched if m not in files)
    if not files:
        raise SpecError("--input-paths", "no pattern given; pass e.g. 'data/requests-*.json'")
    return files


def local_files(pattern: str) -> list[str]:
    """The files on this machine a --input-paths pattern matches, in gs://'s grammar (gcs.regex:
    `**` crosses folders, also inside a name, as `a/**.json`), sorted, as the shell's glob
    takes them: regular files (through symlinks; not a broken link or a pipe), and no hidden
    file or folder unless the pattern names one (`.d/*`). The walk starts at the folder before
    the first wildcard and goes no deeper than the pattern's levels without `**`."""
    if not any(c in pattern for c in gcs.WILDCARDS):
        return [pattern] if Path(pattern).is_file() else []
    root = gcs.prefix(pattern).rpartition("/")[0] + "/" if "/" in gcs.prefix(pattern) else ""
    depth = None if "**" in pattern else pattern[len(root):].count("/")
    hidden = "/." in "/" + pattern[len(root):]
    names, seen = [], set()
    for folder, dirs, files in os.walk(root or ".", followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:  # a link back up the tree: walked once
            dirs[:] = []
            continue
        seen.add(real)
        level = 0 if folder == (root or ".") else os.path.relpath(folder, root or ".").count(os.sep) + 1
        if depth is not None and level >= depth:
            dirs[:] = []  # the files here are the deepest the pattern reaches
        if not hidden:
            dirs[:] = [name for name in dirs if not name.startswith(".")]
        rel = "" if level == 0 else os.path.relpath(folder, root or ".").replace(os.sep, "/") + "/"
        names += [f"{root}{rel}{name}" for name in files
                  if (hidden or not name.startswith(".")) and os.path.isfile(os.path.join(folder, name))]
    return gcs.matching(pattern, names)


def output_file(out: str, name: str) -> str:
    """Where file `name` of the output folder `out` (local or gs://) goes."""
    if gcs.is_gcs(out):
        bucket, folder = gcs.folder(out)
        return f"gs://{bucket}/{folder}{name}"
    return os.path.join(out, name)


def check_output(path: str) -> str:
    """The output folder, refused when it is a file or already holds results (nothing written)."""
    if gcs.is_gcs(path):
        gcs.split(path, "--output-path")
        if any(c in path for c in gcs.WILDCARDS):
            raise SpecError("--output-path", f"{path!r} has a wildcard; pass one folder (gs://BUCKET/PATH)")
        if gcs.exists(output_file(path, RESULTS), "--output-path"):
            raise SpecError("--output-path", f"{path} already holds prediction results; pick a new folder")
        return path
    out = Path(path)
    if out.exists() and not out.is_dir():
        raise SpecError("--output-path", f"{path} is a file; pass a folder")
    if (out / RESULTS).exists():
        raise SpecError("--output-path", f"{path} already holds prediction results; pick a new folder")
    return path


def write_outputs(out: str, files: dict[str, str]) -> None:
    """Each file whole, in the given order: a gs:// object uploaded at once, a local file renamed into place."""
    if gcs.is_gcs(out):
        storage = gcs.client("--output-path")
        for name, text in files.items():
            gcs.write_text(output_file(out, name), text, "--output-path", storage)
        return
    from trainer.outputs import write_text

    os.makedirs(out, exist_ok=True)
    for name, text in files.items():
        try:
            write_text(os.path.join(out, name), text)  # whole or not at all: a temporary file renamed into place
        except OSError as error:  # a full disk, a folder it cannot write in: say which file
            raise BackendError(f"--output-path: cannot write {os.path.join(out, name)}: "
                               f"{error.strerror or error}") from None


def batches(items: list, size: int) -> Iterable[list]:
    for start in range(0, len(items), size):
        yield items[start:start + size]


PROGRESS_SECONDS = 10.0  # batch prediction says how far it is at most this often (a long file: minutes)


def batch_predict(server: client.Server, name: str, files: list[str], out: str, size: int, signature: str | None,
                  note: Callable[[str], None], clock: Callable[[], float] = time.monotonic) -> tuple[int, int]:
    """(predictions written, instances failed): every instance of `files` through the server, the
    results and errors written to `out` after the last batch. Every PROGRESS_SECONDS a
    `note` says how many instances are done (of how many, and how many failed)."""
    storage = gcs.client("--input-paths") if any(gcs.is_gcs(f) for f in files) else None
    placed = [row for path in files for row in read_placed(path, "--input-paths", storage)]
    signature = signature_for(server, name, instances_of(placed), signature, note)
    results: list[str] = []
    errors: list[str] = []
    failed = 0
    said = clock()
    for number, batch in enumerate(batches(placed, size)):
        try:
            predictions = predict_placed(server, name, batch, signature)
        except client.ServingError as error:
            failed += len(batch)
            errors.append(json.dumps({"batch": number, "instances": len(batch), "error": str(error)}) + "\n")
        else:
            results.extend(json.dumps(p) + "\n" for p in predictions)
        done = len(results) + failed
        if clock() - said >= PROGRESS_SECONDS and done < len(placed):
            said = clock()
            note(f"Predicted {done:,} of {len(placed):,} instances" + (f" ({failed:,} failed)" if failed else ""))
    write_outputs(out, {ERRORS: "".join(errors), RESULTS: "".join(results)})
    return len(results), failed


def signature_for(server: client.Server, name: str, instances: list, given: str | None,
                  note: Callable[[str], None]) -> str | None:
    """The signature to send: `given` (--signature-name) once the model's metadata shows it
    has one of that name (else SpecError naming those it has), or without it the one
    choose_signature picks. A server without the metadata path (or not reached): `given`, as
    it is; one that does not answer in time: NoAnswer."""
    try:
        signatures = client.metadata(server, name)
    except client.NoAnswer:  # the predictions would wait for it again
        raise
    except client.ServingError:
        return given
    if given is None:
        return choose_signature(instances, signatures, note)
    if signatures and given not in signatures:
        raise SpecError("--signature-name", f"model {name} has no signature {given!r}; use one of "
                        f"{', '.join(sorted(signatures))}")
    return given


def stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)
