"""A real, minimal Kubernetes control plane for the e2e tests, without Docker.

etcd, kube-apiserver, kube-scheduler, kube-controller-manager (garbage collector, service
accounts, namespaces, node lifecycle), Kubeflow training-operator (TFJob only, with its
validating admission webhook installed from the module's manifests/base/webhook) and KWOK
(fake nodes, pod stages and logs from k8s/kwok/): real binaries that
scripts/controlplane/build.sh builds once per machine. Everything listens on 127.0.0.1 on
free ports, with the certificates of controlplane_pki. Each wait is bounded; every
process started is stopped, also when start-up fails.

Fixture: ``control_plane`` (session) -> ``ControlPlane``: ``kubeconfig``, ``env()`` for
subprocesses, ``kubectl``/``kubectl_json``, ``namespace(prefix)`` (fresh, deleted after),
``finish_pod`` (make a replica exit with a code), ``log_tail(component)``. Missing binaries
FAIL the tests with the build command. By hand: ``python -m tests.support.controlplane
[WORKDIR]`` prints the KUBECONFIG and runs until Ctrl-C.
"""
from __future__ import annotations

import base64
import contextlib
import json
import os
import signal
import ssl
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
import yaml

from tests.support.controlplane.pki import Pki, make_pki, write_kubeconfig
from tests.support.controlplane.procs import (START_TIMEOUT_S, ControlPlaneError, Processes, Tuning, has_condition,
                                              http_ok, insecure_tls, wait_until)
from tests.support.ports import free_port
from tests.support.tools import ROOT, TFJOB_CRD_FILE, kubectl

BUILD_SCRIPT = ROOT / "scripts" / "controlplane" / "build.sh"
KWOK_DIR = ROOT / "k8s" / "kwok"
BIN_ENV = "TFJOB_CONTROLPLANE_BIN"  # use binaries from here instead of the build cache
BINARIES = ("etcd", "kube-apiserver", "kube-scheduler", "kube-controller-manager",
            "training-operator.v1", "kwok")
OPERATOR_NAMESPACE = "kubeflow"
OPERATOR_WEBHOOK_SECRET = "training-operator-webhook-cert"
EXIT_CODE_ANNOTATION = "e2e.tfjob-launcher/exit-code"  # see k8s/kwok/stages.yaml
KWOK_NODE_SELECTOR = "kwok.x-k8s.io/node=fake"
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
OPERATOR_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")  # fixed in training-operator
OPERATOR_MODULE = "github.com/kubeflow/training-operator"
VERSIONS = ROOT / "scripts" / "controlplane" / "versions.env"
WEBHOOK_MANIFEST = "manifests/base/webhook/manifests.yaml"
TFJOB_WEBHOOK = "validator.tfjob.training-operator.kubeflow.org"
# Not the operator's name (validator.training-operator.kubeflow.org): under that name its
# cert rotator would put its own CA, for training-operator.kubeflow.svc, in caBundle.
WEBHOOK_CONFIGURATION = "e2e.validator.training-operator.kubeflow.org"
KWOK_CONTROLLERS = "garbagecollector,serviceaccount,namespace,nodelifecycle"
LOOPBACK = "127.0.0.1,localhost"

# For jobs of thousands of replicas (bench/launcher_scale.py): every pod of a TFJob carries
# the whole cluster spec in TF_CONFIG (246 KB per pod at 5,101 replicas), so each write of a
# pod is that large and the control plane's memory grows with replicas x pod size.
HOLD_EVERY_POD = ("kube-apiserver", "kube-scheduler", "kube-controller-manager", "training-operator")
LARGE_JOBS = Tuning(
    args={
        # etcd keeps every applied raft entry (a whole pod write) in memory until a snapshot,
        # --snapshot-count entries (10,000 in etcd 3.6), then still the last
        # --snapshot-catchup-entries (5,000) for slow followers: up to 15,000 x 246 KB. A
        # single member has no follower to catch up.
        # (The apiserver's --etcd-compaction-interval stays 5 min: a shorter one shrinks
        # etcd's database file, whose pages the kernel can drop anyway, and makes the
        # launcher's watch of scheduler events, which has no watch cache and so no
        # bookmarks, meet 410 Gone sooner.)
        "etcd": ("--snapshot-count=1000", "--snapshot-catchup-entries=100"),
    },
    # Each of these holds every pod of the job decoded (the apiserver more than once: its
    # watch cache keeps the pods and at least the last 75 s of pod writes, its own pod
    # informer for service-account tokens another copy), and Go's collector lets the heap
    # reach (1 + GOGC/100) x the live heap: 2x by default. The live heap is mostly TF_CONFIG
    # strings, which the collector does not scan, so collecting at 1.25x costs little CPU.
    # GOMEMLIMIT would need a figure above each live heap, which grows with the job; below
    # it the collector runs all the time. KWOK and etcd (with the raft log above) hold no
    # copy of the pods: GOGC=25 only doubled KWOK's CPU. The pods' watch cache stays:
    # --watch-cache-sizes=pods#0 would drop it but give every watcher of pods its own etcd
    # watch, each pod write decoded once per watcher, CPU a 2-core machine does not have.
    env={name: {"GOGC": "25"} for name in HOLD_EVERY_POD},
)


