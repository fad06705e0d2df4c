#!/usr/bin/env python3
"""Copy the CRD schemas the launcher validates against from their pinned Go modules into
the package (launcher/schemas/), with an origin record beside each.

    scripts/crds/update.py            (re)write every schema and its origin record
    scripts/crds/update.py --check    exit 1 when a committed copy differs from its module

Each entry of SOURCES names a packaged file, the Go module that carries it, the variable of
scripts/controlplane/versions.env that pins the module's version, and the file's path in
the module. The module comes from the Go module proxy through `go mod download -json`
(the control-plane build fills the same module cache). The origin record
`<file>.origin.json` holds module, version, path, sha256 and the module's own checksum.
Standard library only; needs `go` on PATH.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "launcher" / "schemas"
VERSIONS = ROOT / "scripts" / "controlplane" / "versions.env"

# packaged file -> (Go module, version variable in versions.env, path in the module)
SOURCES = {
    "kubeflow.org_tfjobs.yaml": ("github.com/kubeflow/training-operator", "TRAINING_OPERATOR_VERSION",
                                 "manifests/base/crds/kubeflow.org_tfjobs.yaml"),
}


def pinned_versions(path: Path = VERSIONS) -> dict[str, str]:
    versions = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and not key.startswith("#"):
            versions[key] = value.strip().strip('"')
    return versions


def download(module: str, version: str) -> dict:
    """`go mod download -json module@version`: the module's Dir, Sum and Origin."""
    done = subprocess.run(["go", "mod", "download", "-json", f"{module}@{version}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
)
    info = json.loads(done.stdout or "{}")
    if done.returncode != 0 or info.get("Error") or not info.get("Dir"):
        sys.exit(f"update.py: go mod download {module}@{version} failed: "
                 f"{info.get('Error') or done.stderr.strip()}")
    return info


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def origin_record(module: str, version: str, path: str, info: dict, digest: str) -> dict:
    return {"module": module, "version": version, "path": path, "sha256": digest,
            "moduleSum": info.get("Sum", ""), "commit": (info.get("Origin") or {}).get("Hash", ""),
            "updatedBy": "scripts/crds/update.py"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="compare only; write nothing")
    args = parser.parse_args(argv)
    versions = pinned_versions()
    stale = 0
    for name, (module, variable, path) in SOURCES.items():
        version = versions[variable]
        info = download(module, version)
        source = Path(info["Dir"]) / path
        target = SCHEMAS / name
        record = origin_record(module, version, path, info, sha256(source))
        origin = target.with_name(name + ".origin.json")
        if args.check:
            same = (target.is_file() and sha256(target) == record["sha256"] and origin.is_file()
                    and json.loads(origin.read_text()) == record)
            print(f"{name}: {'up to date' if same else 'DIFFERS from'} {module}@{version}/{path}")
            stale += not same
            continue
        shutil.copyfile(source, target)
        origin.write_text(json.dumps(record, indent=2) + "\n")
        print(f"{name}: {module}@{version}/{path} sha256 {record['sha256']}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
