"""A single-node Kubernetes cluster on this machine without Docker: the control plane of
tests/support/controlplane/ plus a real node (kubelet, containerd + runc, CNI bridge,
CoreDNS serving cluster.local), all in a network namespace of its own (node_host.py).
Real pods run here: the trainer image as TFJob replicas, under Pod Security "restricted".

The same code serves the node test tier (fixture `node_cluster` in tests/node/conftest.py)
and users (`scripts/node/up`, `scripts/node/down`, i.e. ``python -m tests.support.node up|down``).
Binaries: scripts/controlplane/build.sh and scripts/node/build.sh; versions in
scripts/controlplane/versions.env. Root is needed. One node per machine (a lock file).
Inside the namespace: node IP 10.77.0.10, pods 10.78.0.0/24, services 10.96.0.0/16, CoreDNS
on the node IP; the host reaches the apiserver through a forwarder on 127.0.0.1 at the
same port, so one kubeconfig serves both sides. No kube-proxy: ClusterIP services do not
route (headless services, which TFJobs use, resolve to pod IPs); the bridge CNI does not
enforce NetworkPolicy.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import jinja2
import yaml

from tests.support.controlplane import ControlPlane, running_control_plane, schedulable
from tests.support.controlplane import bin_dir as controlplane_bin_dir
from tests.support.controlplane import missing_binaries as controlplane_missing
from tests.support.controlplane.procs import ControlPlaneError, Processes, http_ok, wait_until
from tests.support.polling import wait_for
from tests.support.ports import free_port
from tests.support.node.host import (NAME, NODE_IP, POD_SUBNET, Forwarder, NodeHostError, create_cgroup_root,
                                     create_netns, in_netns, missing_feature, private_sysctls, root_dir,
                                     shared_mount, teardown)
from tests.support.node.image import PAUSE_IMAGE, pause_archive
from tests.support.tools import ROOT

NODE_BUILD = ROOT / "scripts" / "node" / "build.sh"
CP_BUILD = ROOT / "scripts" / "controlplane" / "build.sh"
TEMPLATES = ROOT / "k8s" / "node"
NODE_BIN_ENV = "TFJOB_NODE_BIN"
NODE_BINARIES = ("kubelet", "containerd", "containerd-shim-runc-v2", "ctr", "runc", "coredns")
CNI_BIN_DIRS = ("/usr/lib/cni", "/opt/cni/bin")  # Debian's containernetworking-plugins, upstream's
KUBELET_PORT = 10250
LOCK_POLL_SECONDS = 2.0
IMPORT_TIMEOUT_S = 600.0
READY_TIMEOUT_S = 120.0


def node_bin_dir() -> Path:
    override = os.environ.get(NODE_BIN_ENV)
    if override:
        return Path(override)
    out = subprocess.run(["bash", str(NODE_BUILD), "--bin-dir"], capture_output=True, text=True,
                         timeout=30, check=True)
    return Path(out.stdout.strip())


def missing_prerequisite() -> str | None:
    """One line naming what this machine lacks to run the node, or None."""
    problem = missing_feature()
    if problem:
        return problem
    cp_missing = controlplane_missing(controlplane_bin_dir(), kwok=False)
    if cp_missing:
        return f"control-plane binaries missing ({', '.join(cp_missing)}): run {CP_BUILD.relative_to(ROOT)}"
    node_bin = node_bin_dir()
    missing = [b for b in NODE_BINARIES if not os.access(node_bin / b, os.X_OK)]
    if missing:
        return f"node binaries missing ({', '.join(missing)}): run {NODE_BUILD.relative_to(ROOT)}"
    if not any((Path(d) / "bridge").exists() for d in CNI_BIN_DIRS):
        return "CNI plugins (bridge, host-local, loopback) not found: install containernetworking-plugins"
    return None


@dataclass
class NodeCluster:
    """The running single-node cluster."""

    cp: ControlPlane
    root: Path
    procs: Processes
    node_name: str = NAME

    @property
    def kubeconfig(self) -> Path:
        return self.cp.kubeconfig

    def env(self) -> dict[str, str]:
        return self.cp.env()

    def kubectl(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        return self.cp.kubectl(*args, check=check, timeout=timeout)

    def kubectl_json(self, *args: str) -> dict:
        return self.cp.kubectl_json(*args)

    def import_image(self, archive: Path) -> None:
        """`ctr images import` an OCI archive (podman/buildah `oci-archive:`) for the pods."""
        ctr(self.root, self.procs.bin, "images", "import", str(archive), timeout=IMPORT_TIMEOUT_S)

    @contextlib.contextmanager
    def host_volume(self, namespace: str, claim: str, path: Path, size: str = "1Gi") -> Iterator[str]:
        """A PersistentVolumeClaim `claim` bound to a hostPath PersistentVolume at `path`:
        pods under Pod Security "restricted" may not mount hostPath, but may mount a claim.
        The PV is deleted on exit (the claim goes with its namespace)."""
        pv = f"{namespace}-{claim}"
        docs = [
            {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": pv},
             "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteMany"],
                      "persistentVolumeReclaimPolicy": "Retain", "storageClassName": "",
                      "hostPath": {"path": str(path), "type": "Directory"},
                      "claimRef": {"namespace": namespace, "name": claim}}},
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": claim, "namespace": namespace},
             "spec": {"accessModes": ["ReadWriteMany"], "storageClassName": "", "volumeName": pv,
                      "resources": {"requests": {"storage": size}}}},
        ]
        manifest = self.root / f"volume-{pv}.json"
        manifest.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}))
        self.kubectl("apply", "-f", str(manifest))
        try:
            wait_for(lambda: self.kubectl_json("get", "pvc", claim, "-n", namespace).get("status", {}).get("phase")
                 == "Bound", lambda: f"claim {claim} not Bound to {pv}", READY_TIMEOUT_S)
            yield claim
        finally:
            self.kubectl("delete", "pv", pv, "--ignore-not-found", "--wait=false", check=False)


def ctr(root: Path, bin_dir: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    done = subprocess.run([str(bin_dir / "ctr"), "--address", str(containerd_socket(root)), "--namespace",
                           "k8s.io", *args], capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise ControlPlaneError(f"ctr {' '.join(args)} failed: {done.stderr.strip()}")
    return done


def containerd_socket(root: Path) -> Path:
    return root / "containerd" / "containerd.sock"


def _render(template: str, path: Path, **values) -> Path:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined,
                             keep_trailing_newline=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(env.get_template(template).render(**values))
    return path


def _cni_bin_dirs() -> list[str]:
    return [d for d in CNI_BIN_DIRS if (Path(d) / "bridge").exists()]


def _start_containerd(procs: Processes, root: Path) -> None:
    base = root / "containerd"
    cni_conf = root / "cni" / "net.d"
    cni_conf.mkdir(parents=True, exist_ok=True)
    conflist = {"cniVersion": "1.0.0", "name": NAME, "plugins": [
        {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": False, "hairpinMode": True,
         "ipam": {"type": "host-local", "ranges": [[{"subnet": POD_SUBNET}]],
                  "routes": [{"dst": "0.0.0.0/0"}], "dataDir": str(root / "cni" / "ipam")}},
    ]}
    (cni_conf / f"10-{NAME}.conflist").write_text(json.dumps(conflist, indent=2))
    config = _render("containerd.toml.j2", base / "config.toml", root=str(base / "root"),
                     state=str(base / "state"), socket=str(containerd_socket(root)), pause_image=PAUSE_IMAGE,
                     runc=str(procs.bin / "runc"),
                     runc_root=str(base / "runc"), cni_bin_dirs=_cni_bin_dirs(), cni_conf_dir=str(cni_conf))
    # containerd finds its shim (containerd-shim-runc-v2) on PATH
    path = os.pathsep.join([str(procs.bin), os.environ.get("PATH", os.defpath)])
    procs.start("containerd", "containerd", "--config", str(config), env={"PATH": path})
    wait_until("containerd", lambda: containerd_socket(root).exists() and subprocess.run(
        [str(procs.bin / "ctr"), "--address", str(containerd_socket(root)), "version"],
        capture_output=True, timeout=10).returncode == 0, procs, "containerd")
    archive = root / "pause.oci.tar"
    pause_archive(archive)
    ctr(root, procs.bin, "images", "import", str(archive))


def _start_coredns(procs: Processes, root: Path, kubeconfig: Path) -> None:
    ready = free_port()
    corefile = _render("Corefile.j2", root / "coredns" / "Corefile", node_ip=NODE_IP, health_port=free_port(),
                       ready_port=ready, kubeconfig=str(kubeconfig))
    procs.start("coredns", "coredns", "-conf", str(corefile))
    wait_until("coredns /ready", lambda: http_ok(f"http://127.0.0.1:{ready}/ready"), procs, "coredns")


def _kubelet_config(root: Path, cp: ControlPlane, cgroup_root: str) -> Path:
    pki = cp.pki
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
        "failCgroupV1": False,  # hybrid cgroup hosts count as v1
        "cgroupDriver": "cgroupfs", "cgroupsPerQOS": True, "cgroupRoot": cgroup_root,
        "enforceNodeAllocatable": ["pods"],
        "containerRuntimeEndpoint": f"unix://{containerd_socket(root)}",
        "address": NODE_IP, "port": KUBELET_PORT, "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1", "healthzPort": free_port(),
        "tlsCertFile": str(pki.serving_cert), "tlsPrivateKeyFile": str(pki.serving_key),
        "authentication": {"x509": {"clientCAFile": str(pki.ca)}, "webhook": {"enabled": False},
                           "anonymous": {"enabled": False}},
        "authorization": {"mode": "AlwaysAllow"},
        "clusterDNS": [NODE_IP], "clusterDomain": "cluster.local",
        "resolvConf": str(_resolv_conf(root)), "podLogsDir": str(root / "pod-logs"),
        "volumePluginDir": str(root / "volume-plugins"),
        "failSwapOn": False, "maxOpenFiles": 20000, "protectKernelDefaults": False,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                         "nodefs.inodesFree": "1%"},
        "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False, "registerNode": True,
    }
    path = root / "kubelet-config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _resolv_conf(root: Path) -> Path:
    path = root / "resolv.conf"
    path.write_text(f"nameserver {NODE_IP}\n")
    return path


def _start_kubelet(procs: Processes, root: Path, cp: ControlPlane, cgroup_root: str) -> None:
    kubelet_root = root / "kubelet"
    shared_mount(kubelet_root)
    procs.start("kubelet", "kubelet", f"--config={_kubelet_config(root, cp, cgroup_root)}",
                f"--kubeconfig={cp.kubeconfig}", f"--root-dir={kubelet_root}", f"--cert-dir={root / 'kubelet-pki'}",
                f"--hostname-override={NAME}", f"--node-ip={NODE_IP}", "--v=1",
                prefix=private_sysctls(root / "sysctl"))
    wait_until(f"node {NAME} Ready and schedulable", lambda: _node_schedulable(cp), procs, "kubelet",
               timeout=READY_TIMEOUT_S)


def _node_schedulable(cp: ControlPlane) -> bool:
    done = cp.kubectl("get", "node", NAME, "-o", "json", check=False)
    return done.returncode == 0 and schedulable(json.loads(done.stdout))


@contextlib.contextmanager
def _node_lock(root: Path, wait_seconds: float = 0.0) -> Iterator[None]:
    """One node per machine. With `wait_seconds`, wait that long for another node (another
    test session on a shared machine) to go before giving up."""
    path = root.parent / f".{NAME}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    deadline = time.monotonic() + wait_seconds
    while True:
        handle = open(path, "w")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if path.exists() and os.fstat(handle.fileno()).st_ino == path.stat().st_ino:
                break  # locked the file that is still there (a holder unlinks it when done)
        except BlockingIOError:
            if time.monotonic() >= deadline:
                handle.close()
                raise NodeHostError(f"a node is already running on this machine (lock {path}); "
                                    "stop it with scripts/node/down") from None
        handle.close()
        time.sleep(LOCK_POLL_SECONDS)
    try:
        yield
    finally:
        path.unlink(missing_ok=True)  # still holding it: the node is gone
        handle.close()


@contextlib.contextmanager
def running_node_cluster(root: Path | None = None, images: tuple[Path, ...] = (),
                         lock_wait_seconds: float = 0.0) -> Iterator[NodeCluster]:
    """Bring up the control plane and the node in their namespace, import `images` (OCI
    archives); on exit stop everything and remove every trace (node_host.teardown), also
    when start-up fails. Raises NodeHostError naming a missing prerequisite."""
    problem = missing_prerequisite()
    if problem:
        raise NodeHostError(problem)
    root = root or root_dir()
    with _node_lock(root, lock_wait_seconds), contextlib.ExitStack() as stack:
        teardown(root)  # what a crashed run left
        stack.callback(_final_teardown, root)
        root.mkdir(parents=True)
        create_netns()
        cgroup_root = create_cgroup_root()
        port = free_port()  # free on the host, for the forwarder; inside the namespace all are free
        stack.enter_context(contextlib.closing(Forwarder(port)))
        procs = Processes(node_bin_dir(), root / "logs", dict(os.environ))
        with in_netns():
            cp = stack.enter_context(running_control_plane(
                root / "controlplane", kwok=False, controllers="*", apiserver_port=port, serving_ips=(NODE_IP,)))
            stack.callback(procs.stop_all)
            _start_containerd(procs, root)
            _start_coredns(procs, root, cp.kubeconfig)
            _start_kubelet(procs, root, cp, cgroup_root)
        cluster = NodeCluster(cp, root, procs)
        for archive in images:
            cluster.import_image(archive)
        yield cluster


def _final_teardown(root: Path) -> None:
    left = teardown(root)
    if left:
        raise NodeHostError(f"node teardown left: {', '.join(left)}")


# ---- scripts/node -------------------------------------------------------------------------

def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def _serve(args) -> int:
    """The node's supervisor (started detached by `up`): runs until SIGTERM or Ctrl-C."""
    from tests.support.node.kserve import running_kserve

    signal.signal(signal.SIGTERM, _interrupt)
    root = root_dir()
    status = root.parent / f"{NAME}.status"
    try:
        with running_node_cluster(root, tuple(args.image_archive)) as cluster, \
                (running_kserve(cluster) if args.kserve else contextlib.nullcontext()):
            kubeconfig = root / "kubeconfig"
            kubeconfig.write_text(cluster.kubeconfig.read_text())
            status.write_text(json.dumps({"ready": True, "kubeconfig": str(kubeconfig), "pid": os.getpid()}))
            with contextlib.suppress(KeyboardInterrupt):
                signal.pause()
    except KeyboardInterrupt:
        pass
    except (NodeHostError, ControlPlaneError, OSError, subprocess.SubprocessError) as exc:
        status.write_text(json.dumps({"ready": False, "error": str(exc)}))
        return 1
    finally:
        if status.exists() and json.loads(status.read_text()).get("ready"):
            status.unlink()
    return 0