def bin_dir() -> Path:
    """$TFJOB_CONTROLPLANE_BIN, else the versioned cache dir build.sh writes to."""
    override = os.environ.get(BIN_ENV)
    if override:
        return Path(override)
    out = subprocess.run(["bash", str(BUILD_SCRIPT), "--bin-dir"], capture_output=True,
                         text=True, timeout=30, check=True)
    return Path(out.stdout.strip())


def missing_binaries(directory: Path, kwok: bool = True) -> list[str]:
    needed = BINARIES if kwok else tuple(name for name in BINARIES if name != "kwok")
    return [name for name in needed if not os.access(directory / name, os.X_OK)]


# ---- the control plane ----------------------------------------------------------------

@dataclass
class ControlPlane:
    """A running control plane: what tests use to reach it."""

    kubeconfig: Path
    server: str
    workdir: Path
    procs: Processes
    kwok_config: Path
    pki: Pki | None = None

    def env(self) -> dict[str, str]:
        """os.environ with KUBECONFIG set to this control plane (for launcher, helm, kubectl)."""
        env = dict(os.environ, KUBECONFIG=str(self.kubeconfig))
        env.setdefault("KUBECACHEDIR", str(self.workdir / "kube-cache"))  # not ~/.kube/cache
        for var in ("no_proxy", "NO_PROXY"):
            env[var] = ",".join(filter(None, (env.get(var), LOOPBACK)))
        return env

    def kubectl(self, *args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        result = subprocess.run([kubectl(), *args], env=self.env(), capture_output=True, text=True,
                                timeout=timeout, check=False)
        if check and result.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)} failed ({result.returncode}): "
                                    f"{result.stderr.strip()}")
        return result

    def kubectl_json(self, *args: str) -> dict:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    @contextlib.contextmanager
    def namespace(self, prefix: str, wait: bool = True) -> Iterator[str]:
        """A fresh namespace (ready once its default service account exists, as pods need
        it), deleted on exit with everything in it, so the next test has the nodes free.
        `wait=False`: do not wait for the deletion (real pods take their grace period to go;
        the next test can start meanwhile)."""
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.kubectl("create", "namespace", name)
        try:
            wait_until(f"service account default in {name}",
                       lambda: self.kubectl("get", "serviceaccount", "default", "-n", name,
                                            check=False).returncode == 0,
                       self.procs, "kube-controller-manager")
            yield name
        finally:
            self.kubectl("delete", "namespace", name, f"--timeout={START_TIMEOUT_S:.0f}s",
                         f"--wait={str(wait).lower()}")

    @contextlib.contextmanager
    def in_process(self) -> Iterator[pytest.MonkeyPatch]:
        """This control plane's no_proxy in os.environ while a test runs the launcher's k8s
        client in-process (the Kubernetes client reads the proxy variables itself); the
        MonkeyPatch for more, all undone on exit."""
        with pytest.MonkeyPatch.context() as env:
            for var in ("no_proxy", "NO_PROXY"):
                env.setenv(var, self.env()[var])
            yield env

    def service_account(self, namespace: str, account: str, verbs: str, resources: str) -> None:
        """Service account `account` of `namespace` with a Role of only `verbs` on
        `resources` (kubectl create role's comma-separated forms)."""
        self.kubectl("create", "serviceaccount", account, "-n", namespace)
        self.kubectl("create", "role", account, "-n", namespace, f"--verb={verbs}", f"--resource={resources}")
        self.kubectl("create", "rolebinding", account, "-n", namespace, f"--role={account}",
                     f"--serviceaccount={namespace}:{account}")

    def kubeconfig_as(self, namespace: str, account: str, path: Path) -> Path:
        """A kubeconfig at `path` for this control plane as service account `account` of
        `namespace` (a token from the TokenRequest API), its context's namespace `namespace`:
        to act with only the rights the test's Role gives."""
        token = self.kubectl("create", "token", account, "-n", namespace).stdout.strip()
        config = yaml.safe_load(self.kubeconfig.read_text())
        config["users"] = [{"name": account, "user": {"token": token}}]
        config["contexts"] = [{"name": account, "context": {"cluster": config["clusters"][0]["name"],
                                                             "user": account, "namespace": namespace}}]
        config["current-context"] = account
        path.write_text(yaml.safe_dump(config))
        return path

    def launcher_account(self, namespace: str, path: Path) -> dict[str, str]:
        """The project's launcher identity in `namespace`: k8s/serviceaccount.yaml and
        k8s/rbac.yaml (its least-privilege Role) applied there, and a kubeconfig at `path`
        acting as the tfjob-launcher service account with a real token. Returns the
        environment that points a launcher at it ({"KUBECONFIG": path})."""
        docs = [d for name in ("serviceaccount.yaml", "rbac.yaml")
                for d in yaml.safe_load_all((ROOT / "k8s" / name).read_text()) if d]
        for doc in docs:
            doc["metadata"]["namespace"] = namespace
            for subject in doc.get("subjects", []):
                subject["namespace"] = namespace
        manifest = path.with_suffix(".rbac.yaml")
        manifest.write_text(yaml.safe_dump_all(docs))
        self.kubectl("apply", "-f", str(manifest))
        self.kubeconfig_as(namespace, "tfjob-launcher", path)
        return {"KUBECONFIG": str(path)}

    def finish_pod(self, namespace: str, pod: str, exit_code: int) -> None:
        """Make a Running TFJob replica exit with `exit_code` (KWOK stage tfjob-pod-exit)."""
        self.kubectl("annotate", "pod", pod, "-n", namespace, "--overwrite",
                     f"{EXIT_CODE_ANNOTATION}={exit_code}")

    def log_tail(self, component: str, lines: int = 40) -> str:
        return self.procs.log_tail(component, lines)


