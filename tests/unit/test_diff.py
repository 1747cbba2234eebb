"""lab diff on rendered dumps with planted drift, in every proxy mode: each drift is reported exactly, a faithful
dump is identical, another release's dump names that release. No root: both sides are texts."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest

from lab.cli import main
from lab.describe.load import load_scenario
from lab.describe.topology import Topology
from lab.install.tools import InstallError
from lab.render.dataplane import node_dataplane
from lab.replay.diff.command import diff_from_args
from lab.replay.diff.nodediff import Dumps, NodeDiff, diff_node, with_release
from lab.selection import select

SCENARIO = Path(__file__).resolve().parents[2] / "topologies" / "nodeport-source-ip.yaml"


def _topo(mode: str) -> Topology:
    return select(load_scenario(SCENARIO), [f"proxyMode={mode}", "externalTrafficPolicy=Cluster"])[0]


def _dumps(mode: str, version: str | None = None) -> Dumps:
    topo = _topo(mode)
    plane = node_dataplane(with_release(topo, mode, version) if version else topo, "node1")
    if mode == "nftables":
        return Dumps(nft=plane.nft)
    if mode == "ipvs":
        return Dumps(rules=plane.iptables, ipsets=plane.ipsets, ipvs=plane.ipvs)
    return Dumps(rules=plane.iptables)


def _diff(mode: str, dumps: Dumps) -> NodeDiff:
    return diff_node(_topo(mode), "node1", dumps)


def _only(result: NodeDiff) -> dict:
    """The one part that differs, as JSON."""
    assert len(result.differences) == 1, result.differences
    return result.differences[0].as_json()


@pytest.mark.parametrize("mode", ["iptables", "ipvs", "nftables"])
def test_a_faithful_dump_is_identical(mode: str) -> None:
    result = _diff(mode, _dumps(mode))
    assert result.identical and result.count == 0 and not result.best


def test_iptables_deleted_rule() -> None:
    rules = _dumps("iptables").rules.replace("-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000\n", "")
    part = _only(_diff("iptables", Dumps(rules=rules)))
    assert (part["table"], part["name"]) == ("nat", "KUBE-MARK-MASQ")
    assert part["missing"] == ["-j MARK --set-xmark 0x4000/0x4000"] and not part["extra"]


def test_iptables_extra_rule_names_its_line() -> None:
    rules = _dumps("iptables").rules.replace(
        "COMMIT\n*nat\n", "COMMIT\n*nat\n-A KUBE-NODEPORTS -p tcp -m tcp --dport 31000 -j ACCEPT\n"
    )
    line = rules.splitlines().index("-A KUBE-NODEPORTS -p tcp -m tcp --dport 31000 -j ACCEPT") + 1
    part = _only(_diff("iptables", Dumps(rules=rules)))
    assert part["extra"] == [{"line": line, "entry": "-p tcp -m tcp --dport 31000 -j ACCEPT"}] and not part["missing"]


def test_iptables_changed_rule_is_one_change() -> None:
    rules = _dumps("iptables").rules.replace("--to-destination 10.244.1.2:8080", "--to-destination 10.244.1.2:9090")
    part = _only(_diff("iptables", Dumps(rules=rules)))
    # The endpoint chain is named by the endpoint its jump's comment names, so an edited DNAT is a changed rule in it.
    assert part["name"] == "KUBE-SEP(default/openresty:http 10.244.1.2:8080)" and not part["missing"]
    [changed] = part["changed"]
    assert changed["found"].endswith("-j DNAT --to-destination 10.244.1.2:9090")


def test_iptables_changed_match_is_paired() -> None:
    rules = _dumps("iptables").rules.replace("--dport 30080", "--dport 30081")
    part = _only(_diff("iptables", Dumps(rules=rules)))
    assert part["name"] == "KUBE-NODEPORTS" and not part["missing"] and not part["extra"]
    [changed] = part["changed"]
    assert "--dport 30080" in changed["expected"] and "--dport 30081" in changed["found"]


def test_iptables_hashes_and_save_form_do_not_matter() -> None:
    """Other hashes (another release's hashing, other chain names) and iptables-save's own form line up."""
    rules = _dumps("iptables").rules
    for old in set(re.findall(r"KUBE-(?:SVC|SEP|EXT)-([A-Z2-7]{16})", rules)):
        rules = rules.replace(old, old[::-1])
    rules = rules.replace("-m tcp -p tcp -d 10.96.0.10 --dport 80", "-d 10.96.0.10/32 -p tcp -m tcp --dport 80")
    rules = rules.replace("0x00004000", "0x4000")
    assert _diff("iptables", Dumps(rules=rules)).identical


def test_iptables_order_matters_only_where_kube_proxy_relies_on_it() -> None:
    rules = _dumps("iptables").rules
    lines = rules.splitlines()
    last = next(line for line in lines if "must be the last rule" in line)
    cluster_ip = next(line for line in lines if line.startswith("-A KUBE-SERVICES -m comment"))
    # KUBE-SERVICES' rules each match their own destination: any order but the NodePort jump's is fine...
    assert (
        _diff(
            "iptables", Dumps(rules=rules.replace(cluster_ip + "\n", "").replace(last, f"{last}\n{cluster_ip}"))
        ).count
        == 1
    )
    swapped = "\n".join(line for line in lines if line != cluster_ip).replace(last, f"{last}\n{cluster_ip}")
    assert _only(_diff("iptables", Dumps(rules=swapped + "\n")))["order"]
    # ...while KUBE-POSTROUTING must return before it masquerades.
    ret = "-A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN"
    masq = next(line for line in lines if "-j MASQUERADE --random-fully" in line)
    reordered = rules.replace(ret + "\n", "").replace(masq, f"{masq}\n{ret}")
    part = _only(_diff("iptables", Dumps(rules=reordered)))
    assert part["name"] == "KUBE-POSTROUTING" and len(part["order"]) == 3 and not part["missing"]


def test_iptables_other_chains_are_listed_not_compared() -> None:
    cni = "*filter\n:CNI-FORWARD - [0:0]\n-A FORWARD -j CNI-FORWARD\n-A CNI-FORWARD -j ACCEPT\nCOMMIT\n"
    result = _diff("iptables", Dumps(rules=_dumps("iptables").rules + cni))
    assert result.identical and result.others == ("filter CNI-FORWARD (1 rule)", "filter FORWARD (1 rule)")


def test_another_release_is_named() -> None:
    result = _diff("iptables", _dumps("iptables", "1.24"))
    assert not result.identical and [m.version for m in result.best] == ["1.24"] and result.best[0].differences == 0


def test_ipvs_1_28_against_1_31_names_1_28() -> None:
    result = _diff("ipvs", _dumps("ipvs", "1.28"))
    assert result.version == "1.31" and [m.version for m in result.best] == ["1.28"]
    # 1.28's KUBE-IPVS-FILTER has no RETURN for KUBE-EXTERNAL-IP-LOCAL (S1.30), and no KUBE-IPVS-OUT-FILTER...
    assert {d.name for d in result.differences} >= {"KUBE-IPVS-FILTER"}


def test_ipvs_deleted_extra_and_changed_servers() -> None:
    dumps = _dumps("ipvs")
    servers = dumps.ipvs.replace("-a -t 10.96.0.10:80 -r 10.244.1.2:8080 -m -w 1\n", "")
    servers += "-A -t 10.96.0.99:53 -s rr\n"
    sets = dumps.ipsets.replace("add KUBE-NODE-PORT-TCP 30080", "add KUBE-NODE-PORT-TCP 30081")
    result = _diff("ipvs", Dumps(rules=dumps.rules, ipsets=sets, ipvs=servers))
    parts = {d.name: d.as_json() for d in result.differences}
    assert parts["TCP 10.96.0.10:80 rr"]["missing"] == ["10.244.1.2:8080 masq weight 1"]
    assert [e["entry"] for e in parts["virtual servers"]["extra"]] == ["TCP 10.96.0.99:53 rr"]
    assert parts["KUBE-NODE-PORT-TCP"]["changed"][0]["found"] == "30081"
    assert set(parts) == {"TCP 10.96.0.10:80 rr", "virtual servers", "KUBE-NODE-PORT-TCP"}


def test_ipvs_listing_reads_as_the_save_form() -> None:
    listed = (
        "IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n"
        "  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n"
        "TCP  10.96.0.10:80 rr\n  -> 10.244.1.2:8080              Masq    1      0          0\n"
        "TCP  192.168.56.11:30080 rr\n  -> 10.244.1.2:8080              Masq    1      3          1\n"
        "TCP  10.244.1.1:30080 rr\n  -> 10.244.1.2:8080              Masq    1      0          0\n"
    )
    assert _diff("ipvs", Dumps(ipvs=listed)).identical


def test_nftables_deleted_extra_and_changed_rules() -> None:
    script = _dumps("nftables").nft
    script = script.replace("add rule ip kube-proxy masquerading masquerade fully-random\n", "")
    script += "add rule ip kube-proxy mark-for-masquerade ip saddr 10.0.0.1 drop\n"
    script = script.replace("dnat to 10.244.1.2:8080", "dnat to 10.244.1.2:8081")
    parts = {d.name: d.as_json() for d in _diff("nftables", Dumps(nft=script)).differences}
    assert parts["masquerading"]["missing"] == ["masquerade fully-random"]
    assert [e["entry"] for e in parts["mark-for-masquerade"]["extra"]] == ["ip saddr 10.0.0.1 drop"]
    [changed] = parts["endpoint-…-default/openresty/tcp/http__10.244.1.2/8080"]["changed"]
    assert changed["found"] == "meta l4proto tcp dnat to 10.244.1.2:8081"
    assert len(parts) == 3


def test_nftables_listing_form_and_other_hashes() -> None:
    listing = """table ip kube-proxy {
\tcomment "rules for kube-proxy"
\tchain masquerading {
\t\tmeta mark & 0x00004000 == 0x00000000 return
\t\tmeta mark set meta mark ^ 0x00004000
\t\tmasquerade fully-random
\t}
}
table inet cni {
\tchain forward {
\t\ttype filter hook forward priority filter; policy accept;
\t}
}
table ip nat {
\tchain KUBE-SERVICES {
\t}
}
"""
    result = _diff("nftables", Dumps(nft=listing))
    assert "masquerading" not in {d.name for d in result.differences}
    assert result.others == ("table inet cni", "table ip nat (holds 1 KUBE- chain)")


def test_nftables_another_release_is_named() -> None:
    """1.30's and 1.33's tables for these objects are 1.31's (identical); 1.36's picks the endpoint in the service
    chain's DNAT, and is named."""
    assert _diff("nftables", _dumps("nftables", "1.30")).identical
    result = _diff("nftables", _dumps("nftables", "1.36"))
    assert [m.version for m in result.best] == ["1.36"] and result.best[0].differences == 0


def _args(tmp_path: Path, **dumps: str) -> argparse.Namespace:
    given = {kind: None for kind in ("rules", "rules6", "nft", "ipsets", "ipvs")}
    for kind, text in dumps.items():
        (tmp_path / kind).write_text(text)
        given[kind] = str(tmp_path / kind)
    return argparse.Namespace(file=str(SCENARIO), node="node1", variant=[], matrix=None, **given)


@pytest.mark.parametrize(
    ("kind", "text", "says"),
    [
        ("rules", "*nat\n:KUBE-SERVICES - [0:0]\nhello world\nCOMMIT\n", "line 3: not a line of iptables-save"),
        ("rules", "*nat\nCOMMIT\n-A KUBE-SERVICES -j ACCEPT\n", "line 3: a rule or chain outside a table"),
        ("rules", "*nat\n-A KUBE-SERVICES -j LED\nCOMMIT\n", "line 2: -j LED"),
        ("rules", "*nat\n-A KUBE-SERVICES dport 80 -j ACCEPT\nCOMMIT\n", "line 2: `dport` in chain KUBE-SERVICES"),
        ("nft", 'table ip kube-proxy {\ninclude "/etc/passwd"\n}\n', "line 2: `include`"),
        ("ipvs", "-A -t 10.96.0.10:80 -s rr\nnonsense\n", "line 2: expected a line of `ipvsadm -Sn`"),
        ("ipsets", "create S hash:ip\nflush S\n", "line 2: `flush`"),
    ],
)
def test_unknown_input_names_file_line_and_what_was_expected(tmp_path: Path, kind: str, text: str, says: str) -> None:
    with pytest.raises(InstallError) as raised:
        diff_from_args(_args(tmp_path, **{kind: text}))
    assert str(raised.value).startswith(f"--{kind} {tmp_path / kind} {says}")


@pytest.mark.parametrize(("drift", "status"), [("", 0), ("--dport 30080", 1), ("COMMIT", 2)])
def test_exit_status(tmp_path: Path, drift: str, status: int, capsys: pytest.CaptureFixture[str]) -> None:
    """0 identical, 1 differences, 2 a dump that cannot be read (error: names it), never a traceback."""
    rules = _dumps("iptables").rules
    (tmp_path / "dump").write_text(
        rules.replace(drift, "--dport 30081" if drift != "COMMIT" else "BOGUS", 1) if drift else rules
    )
    argv = ["diff", str(SCENARIO), "--node", "node1", "--rules", str(tmp_path / "dump")]
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--variant", "proxyMode=iptables", "--variant", "externalTrafficPolicy=Cluster"])
    assert exited.value.code == status
    out, err = capsys.readouterr()
    assert ("lab replay --rules" in out) == (status < 2)
    assert (f"error: --rules {tmp_path / 'dump'} line " in err) == (status == 2)


def test_a_stale_copy_of_a_chain_keeps_its_hash_and_shows() -> None:
    """Two endpoint chains that say the same endpoint (one left behind by another kube-proxy) are both shown."""
    rules = _dumps("iptables").rules
    sep = re.search(r"KUBE-SEP-[A-Z2-7]{16}", rules).group(0)
    stale = "KUBE-SEP-" + "A" * 16  # sorts before any other hash: the chain in use must still take the name
    copy = [line.replace(sep, stale) for line in rules.splitlines() if line.startswith(f"-A {sep} ")]
    rules = rules.replace(f":{sep} - [0:0]\n", f":{sep} - [0:0]\n:{stale} - [0:0]\n")
    nat_end = rules.rindex("COMMIT")
    rules = rules[:nat_end] + "\n".join(copy) + "\n" + rules[nat_end:]
    part = _only(_diff("iptables", Dumps(rules=rules)))
    assert part["whole"] == "extra" and part["name"] == stale and len(part["extra"]) == 2


def test_an_unknown_node_and_mixed_modes_are_refused(tmp_path: Path) -> None:
    args = _args(tmp_path, rules=_dumps("iptables").rules)
    args.node = "node9"
    with pytest.raises(InstallError, match=r"no node 'node9'; nodes are node1, node2, node3"):
        diff_from_args(args)
    with pytest.raises(InstallError, match=r"--nft is a node in nftables mode: give it alone"):
        diff_from_args(_args(tmp_path, rules=_dumps("iptables").rules, nft=_dumps("nftables").nft))


def test_nftables_named_counters_compare_by_name_not_count() -> None:
    script = _dumps("nftables").nft + "add counter ip kube-proxy stray\n"
    part = _only(_diff("nftables", Dumps(nft=script)))
    assert (part["kind"], part["name"], part["whole"]) == ("counter", "stray", "extra")
    listed = "table ip kube-proxy {\n\tcounter stray {\n\t\tpackets 12 bytes 720\n\t}\n}\n"
    assert "stray" in {d.name for d in _diff("nftables", Dumps(nft=listed)).differences}


def test_another_endpoint_lines_up_by_service_port() -> None:
    """The pod moved to 10.244.1.7: the Service's chain shows its one changed jump, the endpoint chains show which
    endpoint went and which came, named by what they stand for."""
    result = _diff("iptables", Dumps(rules=_dumps("iptables").rules.replace("10.244.1.2", "10.244.1.7")))
    parts = {d.name: d.as_json() for d in result.differences}
    assert set(parts) == {
        "KUBE-SVC(default/openresty:http)",
        "KUBE-SEP(default/openresty:http 10.244.1.2:8080)",
        "KUBE-SEP(default/openresty:http 10.244.1.7:8080)",
    }
    [changed] = parts["KUBE-SVC(default/openresty:http)"]["changed"]
    assert changed["found"].endswith("-j KUBE-SEP(default/openresty:http 10.244.1.7:8080)")
    assert parts["KUBE-SEP(default/openresty:http 10.244.1.2:8080)"]["whole"] == "missing"
    assert parts["KUBE-SEP(default/openresty:http 10.244.1.7:8080)"]["whole"] == "extra"
