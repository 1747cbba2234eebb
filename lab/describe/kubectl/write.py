"""The imported scenario as YAML text: block style, keys in the order written, versions quoted."""

from __future__ import annotations

from typing import Any

import yaml

# libyaml's emitter where PyYAML was built with it: the same text as PyYAML's own, tens of times faster, which a
# cluster of thousands of pods needs (PyYAML's emitter took most of such an import's time).
_Base: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # type: ignore[assignment]


class _Dumper(_Base):  # type: ignore[valid-type,misc]
    def ignore_aliases(self, data: Any) -> bool:
        return True  # a value used twice is written twice: a scenario is read by people


def scenario_text(scenario: dict[str, Any]) -> str:
    head = "# Written by lab import. Every probe has `expect: observe`: it records what the kernel did and passes.\n"
    return head + yaml.dump(scenario, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=120)
