"""What the tests share: kube-proxy's own test inputs and builders (cases), the packet-flow cases and the one
agreement harness (flows, agreement), scenario-file helpers (scenario), the host checks (host) and a throwaway
network namespace (netns). tests/ is on pytest's pythonpath (pyproject.toml): `from support.cases import svc`."""
