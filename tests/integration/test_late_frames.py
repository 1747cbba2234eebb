"""A probe's path is its own connection's: a packet of an earlier connection of the same client that reaches a
capture after the next probe started (the client's RST or FIN, late on a busy machine: seen under lab vm while
another worker loaded the cores) is not counted as the next probe's, so it cannot say where that one entered."""

from __future__ import annotations

import time

from support.host import REPO

from lab.describe.load import load_scenario
from lab.pipeline import standing
from lab.probe import send as send_module
from lab.probe.craft import send_from
from lab.probe.session import ProbeSession


def test_a_late_packet_of_an_earlier_connection_is_not_the_next_probes(host_unchanged, monkeypatch):
    axes = {"externalTrafficPolicy": ["Cluster"], "proxyMode": ["iptables"], "kubeVersion": ["1.31"]}
    (topo,) = load_scenario(REPO / "topologies" / "nodeport-source-ip.yaml", axes).variants
    probe = next(p for p in topo.probes if p.name == "via-node-with-pod")
    with standing(topo) as stood, ProbeSession(stood.realized) as session:
        first = session.run(probe, topo)
        assert first.outcome == "delivered", first.explanation
        assert len(session.observer.client_sockets) == 1, session.observer.client_sockets
        (earlier,) = session.observer.client_sockets
        ip, port = earlier.rsplit(":", 1)
        client = stood.realized.ns_of(probe.source)
        real_send = send_module.send

        def late_then_send(*args: object, **kwargs: object) -> object:
            # A SYN from the earlier connection's socket, after the mark: the node answers it, the client RSTs.
            send_from(client, ip, probe.dst_ip, probe.dst_port, "TCP", int(port))
            time.sleep(0.1)
            return real_send(*args, **kwargs)

        monkeypatch.setattr(send_module, "send", late_then_send)
        second = session.run(probe, topo)
    assert second.outcome == "delivered", second.explanation
    assert len(session.observer.client_sockets) == 2
    assert not [hop for hop in second.hops if earlier in hop.packet], second.path
    assert second.entry == first.entry
    # When each entered its node, from the captures (what an affinity probe reads against the Service's timeout).
    assert first.entered_at is not None and second.entered_at is not None
    assert first.entered_at < second.entered_at
