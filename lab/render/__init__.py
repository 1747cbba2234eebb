"""render: what kube-proxy of a version writes on a node, as text (pure; kube-proxy's knowledge)."""
