"""The OCI archives build.sh writes (what the node imports with `ctr images import`): each
names its image, holds the trainer installed as a package (site-packages) and no launcher
(the serving image also kserve), and no layer holds the host's own CA certificates (mounted
at build time only, as a build secret) or the sources and locks pip installed from (mounted
for that step only)."""
from __future__ import annotations

import glob
import subprocess
import gzip
import json
import re
import tarfile
from typing import IO, Iterator

import pytest

from tests.support.image import package_version

HOST_BUNDLE = "/etc/ssl/certs/ca-certificates.crt"
DISTRO_CERTS = "/usr/share/ca-certificates/**/*.crt"  # what the ca-certificates package ships
_PEM = re.compile(r"-----BEGIN CERTIFICATE-----\n(.*?)-----END CERTIFICATE-----", re.S)
SITE = "opt/venv/lib/python3.11/site-packages"  # the local base's venv (scripts/image/base.Containerfile)
BUILD_MOUNTS = ("run/host-ca.crt", "run/requirements.lock", "run/tfjob-src", "tmp/tfjob-src", "run/pip-ca.crt",
                "run/serve-requirements.lock")


def pem_bodies(path: str) -> dict[str, list[str]]:
    """{base64 body: its lines} of every certificate in a PEM file."""
    with open(path, encoding="ascii", errors="replace") as handle:
        return {m[1].replace("\n", ""): m[1].split() for m in _PEM.finditer(handle.read())}


def host_only_certificates() -> list[bytes]:
    """One 64-character body line (past the common header bytes) of each certificate this
    host trusts beyond its distribution's: a TLS-intercepting proxy's CA, for one."""
    distro: set[str] = set()
    for path in glob.glob(DISTRO_CERTS, recursive=True):
        distro |= set(pem_bodies(path))
    return [lines[len(lines) // 2].encode() for body, lines in pem_bodies(HOST_BUNDLE).items()
            if body not in distro and len(lines) > 4]


def layers(archive: tarfile.TarFile) -> Iterator[tuple[str, IO[bytes]]]:
    index = json.load(archive.extractfile("index.json"))
    (manifest_ref,) = index["manifests"]
    manifest = json.load(archive.extractfile("blobs/sha256/" + manifest_ref["digest"].split(":")[1]))
    for layer in manifest["layers"]:
        blob = archive.extractfile("blobs/sha256/" + layer["digest"].split(":")[1])
        yield layer["digest"], gzip.GzipFile(fileobj=blob) if layer["mediaType"].endswith("gzip") else blob


@pytest.fixture(params=["trainer", "serve"])
def image(request):
    return request.getfixturevalue(f"{request.param}_image")


def test_archive_names_the_image_for_ctr_import(image):
    with tarfile.open(image.archive) as archive:
        index = json.load(archive.extractfile("index.json"))
        assert json.loads(archive.extractfile("oci-layout").read())["imageLayoutVersion"] == "1.0.0"
    (manifest,) = index["manifests"]
    assert manifest["mediaType"] == "application/vnd.oci.image.manifest.v1+json"
    assert manifest["annotations"]["org.opencontainers.image.ref.name"] == image.reference


def scan(archive_path) -> tuple[list[str], set[str]]:
    """(build-time files and host-only CAs found in any layer, every path of every layer)."""
    needles = host_only_certificates()
    found: list[str] = []
    names: set[str] = set()
    with tarfile.open(archive_path) as archive:
        for digest, stream in layers(archive):
            with tarfile.open(fileobj=stream, mode="r|") as layer:
                for member in layer:
                    name = member.name.lstrip("./")
                    names.add(name)
                    if name.startswith(BUILD_MOUNTS):
                        found.append(f"{digest}: {name}")
                    if member.isfile() and needles:
                        content = layer.extractfile(member).read()
                        found += [f"{digest}: {name} holds a host-only CA" for n in needles if n in content]
    return found, names


def test_no_layer_holds_the_host_ca_or_build_mounts_and_only_the_trainer_is_installed(image):
    found, names = scan(image.archive)
    assert found == [], found
    assert f"{SITE}/trainer/task.py" in names and "opt/venv/bin/python" in names
    assert f"{SITE}/tfjob_launcher-{package_version()}.dist-info/METADATA" in names
    assert not [name for name in names if name.startswith((f"{SITE}/launcher", f"{SITE}/tests"))]
    assert not [name for name in names if name.startswith("app/") and name.rstrip("/") != "app"]  # empty
    assert "opt/venv/bin/tfjob" not in names  # the console script needs the launcher: removed
    serving = image.reference.startswith("localhost/tfjob-serve:")
    assert (f"{SITE}/kserve/__init__.py" in names) == serving  # kserve: in the serving image only


def test_the_build_leaves_no_working_container_and_no_mount(trainer_image, serve_image):
    """Both images are built (scripts/test ran build.sh): buildah keeps no working container
    of them, and with it no overlay mount (buildah 1.28 left the serve stage's one mounted)."""
    listed = subprocess.run(["buildah", "containers", "--format", "{{.ContainerName}} {{.ImageName}}"],
                            capture_output=True, text=True, timeout=60, check=True).stdout.splitlines()
    assert not [line for line in listed if " localhost/tfjob-" in line], listed
    with open("/proc/mounts") as mounts:
        merged = [line.split()[1] for line in mounts if line.split()[1].startswith("/var/lib/containers/storage/")
                  and line.split()[1].endswith("/merged")]
    assert merged == [], merged
