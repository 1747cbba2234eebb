"""The Python API: one scenario variant built and held in a `with` block, its actors at hand (Mininet's
`net['h1']`), probes and steps run on demand. A runner like the pytest plugin and the live lab, built from the
pipeline's own stages (lab.pipeline.standing, kube_proxy_sync) and describe's checks: docs/api.md. `lab run`
goes through it too: lab.api.variant.run_variant drives each variant with the Cluster's own methods.

    with lab.up("hairpin", variant={"proxyMode": "nftables"}) as cluster:
        cluster["web"].exec(["ip", "-br", "addr"])
        result = cluster.probe({"from": "far", "to": {"service": "web", "port": 80}})
"""

from lab.api.cluster import Actor, Cluster, LabError, up
from lab.api.requests import to_json
from lab.api.variant import run_variant

__all__ = ["Actor", "Cluster", "LabError", "run_variant", "to_json", "up"]
