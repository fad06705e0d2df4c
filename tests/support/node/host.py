"""What a real node (tests/support/node/) does to this machine, and how all of it is
undone: a network namespace with the node IP on a veth pair whose both ends stay inside,
a cgroup folder per hierarchy for every pod, a shared mount for the kubelet's volumes,
private copies of the kernel settings the kubelet writes, a TCP forwarder from the
host's 127.0.0.1 to the apiserver inside the namespace. Everything carries the name
NAME, so `teardown()` finds and removes it also after a crashed run: processes, mounts,
the namespace (with its links, bridge and iptables rules), cgroups, files.
"""
from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Iterator

NAME = "tfjob-node"
NETNS_DIR = Path("/run/netns")
NETNS = NETNS_DIR / NAME
ROOT_ENV = "TFJOB_NODE_ROOT"
DEFAULT_ROOT = Path("/var/lib") / NAME  # images unpack here: a disk, not /run's tmpfs
NODE_IP = "10.77.0.10"
NODE_GATEWAY = "10.77.0.1"  # the veth's other end: a route that leads nowhere outside
NODE_PREFIX = 24
POD_SUBNET = "10.78.0.0/24"
CGROUP_FS = Path("/sys/fs/cgroup")
CLONE_NEWNET = 0x40000000
# kernel settings the kubelet writes at start (container_manager_linux.go); it gets files
# of its own in their place, so this machine's values never change
KUBELET_SYSCTLS = ("vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
                   "kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes")
# paths the kubelet (or an older run's controller-manager) writes whatever the flags say;
# CNI's cache is shared with other runtimes
FIXED_FILES = (Path("/var/lib/kubelet/device-plugins/kubelet.sock"),)
FIXED_GLOBS = ((Path("/var/lib/cni/results"), f"{NAME}-*"),)
FIXED_DIRS = (Path("/var/lib/kubelet/device-plugins"), Path("/var/lib/kubelet"),
              Path("/usr/libexec/kubernetes/kubelet-plugins/volume/exec"),
              Path("/usr/libexec/kubernetes/kubelet-plugins/volume"),
              Path("/usr/libexec/kubernetes/kubelet-plugins"), Path("/usr/libexec/kubernetes"),
              Path("/var/lib/cni/results"), Path("/var/lib/cni"),
              Path("/run/containerd/s"), Path("/run/containerd/fifo"), Path("/run/containerd"),
              NETNS_DIR)  # removed when empty
STOP_TIMEOUT_S = 15.0


class NodeHostError(RuntimeError):
    """This machine cannot run the node; the message names what is missing."""


def root_dir() -> Path:
    return Path(os.environ.get(ROOT_ENV) or DEFAULT_ROOT)


