"""Compute Engine machine types (gcloud's --master-machine-type etc.) -> what a pod on
such a GKE node can request, and the node label that puts it there.

A machine type has N vCPUs and N x (GB per vCPU of its family). GKE keeps part of every
node for the system (GKE's documented reservation: CPU 6% of the first core, 1% of the
next, 0.5% of the next 2, 0.25% above 4; memory 25% of the first 4 GiB, 20% of the next
4, 10% of the next 8, 6% of the next 112, 2% above 128, plus a 100 MiB eviction
threshold); system DaemonSets (logging, networking, metrics) need some of the rest, for
which `DAEMONSET_CPU_M` / `DAEMONSET_MEMORY_MI` are kept free. What remains is requested,
so one replica fills one node, as a Cloud ML replica had its machine to itself.
"""
from __future__ import annotations

import re

from .spec import SpecError

INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
DAEMONSET_CPU_M = 200
DAEMONSET_MEMORY_MI = 512
GB = 1000**3 / 2**20  # MiB per decimal GB (Compute Engine states memory in GB)

# family -> (GB of memory per vCPU, allowed vCPU counts)
FAMILIES = {
    "n1-standard": (3.75, (1, 2, 4, 8, 16, 32, 64, 96)),
    "n1-highmem": (6.5, (2, 4, 8, 16, 32, 64, 96)),
    "n1-highcpu": (0.9, (2, 4, 8, 16, 32, 64, 96)),
    "n2-standard": (4.0, (2, 4, 8, 16, 32, 48, 64, 80, 96, 128)),
    "n2-highmem": (8.0, (2, 4, 8, 16, 32, 48, 64, 80, 96, 128)),
    "n2-highcpu": (1.0, (2, 4, 8, 16, 32, 48, 64, 80, 96)),
    "e2-standard": (4.0, (2, 4, 8, 16, 32)),
    "e2-highmem": (8.0, (2, 4, 8, 16)),
    "e2-highcpu": (1.0, (2, 4, 8, 16, 32)),
}
_NAME = re.compile(r"^([a-z0-9]+-[a-z]+)-(\d+)$")


def capacity(machine_type: str, flag: str) -> tuple[int, float]:
    """(vCPUs, memory in MiB) of a machine type; SpecError naming `flag` otherwise."""
    match = _NAME.fullmatch(machine_type)
    family = FAMILIES.get(match[1]) if match else None
    if family is None or int(match[2]) not in family[1]:
        known = ", ".join(f"{name}-{{{','.join(map(str, counts))}}}" for name, (_, counts) in FAMILIES.items())
        raise SpecError(flag, f"{machine_type!r} is not a machine type the launcher knows; use one of {known}, "
                        "or give --cpu ROLE=... --memory ROLE=... yourself")
    vcpus = int(match[2])
    return vcpus, vcpus * family[0] * GB


def _tiers(amount: float, tiers: list[tuple[float, float]]) -> float:
    """Sum of rate x the part of `amount` in each (width, rate) tier; the last tier is open."""
    reserved, left = 0.0, amount
    for width, rate in tiers:
        part = min(left, width)
        reserved += part * rate
        left -= part
        if left <= 0:
            break
    return reserved


def gke_allocatable(vcpus: int, memory_mi: float) -> tuple[int, int]:
    """(millicores, MiB) a GKE node of that size leaves to pods."""
    cpu_reserved = _tiers(vcpus * 1000, [(1000, 0.06), (1000, 0.01), (2000, 0.005), (float("inf"), 0.0025)])
    if memory_mi < 1024:
        memory_reserved = 255.0
    else:
        memory_reserved = _tiers(memory_mi, [(4096, 0.25), (4096, 0.20), (8192, 0.10), (114688, 0.06),
                                             (float("inf"), 0.02)])
    return int(vcpus * 1000 - cpu_reserved), int(memory_mi - memory_reserved - 100)


def requests_for(machine_type: str, flag: str) -> tuple[str, str]:
    """(cpu, memory) requests for one replica on a node of `machine_type`, e.g. ("7710m", "25302Mi")."""
    cpu_m, memory_mi = gke_allocatable(*capacity(machine_type, flag))
    cpu_m, memory_mi = cpu_m - DAEMONSET_CPU_M, memory_mi - DAEMONSET_MEMORY_MI
    return f"{cpu_m // 10 * 10}m", f"{memory_mi // 64 * 64}Mi"
