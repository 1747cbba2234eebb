"""The one agreement harness: rule sets rendered from kube-proxy's own test inputs, each with the packet flows
kube-proxy's tests expect of it (support.flows), turned into pytest cases that replay every flow on the kernel.
test_kubeproxy_agreement (iptables), test_nftables_agreement and test_replay_goldens build on it."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping

import pytest

from lab.render.kubeproxy.service import ProxyConfig, ServicePort
from lab.replay.run import ReplayResult
from support.cases import external_policy_service, internal_policy_service
from support.flows import INTERNAL_POLICY_FLOWS, Flow, agree, external_policy_flows, internal_policy_flows

Inputs = tuple[list[ServicePort], ProxyConfig]


class Agreement:
    """Named rule sets (their inputs) and the flows each must pass."""

    def __init__(self) -> None:
        self.inputs: dict[str, Callable[[], Inputs] | None] = {}  # None: the rules are given (a golden file)
        self.flows: dict[str, list[Flow]] = {}

    def ruleset(self, name: str, inputs: Callable[[], Inputs] | None, flows: list[Flow]) -> None:
        self.inputs[name] = inputs
        self.flows[name] = flows

    def add_traffic_policy_rulesets(self, config: ProxyConfig) -> None:
        """TestExternalTrafficPolicyLocal / Cluster and TestInternalTrafficPolicy, whose inputs and flows kube-proxy's
        iptables and nftables tests share, rendered with the mode's fake config."""
        for policy in ("Local", "Cluster"):
            self.ruleset(
                f"TestExternalTrafficPolicy{policy}",
                lambda policy=policy: ([external_policy_service(policy)], config),
                external_policy_flows(policy),
            )
        for variant in INTERNAL_POLICY_FLOWS:
            for with_endpoints in (True, False):
                self.ruleset(
                    f"TestInternalTrafficPolicy/{variant}" + ("" if with_endpoints else "/endpoints deleted"),
                    lambda variant=variant, with_endpoints=with_endpoints: (
                        [internal_policy_service(variant, with_endpoints=with_endpoints)],
                        config,
                    ),
                    internal_policy_flows(variant, with_endpoints),
                )

    def cases(
        self,
        skips: Mapping[str, str] = {},
        xfails: Mapping[str, str] = {},
        layouts: Callable[[str], Mapping[str, str]] | None = None,
    ) -> list:
        """One case per rule set, layout and flow, with id "[layout/]ruleset/flow" and parameters (name, flow) or,
        with `layouts` (ruleset -> {label: version}), (name, version, flow). A skip names "ruleset/flow" (every
        layout), an xfail the whole id; either naming no case is an error."""
        params = []
        for name, flows in self.flows.items():
            for label, version in (layouts(name) if layouts else {"": ""}).items():
                for flow in flows:
                    case = "/".join(part for part in (label, name, flow.name) if part)
                    marks = []
                    if f"{name}/{flow.name}" in skips:
                        marks.append(pytest.mark.skip(reason=skips[f"{name}/{flow.name}"]))
                    if case in xfails:
                        marks.append(pytest.mark.xfail(strict=True, reason=xfails[case]))
                    values = (name, version, flow) if layouts else (name, flow)
                    params.append(pytest.param(*values, id=case, marks=marks))
        ids = {p.id for p in params}
        assert not xfails.keys() - ids, "an xfail names no case"
        assert not skips.keys() - {f"{name}/{flow.name}" for name, flows in self.flows.items() for flow in flows}, (
            "a skip names no case"
        )
        return params


def assert_agrees(result: ReplayResult, flow: Flow) -> None:
    assert agree(result, flow), json.dumps(result.as_json(), indent=1)