def run(*cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise NodeHostError(f"{' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


# ---- what the machine must offer ------------------------------------------------------

def missing_feature() -> str | None:
    """One line naming what this machine lacks for a node, or None."""
    if os.geteuid() != 0:
        return "root is needed (network namespace, mounts, cgroups): run it as root, e.g. with sudo"
    for tool, package in (("ip", "iproute2"), ("unshare", "util-linux"), ("mount", "mount"),
                          ("iptables", "iptables")):
        if shutil.which(tool) is None:
            return f"{tool} not found: install {package}"
    if not Path("/proc/self/ns/net").exists():
        return "the kernel has no network namespaces (CONFIG_NET_NS)"
    filesystems = Path("/proc/filesystems").read_text()
    if "overlay" not in filesystems:
        run("modprobe", "overlay", check=False)
        if "overlay" not in Path("/proc/filesystems").read_text():
            return "the kernel has no overlay filesystem (CONFIG_OVERLAY_FS) for container images"
    if not cgroup_hierarchies():
        return f"no cgroup filesystem mounted under {CGROUP_FS}"
    return None


def cgroup_hierarchies() -> list[Path]:
    """Where the node's cgroup folder goes: every hierarchy of a v1/hybrid host, or the v2 root."""
    if (CGROUP_FS / "cgroup.controllers").exists():
        return [CGROUP_FS]
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split(" - ")
        mountpoint, fstype = line.split()[4], fields[1].split()[0]
        # v1 controllers, and the v2 hierarchy of a hybrid host (runc makes folders there too)
        if fstype in ("cgroup", "cgroup2") and mountpoint.startswith(f"{CGROUP_FS}/"):
            found.append(Path(mountpoint))
    return found


# ---- network namespace ----------------------------------------------------------------

def create_netns() -> None:
    """The namespace, its loopback, and the node IP on a veth pair inside it."""
    run("ip", "netns", "add", NAME)
    ip = ("ip", "-n", NAME)
    run(*ip, "link", "set", "lo", "up")
    run(*ip, "link", "add", "node0", "type", "veth", "peer", "name", "node0-peer")
    run(*ip, "addr", "add", f"{NODE_IP}/{NODE_PREFIX}", "dev", "node0")
    for link in ("node0", "node0-peer"):
        run(*ip, "link", "set", link, "up")
    run(*ip, "route", "add", "default", "via", NODE_GATEWAY, "dev", "node0")


_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def in_netns() -> Iterator[None]:
    """Run the calling thread in the node's network namespace; processes it starts stay
    there (a network namespace belongs to a thread, and a child inherits it)."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(NETNS, os.O_RDONLY)
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(home)
    finally:
        os.close(home)
        os.close(target)


class Forwarder:
    """127.0.0.1:PORT of this machine -> 127.0.0.1:PORT in the node's namespace, so that
    kubectl, helm and the launcher on the host reach the apiserver with one kubeconfig."""

    def __init__(self, port: int):
        self.port = port
        self.listener = socket.create_server(("127.0.0.1", port))
        self.listener.settimeout(0.5)
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._serve, name="node-forwarder", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        with in_netns():  # outgoing sockets are made in the namespace
            while not self.stopped.is_set():
                try:
                    client, _ = self.listener.accept()
                except (socket.timeout, OSError):
                    continue
                try:
                    upstream = socket.create_connection(("127.0.0.1", self.port), timeout=5)
                except OSError:
                    client.close()
                    continue
                upstream.settimeout(None)
                for a, b in ((client, upstream), (upstream, client)):
                    threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for s in (source, sink):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def close(self) -> None:
        self.stopped.set()
        self.thread.join(timeout=5)
        self.listener.close()


# ---- cgroups, mounts, kernel settings ---------------------------------------------------

def create_cgroup_root() -> str:
    """/NAME in every hierarchy (cpuset needs its cpus and mems copied down); the kubelet's
    cgroupRoot, so every pod cgroup sits under it."""
    for hierarchy in cgroup_hierarchies():
        folder = hierarchy / NAME
        folder.mkdir(exist_ok=True)
        for name in ("cpuset.cpus", "cpuset.mems"):
            if (hierarchy / name).exists() and not (hierarchy / "cgroup.controllers").exists():
                (folder / name).write_text((hierarchy / name).read_text())
        if hierarchy == CGROUP_FS:  # v2: let the folder's children use the controllers
            wanted = set((hierarchy / "cgroup.subtree_control").read_text().split())
            with contextlib.suppress(OSError):
                (folder / "cgroup.subtree_control").write_text(" ".join(f"+{c}" for c in sorted(wanted)))
    return f"/{NAME}"


def shared_mount(path: Path) -> None:
    """Bind `path` onto itself and make it shared: what the kubelet mounts there from its
    own mount namespace (volumes, service-account tokens) is seen by containerd."""
    path.mkdir(parents=True, exist_ok=True)
    run("mount", "--bind", str(path), str(path))
    run("mount", "--make-shared", str(path))


def private_sysctls(directory: Path) -> tuple[str, ...]:
    """A command prefix: a new mount namespace (mount propagation unchanged, so the shared
    kubelet root still propagates) in which each KUBELET_SYSCTLS file is a bind mount of a
    file of ours holding the machine's value; then exec the rest of the command."""
    directory.mkdir(parents=True, exist_ok=True)
    binds, originals = [], {}
    for name in KUBELET_SYSCTLS:
        source = Path("/proc/sys") / name
        if not source.exists():
            continue
        copy = directory / name.replace("/", ".")
        originals[name] = source.read_text()
        copy.write_text(originals[name])
        binds.append(f"mount --bind {copy} {source}")
    (directory / "host-values.json").write_text(json.dumps(originals))
    script = " && ".join([*binds, 'exec "$0" "$@"'])
    return ("unshare", "--mount", "--propagation", "unchanged", "--", "sh", "-c", script)


def mounts_under(path: Path) -> list[str]:
    """Mount points at or under `path`, deepest first (octal escapes of mountinfo decoded)."""
    prefix = str(path).rstrip("/")
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")
        if point == prefix or point.startswith(prefix + "/"):
            points.append(point)
    return sorted(set(points), key=lambda p: p.count("/"), reverse=True)


# ---- teardown ----------------------------------------------------------------------------

def _netns_inode() -> int | None:
    try:
        return os.stat(NETNS).st_ino
    except OSError:
        return None


def node_pids(root: Path) -> list[int]:
    """Processes of a node, running or left over: in its network namespace, in its cgroup
    folder, or with its root dir on their command line (containerd's shims)."""
    netns, me, found = _netns_inode(), os.getpid(), []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            if netns is not None and os.stat(entry / "ns" / "net").st_ino == netns:
                found.append(int(entry.name))
                continue
            cgroups = (entry / "cgroup").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if f"/{NAME}/" in cgroups or cgroups.rstrip().endswith(f"/{NAME}") or f"{NAME}\n" in cgroups \
                or str(root) in cmdline:
            found.append(int(entry.name))
    return found


def kill_node_processes(root: Path) -> None:
    """SIGTERM, then SIGKILL what is left after STOP_TIMEOUT_S."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = node_pids(root)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while pids and time.monotonic() < deadline:
            pids = [pid for pid in pids if Path(f"/proc/{pid}").exists() and not _zombie(pid)]
            time.sleep(0.1)
        if not pids:
            return


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return True


def remove_cgroups() -> list[str]:
    """rmdir every folder under /NAME, deepest first; the folders that would not go."""
    stuck = []
    for hierarchy in cgroup_hierarchies():
        top = hierarchy / NAME
        if not top.is_dir():
            continue
        folders = sorted((Path(d) for d, _, _ in os.walk(top)), key=lambda p: len(p.parts), reverse=True)
        for folder in folders:
            for _ in range(50):  # a cgroup whose last task just died may take a moment
                try:
                    folder.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
            else:
                stuck.append(str(folder))
    return stuck


def unmount_all(root: Path) -> None:
    for point in mounts_under(root):
        if run("umount", point, check=False).returncode != 0:
            run("umount", "--lazy", point, check=False)


def teardown(root: Path | None = None) -> list[str]:
    """Remove every trace of a node: processes, mounts, the namespace, cgroups, files.
    Idempotent; safe after a crash. Returns what could not be removed (empty: all gone)."""
    root = root or root_dir()
    kill_node_processes(root)
    unmount_all(root)
    if NETNS.exists():
        run("ip", "netns", "delete", NAME, check=False)
    problems = remove_cgroups()
    for path in FIXED_FILES:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    for directory, pattern in FIXED_GLOBS:
        for path in directory.glob(pattern):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    left = mounts_under(root)
    if left:
        problems += [f"mount {point}" for point in left]
    elif root.exists():
        shutil.rmtree(root, ignore_errors=True)
    if NETNS_DIR.is_dir() and not any(NETNS_DIR.iterdir()) and mounts_under(NETNS_DIR):
        run("umount", str(NETNS_DIR), check=False)  # `ip netns add` made it a mount point
    for directory in FIXED_DIRS:
        with contextlib.suppress(OSError):
            directory.rmdir()  # only when empty: other tools may use these folders
    if NETNS.exists():
        problems.append(f"network namespace {NAME}")
    if root.exists():
        problems.append(str(root))
    problems += [f"process {pid}" for pid in node_pids(root)]
    return problems
