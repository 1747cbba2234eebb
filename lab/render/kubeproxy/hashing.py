"""kube-proxy's iptables chain names (pkg/proxy/iptables/proxier.go, portProtoHash and friends).

Every per-service chain is a prefix plus the first 16 characters of
base32(sha256(service-port-name + protocol)); endpoint chains also hash the endpoint's
"IP:port". iptables limits chain names to 28 characters, which is why kube-proxy hashes.
The service-port name is ServicePort.port_name_string ("ns/svc:port", or "ns/svc" when
the port is unnamed) and the protocol is lower case ("tcp"): hashing "TCP" gives other names.
"""

from __future__ import annotations

import base64
import functools
import hashlib


def port_proto_hash(service_port_name: str, protocol: str) -> str:
    """The 16-character hash shared by a service port's KUBE-SVC/SVL/EXT/FW chains."""
    return _hash16(service_port_name + protocol.lower())


def service_chain(service_port_name: str, protocol: str) -> str:
    """KUBE-SVC-*: the endpoints used with "Cluster" traffic policy."""
    return "KUBE-SVC-" + port_proto_hash(service_port_name, protocol)


def local_chain(service_port_name: str, protocol: str) -> str:
    """KUBE-SVL-*: the node-local endpoints used with "Local" traffic policy."""
    return "KUBE-SVL-" + port_proto_hash(service_port_name, protocol)


def external_chain(service_port_name: str, protocol: str) -> str:
    """KUBE-EXT-*: where NodePort, externalIP and LoadBalancer traffic enters."""
    return "KUBE-EXT-" + port_proto_hash(service_port_name, protocol)


def firewall_chain(service_port_name: str, protocol: str) -> str:
    """KUBE-FW-*: loadBalancerSourceRanges filtering."""
    return "KUBE-FW-" + port_proto_hash(service_port_name, protocol)


def endpoint_chain(service_port_name: str, protocol: str, endpoint: str) -> str:
    """KUBE-SEP-*: one endpoint; `endpoint` is "IP:port" ("[IPv6]:port")."""
    return "KUBE-SEP-" + _hash16(service_port_name + protocol.lower() + endpoint)


# A rendered endpoint's KUBE-SEP name is asked for by each rule that names it (four per endpoint): kept, so 10 000
# endpoints cost 10 000 digests rather than 40 000.
@functools.lru_cache(maxsize=1 << 16)
def _hash16(text: str) -> str:
    return base64.b32encode(hashlib.sha256(text.encode()).digest()).decode()[:16]
