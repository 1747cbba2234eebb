"""kube-proxy's UDP conntrack cleanup per release (lab/render/kubeproxy/conntrack.py): the commands of the
event-driven era (up to 1.31) and the reconciler's frontends (1.32 on), from one sync's before and after."""

from __future__ import annotations

from dataclasses import replace

from lab.install.conntrack import parse_entries
from lab.render.kubeproxy.conntrack import Frontend, cleanup, deletions
from lab.render.kubeproxy.service import Endpoint, ServicePort
from lab.render.kubeproxy.versions import Release

A = Endpoint("10.244.1.2", 8125, is_local=True)
B = Endpoint("10.244.2.2", 8125, is_local=False)


def statsd(*endpoints: Endpoint, protocol: str = "UDP") -> ServicePort:
    return ServicePort(
        namespace="default",
        name="statsd",
        port_name="",
        protocol=protocol,  # type: ignore[arg-type]
        port=8125,
        cluster_ip="10.96.0.20",
        node_port=30125,
        external_ips=("203.0.113.9",),
        endpoints=endpoints,
    )


def test_deleted_endpoint_up_to_1_31():
    """#59368: entries NATed to the endpoint that left, for every frontend IP and the NodePort."""
    plan = cleanup([statsd(A, B)], [statsd(B)], Release.of("1.31"))
    assert plan.commands == (
        ("-D", "--orig-dst", "10.96.0.20", "--dst-nat", "10.244.1.2", "-p", "udp"),
        ("-D", "--orig-dst", "203.0.113.9", "--dst-nat", "10.244.1.2", "-p", "udp"),
        ("-D", "-p", "udp", "--dport", "30125", "--dst-nat", "10.244.1.2"),
    )
    assert plan.why == ("Deleted endpoint may have stale conntrack entries: default/statsd 10.244.1.2",)


def test_newly_active_service_up_to_1_31():
    """#48370: 0 -> 1 endpoints flushes every UDP entry to the Service's frontends (the black-hole ones)."""
    plan = cleanup([statsd()], [statsd(A)], Release.of("1.28"))
    assert plan.commands == (
        ("-D", "--orig-dst", "10.96.0.20", "-p", "udp"),
        ("-D", "--orig-dst", "203.0.113.9", "-p", "udp"),
        ("-D", "-p", "udp", "--dport", "30125"),
    )


def test_readiness_counts_from_1_23():
    """#106163: an endpoint going not-ready is a deleted one from 1.23; 1.22 still counted it as present."""
    unready = replace(A, ready=False, serving=False)
    assert cleanup([statsd(A, B)], [statsd(unready, B)], Release.of("1.22")).empty
    assert cleanup([statsd(A, B)], [statsd(unready, B)], Release.of("1.23")).commands[0][4] == "10.244.1.2"


def test_restart_flushes_every_udp_service_up_to_1_31():
    """#122740: a restarted kube-proxy sees every Service go from nothing to its endpoints."""
    plan = cleanup([statsd(A)], [statsd(A)], Release.of("1.31"), restart=True)
    assert ("-D", "--orig-dst", "10.96.0.20", "-p", "udp") in plan.commands
    assert cleanup([statsd(A)], [statsd(A)], Release.of("1.31")).empty


def test_tcp_is_never_cleaned():
    assert cleanup([statsd(A, protocol="TCP")], [statsd(protocol="TCP")], Release.of("1.25")).empty
    assert cleanup([statsd(A, protocol="TCP")], [statsd(protocol="TCP")], Release.of("1.33")).empty


def test_deleted_service_up_to_1_31_and_not_after():
    assert cleanup([statsd(A)], [], Release.of("1.30")).commands == (("-D", "--orig-dst", "10.96.0.20", "-p", "udp"),)
    assert cleanup([statsd(A)], [], Release.of("1.32")).empty  # #141371
    assert cleanup([statsd(A)], [], Release.of("1.37")).empty


def test_reconciler_cleans_deleted_services_from_1_38():
    """#141371 (1.38): the UDP Service ports deleted since the last sync are reconciled against nothing, every
    frontend IP:port of theirs; the NodePort is skipped, as for any port without serving endpoints."""
    plan = cleanup([statsd(A)], [], Release.of("1.38"))
    assert dict(plan.reconcile) == {
        Frontend("10.96.0.20", 8125): frozenset(),
        Frontend("203.0.113.9", 8125): frozenset(),
    }
    assert plan.why == ("default/statsd was deleted: its Service IPs' entries go (#141371)",)
    # A restarted kube-proxy's first sync knows no deleted Service; TCP ports are never reconciled.
    assert cleanup([statsd(A)], [], Release.of("1.38"), restart=True).empty
    assert cleanup([statsd(A, protocol="TCP")], [], Release.of("1.38")).empty