def kwok_config(workdir: Path) -> Path:
    """k8s/kwok stages and logs as one kwok --config file, with logsFile made absolute."""
    docs = []
    for name in ("stages.yaml", "logs.yaml"):
        for doc in yaml.safe_load_all((KWOK_DIR / name).read_text()):
            for log in doc.get("spec", {}).get("logs", []):
                log["logsFile"] = str((KWOK_DIR / log["logsFile"]).resolve())
            docs.append(doc)
    path = workdir / "kwok.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


def _start_etcd(procs: Processes, workdir: Path) -> str:
    client, peer = free_port(), free_port()
    url = f"http://127.0.0.1:{client}"
    procs.start("etcd", "etcd", "--name=e2e", f"--data-dir={workdir / 'etcd'}",
                f"--listen-client-urls={url}", f"--advertise-client-urls={url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer}",
                f"--initial-cluster=e2e=http://127.0.0.1:{peer}",
                "--unsafe-no-fsync", "--log-level=warn", f"--quota-backend-bytes={8 * 1024 ** 3}")  # like a real cluster's
    wait_until("etcd", lambda: http_ok(f"{url}/health"), procs, "etcd")
    return url


def _start_apiserver(procs: Processes, workdir: Path, pki: Pki, etcd: str, extra: tuple[str, ...],
                     port: int | None = None) -> str:
    port = port or free_port()
    procs.start(
        "kube-apiserver", "kube-apiserver",
        f"--etcd-servers={etcd}", "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
        f"--secure-port={port}", f"--cert-dir={workdir / 'apiserver'}",
        f"--tls-cert-file={pki.serving_cert}", f"--tls-private-key-file={pki.serving_key}",
        f"--client-ca-file={pki.ca}", "--authorization-mode=RBAC",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={pki.sa_pub}", f"--service-account-signing-key-file={pki.sa_key}",
        "--service-cluster-ip-range=10.96.0.0/16", "--endpoint-reconciler-type=none",
        # `kubectl logs` goes apiserver -> node's kubelet endpoint, which KWOK serves
        "--kubelet-preferred-address-types=InternalIP", f"--kubelet-certificate-authority={pki.ca}",
        f"--kubelet-client-certificate={pki.admin_cert}", f"--kubelet-client-key={pki.admin_key}",
        "--allow-privileged=true", "--profiling=false", *extra)
    server = f"https://127.0.0.1:{port}"
    tls = ssl.create_default_context(cafile=str(pki.ca))
    tls.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
    wait_until("kube-apiserver /readyz", lambda: http_ok(f"{server}/readyz", tls), procs, "kube-apiserver")
    return server


