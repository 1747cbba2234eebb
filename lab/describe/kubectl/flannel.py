"""flannel's configuration as `lab import` reads it: net-conf.json in the ConfigMap kube-flannel-cfg (in kube-flannel
in flannel's current manifests, kube-system in older ones), which flanneld reads at start. The lab builds flannel's
defaults (cni: flannel): the vxlan backend on VNI 1 and the kernel's port, and its iptables rules for the pod
network; what net-conf.json sets otherwise is said, or refused where it changes what a packet meets.

The fields as flannel-io/flannel reads them at cdf760595c23292fd03ff4daf03638ac1ceef417 (v0.28.9):
pkg/subnet/config.go (Network, EnableIPv4/EnableIPv6, EnableNFTables, Backend) and
pkg/backend/vxlan/vxlan.go (the vxlan backend's VNI, Port, DirectRouting)."""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from lab.describe.kubectl.objects import Obj

CONFIGMAP = "kube-flannel-cfg"
NET_CONF = "net-conf.json"
_VXLAN_DEFAULTS = {"VNI": 1, "Port": 0, "DirectRouting": False}
_READ = ("Network", "EnableNFTables", "Backend")  # net-conf.json's fields the lab checks against what it builds
_READ_BACKEND = ("Type", *_VXLAN_DEFAULTS)


def is_flannel_config(obj: Obj) -> bool:
    return obj.kind == "ConfigMap" and obj.name == CONFIGMAP


def check_net_conf(configs: list[Obj], cluster_cidr: str, notes: list[str]) -> None:
    """flannel's net-conf.json against what the lab builds for it, said in `notes`: its Network must be the
    scenario's pod network (FLANNEL-POSTRTG is written for it), its backend vxlan with flannel's defaults, its
    traffic manager iptables; anything else is refused in words."""
    if not configs:
        notes.append(
            f"lab import: no flannel ConfigMap {CONFIGMAP} in the input (kubectl get configmap -n kube-flannel "
            f"{CONFIGMAP} -o yaml gives it): flannel's defaults assumed, its vxlan backend and Network {cluster_cidr}"
        )
        return
    if len(configs) > 1:
        raise configs[1].error((), f"a second {CONFIGMAP}: give one")
    obj = configs[0]
    path = ("data", NET_CONF)
    conf = _net_conf(obj, path)
    network = conf.get("Network")
    if not isinstance(network, str) or _network(network) != _network(cluster_cidr):
        raise obj.error(
            path,
            f"Network {json.dumps(network)}: the lab builds flannel for the cluster's pod network, {cluster_cidr}"
            " (kube-proxy's clusterCIDR or the nodes' podCIDRs): give a cluster whose flannel Network is it",
        )
    # flanneld decodes net-conf.json into typed Go fields (config.go): a value of another JSON type stops it at start.
    if not isinstance(conf.get("EnableNFTables", False), bool):
        raise obj.error(path, f"EnableNFTables {json.dumps(conf['EnableNFTables'])}: expected true or false")
    if not isinstance(conf.get("Backend", {}), dict):
        raise obj.error(path, f"Backend {json.dumps(conf['Backend'])}: expected a JSON object with Type")
    if conf.get("EnableNFTables") is True:
        raise obj.error(
            path,
            "EnableNFTables true: flannel's nftables rules are not modelled (they return `saddr != <node's block>"
            " daddr <Network>` and match the kube-proxy mark 0x4000 exactly, where its iptables rules masquerade"
            " from outside the Network): the lab builds its iptables rules only",
        )
    backend = conf.get("Backend", {})
    kind = backend.get("Type", "udp")  # flannel's default backend when none is named (config.go)
    if kind != "vxlan":
        raise obj.error(
            path,
            f"Backend.Type {json.dumps(kind)}: the lab builds flannel's vxlan backend only (flannel.1 on the underlay)",
        )
    for field, default in _VXLAN_DEFAULTS.items():
        if backend.get(field, default) != default:
            raise obj.error(
                path,
                f"Backend.{field} {json.dumps(backend[field])}: the lab builds the vxlan backend's default,"
                f" {json.dumps(default)}"
                " (flannel.1 on VNI 1, the kernel's port 8472, always encapsulated)",
            )
    unread = [k for k in conf if k not in _READ] + [f"Backend.{k}" for k in backend if k not in _READ_BACKEND]
    if unread:
        notes.append(obj.note(path, f"{', '.join(unread)}: not modelled (the lab builds flannel's defaults for them)"))
    notes.append(
        obj.note(
            path,
            f"flannel's vxlan backend for Network {network}: built as cni: flannel (flannel.1, FLANNEL-POSTRTG and "
            "FLANNEL-FWD as flannel v0.28.9 writes them)",
        )
    )


def _net_conf(obj: Obj, path: tuple[str, str]) -> dict[str, Any]:
    text = obj.get(path, str)
    if text is None:
        raise obj.error(path, "missing: expected flannel's network configuration (JSON) as text")
    try:
        conf = json.loads(text)
    except ValueError as exc:
        raise obj.error(path, f"not JSON: {exc}") from None
    except RecursionError:
        raise obj.error(path, "not JSON flannel reads: nested deeper than Python's parser goes") from None
    if not isinstance(conf, dict):
        raise obj.error(path, "expected a JSON object with Network and Backend")
    return conf


def _network(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(text)
    except ValueError:
        return None