def test_a_live_service_keeps_a_frontend_a_deleted_one_shared():
    """A deleted port's frontend that a live Service also holds keeps the live one's endpoints (kube-proxy
    reconciles the deleted ones first and lets the live ones overwrite), and a port whose number changed is an
    update, not a deletion (ServicePortName has no number)."""
    other = replace(statsd(B), name="statsd-new", cluster_ip="10.96.0.21")  # holds the same externalIP:8125
    plan = cleanup([statsd(A), other], [other], Release.of("1.38"))
    assert dict(plan.reconcile)[Frontend("203.0.113.9", 8125)] == frozenset({"10.244.2.2"})
    assert dict(plan.reconcile)[Frontend("10.96.0.20", 8125)] == frozenset()
    renumbered = replace(statsd(A), port=8126)
    assert Frontend("10.96.0.20", 8125) not in dict(cleanup([statsd(A)], [renumbered], Release.of("1.38")).reconcile)


def test_reconciler_from_1_32():
    """Every frontend IP:port and the NodePort, with the endpoints that may stay behind them."""
    plan = cleanup([statsd(A, B)], [statsd(B)], Release.of("1.32"))
    assert plan.commands == ()
    assert dict(plan.reconcile) == {
        Frontend("10.96.0.20", 8125): frozenset({"10.244.2.2"}),
        Frontend("203.0.113.9", 8125): frozenset({"10.244.2.2"}),
        Frontend(None, 30125): frozenset({"10.244.2.2"}),
    }


def test_reconciler_skips_services_scaled_to_zero():
    """#139628: with no serving endpoint the Service is skipped, so its entries to the dead pods stay."""
    plan = cleanup([statsd(A)], [statsd()], Release.of("1.35"))
    assert plan.empty
    assert "#139628" in plan.why[0]
    terminating = replace(A, ready=False, serving=True, terminating=True)
    kept = cleanup([statsd(A)], [statsd(terminating)], Release.of("1.33"))
    assert dict(kept.reconcile)[Frontend("10.96.0.20", 8125)] == frozenset({"10.244.1.2"})


def test_reconciler_cleans_services_scaled_to_zero_from_1_37():
    """#139629 (1.37): a Service left without a serving endpoint is reconciled against nothing, so every entry to
    its ClusterIP and external IP goes; its NodePort is still skipped (matched by port alone)."""
    plan = cleanup([statsd(A)], [statsd()], Release.of("1.37"))
    assert dict(plan.reconcile) == {
        Frontend("10.96.0.20", 8125): frozenset(),
        Frontend("203.0.113.9", 8125): frozenset(),
    }
    assert "#139629" in plan.why[0] and "NodePort are left alone" in plan.why[0]


LISTING = """\
udp      17 29 src=10.244.1.2 dst=10.96.0.20 sport=40125 dport=8125 src=10.244.1.2 dst=10.244.1.2 sport=8125 dport=40125 [ASSURED] mark=0 use=1
udp      17 12 src=10.244.1.3 dst=10.96.0.20 sport=40126 dport=8125 [UNREPLIED] src=10.244.2.2 dst=10.244.1.3 sport=8125 dport=40126 mark=0 use=1
udp      17 12 src=192.168.56.100 dst=192.168.56.11 sport=5000 dport=30125 [UNREPLIED] src=10.244.9.9 dst=192.168.56.11 sport=8125 dport=5000 mark=0 use=1
udp      17 12 src=10.244.1.3 dst=10.96.0.99 sport=40127 dport=53 src=10.244.3.3 dst=10.244.1.3 sport=53 dport=40127 mark=0 use=1
"""  # noqa: E501 (conntrack -L's lines as it prints them)


def test_reconciler_deletes_entries_answered_by_no_serving_endpoint():
    """conntrack -L as the tool prints it; entries to a frontend whose reply source is not serving go."""
    entries = parse_entries(LISTING + "conntrack v1.4.7 (conntrack-tools): 4 flow entries have been shown.\n")
    assert [e.reply_src for e in entries] == ["10.244.1.2", "10.244.2.2", "10.244.9.9", "10.244.3.3"]
    assert entries[0].text.startswith("udp 17 29 src=10.244.1.2 dst=10.96.0.20 sport=40125")
    plan = cleanup([statsd(A, B)], [statsd(A)], Release.of("1.33"))
    gone = deletions(plan, entries)
    # B left: the entry it answered; the NodePort entry answered by an unknown address; not the other Service's.
    assert [d.args for d in gone] == [
        ("-D", "-p", "udp", "--orig-dst", "10.96.0.20", "--orig-port-dst", "8125", "--reply-src", "10.244.2.2"),
        ("-D", "-p", "udp", "--orig-port-dst", "30125", "--reply-src", "10.244.9.9"),
    ]
    assert [d.done for d in gone] == [f"deleted {entries[1].text}", f"deleted {entries[2].text}"]


def test_a_frontend_is_named_as_kube_proxy_writes_an_address_and_port_in_each_family():
    """An IPv6 address in brackets, or its last group would read as the port (a stale entry's reason names it)."""
    assert str(Frontend("10.96.0.20", 8125)) == "10.96.0.20:8125"
    assert str(Frontend("fd00:10:96::14", 8125)) == "[fd00:10:96::14]:8125"
    assert str(Frontend(None, 30125)) == "NodePort 30125"