def _start_controllers(procs: Processes, pki: Pki, kubeconfig: Path, controllers: str) -> None:
    common = (f"--kubeconfig={kubeconfig}", "--leader-elect=false", "--bind-address=127.0.0.1")
    scheduler, manager = free_port(), free_port()
    procs.start("kube-scheduler", "kube-scheduler", *common, f"--secure-port={scheduler}")
    procs.start("kube-controller-manager", "kube-controller-manager", *common,
                f"--secure-port={manager}", f"--controllers={controllers}",
                # else the PV controllers create /usr/libexec/kubernetes/kubelet-plugins/volume/exec
                f"--flex-volume-plugin-dir={kubeconfig.parent / 'flexvolume'}",
                f"--service-account-private-key-file={pki.sa_key}", f"--root-ca-file={pki.ca}",
                "--use-service-account-credentials=false")
    for name, port in (("kube-scheduler", scheduler), ("kube-controller-manager", manager)):
        wait_until(f"{name} /healthz", lambda p=port: http_ok(f"https://127.0.0.1:{p}/healthz", insecure_tls()),
                   procs, name)


def serve_webhook_certs(pki: Pki, tmpdir: Path) -> None:
    """This run's serving certificate for 127.0.0.1 (which the apiserver checks against the
    CA of a webhook configuration) where a controller-runtime webhook server started with
    TMPDIR=`tmpdir` reads it: $TMPDIR/k8s-webhook-server/serving-certs (its default CertDir)."""
    served = tmpdir / OPERATOR_CERT_DIR.relative_to(OPERATOR_CERT_DIR.parents[1])
    served.mkdir(parents=True, exist_ok=True)
    for source, target in ((pki.serving_cert, "tls.crt"), (pki.serving_key, "tls.key")):
        (served / target).write_bytes(source.read_bytes())


def _mount_webhook_certs(pki: Pki, tmpdir: Path) -> None:
    """In a cluster the operator's webhook Secret is a volume at a fixed path; its cert
    rotator waits for tls.crt there before it starts the controllers (it only checks that
    the file exists: cert-controller v0.16 rotator.go ensureCertsMounted). The path is
    fixed in training-operator v1.9.4 (pkg/cert/cert.go), whatever $TMPDIR says: concurrent
    runs share it, hence the atomic replace. The webhook server itself serves the pair in
    $TMPDIR/k8s-webhook-server/serving-certs, so each run gets its own."""
    serve_webhook_certs(pki, tmpdir)
    OPERATOR_CERT_DIR.mkdir(parents=True, exist_ok=True)
    for source, target in ((pki.serving_cert, "tls.crt"), (pki.serving_key, "tls.key")):
        staged = OPERATOR_CERT_DIR / f".{target}.{os.getpid()}"
        staged.write_bytes(source.read_bytes())
        staged.replace(OPERATOR_CERT_DIR / target)  # atomic: another run may share the path


