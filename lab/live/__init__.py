"""A live lab: one scenario variant built and kept running (`lab up`) until `lab down`, to stand in.

Beside the pipeline, like replay and vm: `lab up` resolves the variant, then a detached keeper process builds it
as the Python API does (lab.api.cluster.hold: the pipeline's own stages), starts the backends and keeps a probe
session open. The
keeper owns the run (its state in /run/lab names the keeper's pid), so the usual leftover rules apply: nothing of
a live keeper is swept, and whatever a killed one leaves is removed by `lab down`. `lab exec` and `lab shell` enter
an actor's namespace; `lab probe` asks the keeper, over a root-only Unix socket, to run a probe with the same
code `lab run` uses.
"""
