"""The node itself: Ready with containerd 2 and kubelet 1.36, a real container runs in a
namespace enforcing Pod Security "restricted" and its output reaches `kubectl logs`
through the apiserver and the kubelet, CoreDNS answers cluster.local inside the node's
network namespace (a CoreDNS built with every plugin of the node's Corefile), and this
machine's kernel settings are untouched."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import jinja2

from tests.support.dns_query import resolve
from tests.support.node import TEMPLATES, node_bin_dir
from tests.support.node.host import NAME, in_netns
from tests.support.node.image import PAUSE_IMAGE
from tests.support.polling import wait_for

WAIT_S = 120.0


def restricted_pod(name: str) -> dict:
    """catatonit runs catatonit --version: a container that prints a line and exits 0."""
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"restartPolicy": "Never",
                     "securityContext": {"runAsNonRoot": True, "runAsUser": 1000, "runAsGroup": 1000,
                                         "seccompProfile": {"type": "RuntimeDefault"}},
                     "containers": [{"name": "c", "image": PAUSE_IMAGE, "imagePullPolicy": "Never",
                                     "command": ["/catatonit", "--", "/catatonit", "--version"],
                                     "securityContext": {"allowPrivilegeEscalation": False,
                                                         "capabilities": {"drop": ["ALL"]}}}]}}


def test_node_ready_with_its_runtime(node_cluster):
    node = node_cluster.kubectl_json("get", "node", NAME)
    info = node["status"]["nodeInfo"]
    assert info["containerRuntimeVersion"].startswith("containerd://2."), info
    assert info["kubeletVersion"].startswith("v1.36"), info
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert addresses["InternalIP"] == "10.77.0.10"


def test_restricted_pod_runs_and_logs(node_cluster, tmp_path):
    with node_cluster.cp.namespace("node-smoke") as namespace:
        node_cluster.kubectl("label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted")
        manifest = tmp_path / "pod.json"
        manifest.write_text(json.dumps(restricted_pod("version")))
        node_cluster.kubectl("create", "-n", namespace, "-f", str(manifest))
        phase = wait_for(lambda: _phase(node_cluster, namespace, "version") in ("Succeeded", "Failed")
                     and _phase(node_cluster, namespace, "version"), lambda: "pod did not finish", WAIT_S)
        assert phase == "Succeeded"
        logs = node_cluster.kubectl("logs", "-n", namespace, "version").stdout
        assert "catatonit" in logs.lower(), logs


def test_coredns_serves_cluster_local(node_cluster):
    with in_netns():
        answer = resolve("kubernetes.default.svc.cluster.local", "10.77.0.10")
    service_ip = node_cluster.kubectl_json("get", "service", "kubernetes", "-n", "default")["spec"]["clusterIP"]
    assert answer == [service_ip]


def corefile_directives(corefile: str) -> set[str]:
    """The plugin directives of a Corefile: the first word of each line directly inside a
    server block (deeper lines are a plugin's own options)."""
    directives, depth = set(), 0
    for line in corefile.splitlines():
        line = line.split("#", 1)[0]
        words = line.split()
        if depth == 1 and words and words[0] not in ("{", "}"):
            directives.add(words[0])
        depth += line.count("{") - line.count("}")
    return directives


def test_coredns_has_the_plugins_of_the_node_corefile():
    """scripts/node/build.sh builds CoreDNS with only the plugins k8s/node/Corefile.j2 uses;
    one missing would stop CoreDNS at start ("Unknown directive"), one more is build time."""
    template = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), undefined=jinja2.StrictUndefined)
    corefile = template.get_template("Corefile.j2").render(node_ip="10.77.0.10", health_port=8080, ready_port=8181,
                                                            kubeconfig="/kubeconfig")
    directives = corefile_directives(corefile)
    assert {"bind", "kubernetes", "ready"} <= directives, corefile  # the server block was read
    listing = subprocess.run([str(node_bin_dir() / "coredns"), "-plugins"], capture_output=True, text=True,
                             timeout=30, check=True).stdout
    installed = set(listing.split())  # one plugin a line (caddy.DescribePlugins)
    assert directives <= installed, f"missing {sorted(directives - installed)}; coredns -plugins: {listing}"
    # the slim build, not upstream's 60 plugins: besides the Corefile's, only those its plugins
    # import and so register (kubernetes: metadata, transfer; cache: metrics, named prometheus)
    assert installed - directives <= {"metadata", "prometheus", "transfer"}, listing


def test_host_kernel_settings_untouched(node_cluster):
    """The kubelet writes these at start; it wrote its own copies, not this machine's."""
    copies = node_cluster.root / "sysctl"
    before = json.loads((copies / "host-values.json").read_text())
    assert "vm/overcommit_memory" in before
    for name, value in before.items():
        assert (Path("/proc/sys") / name).read_text() == value, name
    assert (copies / "vm.overcommit_memory").read_text().strip() == "1"  # the kubelet's value, in its copy


def _phase(cluster, namespace: str, pod: str) -> str:
    return cluster.kubectl_json("get", "pod", pod, "-n", namespace).get("status", {}).get("phase", "")