def module_dir(module: str, version_variable: str) -> Path:
    """The Go module `module` at the version versions.env pins in `version_variable` (the
    control-plane build downloaded it; `go mod download` finds it in the module cache)."""
    versions = dict(line.split("=", 1) for line in VERSIONS.read_text().splitlines()
                    if "=" in line and not line.startswith("#"))
    pinned = f"{module}@{versions[version_variable].strip()}"
    done = subprocess.run(["go", "mod", "download", "-json", pinned], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)
    directory = json.loads(done.stdout or "{}").get("Dir")
    if done.returncode != 0 or not directory:
        raise ControlPlaneError(f"go mod download {pinned} failed: {done.stdout.strip() or done.stderr.strip()}; "
                                f"build the control plane with: bash {BUILD_SCRIPT.relative_to(ROOT)}")
    return Path(directory)


def operator_module_dir() -> Path:
    """The pinned training-operator Go module."""
    return module_dir(OPERATOR_MODULE, "TRAINING_OPERATOR_VERSION")


def webhook_client(hook: dict, port: int, ca: bytes) -> dict:
    """A webhook's clientConfig by URL: in a cluster it names a Service; here the controller
    runs beside the apiserver, which calls it on 127.0.0.1:`port` (the Service's path) and
    checks its certificate against `ca`, this control plane's CA."""
    path = hook["clientConfig"]["service"].get("path", "/")
    return {"url": f"https://127.0.0.1:{port}{path}", "caBundle": base64.b64encode(ca).decode()}


def webhook_configuration(module: Path, port: int, ca: bytes) -> dict:
    """The operator's ValidatingWebhookConfiguration (manifests/base/webhook/manifests.yaml)
    with its TFJob webhook only (the operator runs the TFJob scheme only), called by URL."""
    config = yaml.safe_load((module / WEBHOOK_MANIFEST).read_text())
    (hook,) = [h for h in config["webhooks"] if h["name"] == TFJOB_WEBHOOK]
    hook["clientConfig"] = webhook_client(hook, port, ca)
    config["metadata"] = {"name": WEBHOOK_CONFIGURATION}
    config["webhooks"] = [hook]
    return config


def webhook_probe(namespace: str) -> dict:
    """A TFJob the webhook admits (the smallest one): to know it answers."""
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob",
            "metadata": {"name": "webhook-probe", "namespace": namespace},
            "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": {"containers": [
                {"name": "tensorflow", "image": "registry.k8s.io/pause:3.10"}]}}}}}}


def _install_webhook(procs: Processes, cp: ControlPlane, pki: Pki, port: int) -> None:
    """Install the webhook, then wait until a server-side dry run of a TFJob passes it
    (the operator registers its handler after its certificates are ready)."""
    config = cp.workdir / "webhook.yaml"
    config.write_text(yaml.safe_dump(webhook_configuration(operator_module_dir(), port, pki.ca.read_bytes())))
    cp.kubectl("apply", "-f", str(config))
    probe = cp.workdir / "webhook-probe.yaml"
    probe.write_text(yaml.safe_dump(webhook_probe(OPERATOR_NAMESPACE)))
    wait_until("training-operator's TFJob webhook answering the apiserver", lambda: cp.kubectl(
        "create", "--dry-run=server", "-f", str(probe), check=False).returncode == 0, procs, "training-operator")


def _install_crd(procs: Processes, cp: ControlPlane) -> None:
    """Before the controller-manager starts, so its garbage collector watches TFJobs at once."""
    cp.kubectl("create", "-f", str(TFJOB_CRD_FILE))
    wait_until("TFJob CRD Established", lambda: has_condition(
        cp.kubectl_json("get", "crd/tfjobs.kubeflow.org"), "Established"), procs, "kube-apiserver")


def _start_operator(procs: Processes, cp: ControlPlane, pki: Pki) -> None:
    cp.kubectl("create", "namespace", OPERATOR_NAMESPACE)
    cp.kubectl("create", "secret", "generic", OPERATOR_WEBHOOK_SECRET, "-n", OPERATOR_NAMESPACE)
    tmpdir = cp.workdir / "operator-tmp"
    _mount_webhook_certs(pki, tmpdir)
    health, webhook = free_port(), free_port()
    procs.start("training-operator", "training-operator.v1", f"--kubeconfig={cp.kubeconfig}",
                "--enable-scheme=tfjob", f"--metrics-bind-address=127.0.0.1:{free_port()}",
                f"--health-probe-bind-address=127.0.0.1:{health}",
                f"--webhook-server-port={webhook}", env={"TMPDIR": str(tmpdir)})
    wait_until("training-operator /readyz", lambda: http_ok(f"http://127.0.0.1:{health}/readyz"),
               procs, "training-operator")
    _install_webhook(procs, cp, pki, webhook)


