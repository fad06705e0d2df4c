"""Images for the real node without a registry: a pause image made here from Debian's
static catatonit (an OCI archive written by this module, no image builder needed), and
`ctr images import` of OCI archives into the node's containerd."""
from __future__ import annotations

import hashlib
import io
import json
import platform
import tarfile
import time
from pathlib import Path

PAUSE_IMAGE = "localhost/tfjob-node/pause:catatonit"
CATATONIT = Path("/usr/bin/catatonit")
ARCH = {"x86_64": "amd64", "aarch64": "arm64"}.get(platform.machine(), platform.machine())


def _blob(tar: tarfile.TarFile, data: bytes, media_type: str) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    info = tarfile.TarInfo(f"blobs/sha256/{digest}")
    info.size, info.mtime = len(data), 0
    tar.addfile(info, io.BytesIO(data))
    return {"mediaType": media_type, "digest": f"sha256:{digest}", "size": len(data)}


def _file(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), 0
    tar.addfile(info, io.BytesIO(data))


def pause_archive(path: Path) -> str:
    """An OCI archive of one layer holding /catatonit, entrypoint `catatonit -P` (pause
    mode: reap children, wait for a signal). Returns the image name it carries."""
    if not CATATONIT.is_file():
        raise FileNotFoundError(f"{CATATONIT} not found: install Debian's catatonit (scripts/node/build.sh does)")
    layer_buffer = io.BytesIO()
    with tarfile.open(fileobj=layer_buffer, mode="w") as layer:
        info = tarfile.TarInfo("catatonit")
        data = CATATONIT.read_bytes()
        info.size, info.mode, info.mtime = len(data), 0o755, 0
        layer.addfile(info, io.BytesIO(data))
    layer_bytes = layer_buffer.getvalue()
    diff_id = f"sha256:{hashlib.sha256(layer_bytes).hexdigest()}"
    config = {"architecture": ARCH, "os": "linux",
              "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(0)),
              "config": {"Entrypoint": ["/catatonit", "-P"], "User": "65535:65535"},
              "rootfs": {"type": "layers", "diff_ids": [diff_id]}}
    with tarfile.open(path, mode="w") as tar:
        _file(tar, "oci-layout", json.dumps({"imageLayoutVersion": "1.0.0"}).encode())
        layer_desc = _blob(tar, layer_bytes, "application/vnd.oci.image.layer.v1.tar")
        config_desc = _blob(tar, json.dumps(config).encode(), "application/vnd.oci.image.config.v1+json")
        manifest = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": config_desc, "layers": [layer_desc]}
        manifest_desc = _blob(tar, json.dumps(manifest).encode(), manifest["mediaType"])
        manifest_desc["annotations"] = {"io.containerd.image.name": PAUSE_IMAGE,
                                        "org.opencontainers.image.ref.name": PAUSE_IMAGE.rsplit(":", 1)[1]}
        index = {"schemaVersion": 2, "mediaType": "application/vnd.oci.image.index.v1+json",
                 "manifests": [manifest_desc]}
        _file(tar, "index.json", json.dumps(index).encode())
    return PAUSE_IMAGE