def _check(args) -> int:
    """What scripts/node/up asks before it builds: root, tools, kernel features, cgroups."""
    problem = missing_feature()
    if problem:
        print(f"scripts/node: {problem}", file=sys.stderr)
        return 2
    return 0


def _up(args) -> int:
    problem = missing_prerequisite()
    if problem:
        print(f"scripts/node: {problem}", file=sys.stderr)
        return 2
    root = root_dir()
    status = root.parent / f"{NAME}.status"
    status.parent.mkdir(parents=True, exist_ok=True)
    status.unlink(missing_ok=True)
    log = root.parent / f"{NAME}.log"
    cmd = [sys.executable, "-m", "tests.support.node", "serve", *sum((["--import", a] for a in args.image_archive), []),
           *(["--kserve"] if args.kserve else [])]
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    deadline = time.monotonic() + args.timeout
    while time.monotonic() < deadline and proc.poll() is None and not status.exists():
        time.sleep(0.5)
    state = json.loads(status.read_text()) if status.exists() else {}
    if not state.get("ready"):
        reason = state.get("error") or f"not up after {args.timeout:.0f}s (log: {log})"
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=120)
        print(f"scripts/node: {reason}", file=sys.stderr)
        return 1
    print(f"node {NAME} Ready; supervisor pid {proc.pid}, log {log}")
    print(f"export KUBECONFIG={state['kubeconfig']}")
    return 0