def _start_kwok(procs: Processes, cp: ControlPlane, pki: Pki) -> None:
    port = free_port()
    procs.start("kwok", "kwok", f"--kubeconfig={cp.kubeconfig}", f"--config={cp.kwok_config}",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_SELECTOR}",
                "--node-ip=127.0.0.1", f"--node-port={port}", f"--server-address=127.0.0.1:{port}",
                f"--tls-cert-file={pki.serving_cert}", f"--tls-private-key-file={pki.serving_key}")
    cp.kubectl("apply", "-f", str(KWOK_DIR / "nodes.yaml"))
    wait_until("kwok nodes Ready and schedulable", lambda: all(map(
        schedulable, cp.kubectl_json("get", "nodes", "-l", "type=kwok")["items"])), procs, "kwok")


def schedulable(node: dict) -> bool:
    """Ready, and the node lifecycle controller has lifted the not-ready taint."""
    taints = {t["key"] for t in node.get("spec", {}).get("taints", [])}
    return has_condition(node, "Ready") and NOT_READY_TAINT not in taints


@contextlib.contextmanager
def running_control_plane(workdir: Path, apiserver_args: tuple[str, ...] = (), *, kwok: bool = True,
                          controllers: str = KWOK_CONTROLLERS, apiserver_port: int | None = None,
                          serving_ips: tuple[str, ...] = (), tuning: Tuning = Tuning()) -> Iterator[ControlPlane]:
    """Start everything in `workdir`; stop every process on exit, also when start fails.
    `apiserver_args`: extra kube-apiserver flags (bench/launcher_scale.py adds an audit log).
    `tuning`: flags and environment per process (the bench's LARGE_JOBS).
    A real node (tests/support/node/) asks for no KWOK, every controller (`*`: the
    root-CA publisher, EndpointSlices for headless DNS, PV binding), a fixed apiserver port
    and its node IP in the serving certificate."""
    binaries = bin_dir()
    missing = missing_binaries(binaries, kwok)
    if missing:
        raise ControlPlaneError(f"control-plane binaries missing in {binaries}: {', '.join(missing)}; "
                                f"build them once with: bash {BUILD_SCRIPT.relative_to(ROOT)}")
    workdir.mkdir(parents=True, exist_ok=True)
    pki = make_pki(workdir / "pki", serving_ips)
    procs = Processes(binaries, workdir / "logs", dict(os.environ), tuning=tuning)
    try:
        etcd = _start_etcd(procs, workdir)
        server = _start_apiserver(procs, workdir, pki, etcd, apiserver_args, apiserver_port)
        cp = ControlPlane(workdir / "kubeconfig", server, workdir, procs, kwok_config(workdir), pki)
        write_kubeconfig(cp.kubeconfig, server, pki)
        procs.env = cp.env()
        _install_crd(procs, cp)
        _start_controllers(procs, pki, cp.kubeconfig, controllers)
        _start_operator(procs, cp, pki)
        if kwok:
            _start_kwok(procs, cp, pki)
        yield cp
    finally:
        procs.stop_all()


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory) -> Iterator[ControlPlane]:
    """The running control plane; a start-up problem fails the tests that use it."""
    workdir = tmp_path_factory.mktemp("controlplane")
    stack, problem = contextlib.ExitStack(), None
    try:
        cp = stack.enter_context(running_control_plane(workdir))
    except (ControlPlaneError, subprocess.SubprocessError, OSError) as exc:
        problem = f"e2e control plane did not start: {exc}"
    if problem:
        pytest.fail(problem, pytrace=False)
    with stack:
        yield cp


def _interrupt(signum, frame) -> None:
    raise KeyboardInterrupt


def main() -> int:
    signal.signal(signal.SIGTERM, _interrupt)  # stop the processes on `kill`, too
    workdir = Path(sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="tfjob-controlplane-"))
    with running_control_plane(workdir) as cp:
        print(f"export KUBECONFIG={cp.kubeconfig}  # Ctrl-C stops the control plane", flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            signal.pause()
    return 0