def _down(args) -> int:
    root = root_dir()
    status = root.parent / f"{NAME}.status"
    if status.exists():
        pid = json.loads(status.read_text()).get("pid")
        if pid:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + 120
            while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                time.sleep(0.5)
        status.unlink(missing_ok=True)
    if os.geteuid() != 0:
        print("scripts/node: root is needed to remove the node", file=sys.stderr)
        return 2
    left = teardown(root)
    for leftover in (f".{NAME}.lock", f"{NAME}.log", f"{NAME}.status"):
        (root.parent / leftover).unlink(missing_ok=True)
    if left:
        print(f"scripts/node: could not remove: {', '.join(left)}", file=sys.stderr)
        return 1
    print(f"node {NAME} removed (processes, mounts, network namespace, cgroups, {root})")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/node", description=(
        "A single-node Kubernetes cluster on this Linux machine without Docker: control plane, "
        "kubelet, containerd + runc, CNI bridge and CoreDNS in a network namespace of their own. "
        "Needs root and the binaries of scripts/controlplane/build.sh and scripts/node/build.sh."))
    sub = parser.add_subparsers(dest="command", required=True, metavar="{up,down,check}")  # serve: internal
    up = sub.add_parser("up", help="start the cluster in the background and print its KUBECONFIG")
    up.add_argument("--import", dest="image_archive", action="append", default=[], metavar="OCI_ARCHIVE",
                    help="an image for the pods, as an OCI archive (repeatable), e.g. from scripts/image/build.sh")
    up.add_argument("--kserve", action="store_true", help="also run the KServe controller (Standard mode, its "
                    "CRDs and webhooks; scripts/kserve/build.sh) for `launcher serve --backend k8s`")
    up.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the node (default 600)")
    sub.add_parser("down", help="stop the cluster and remove everything it made, also after a crash")
    sub.add_parser("check", help="say in one line what this machine lacks for a node (exit 2), before any build")
    serve = sub.add_parser("serve")  # what `up` starts in the background; no help: not listed
    serve.add_argument("--import", dest="image_archive", action="append", default=[], type=Path)
    serve.add_argument("--kserve", action="store_true")
    args = parser.parse_args(argv)
    return {"up": _up, "down": _down, "check": _check, "serve": _serve}[args.command](args)

