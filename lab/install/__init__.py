"""install: rendered text fed to the real tools in a node's namespace, and the processes a cluster runs
there (backends, kube-proxy's health servers, the actors around the cluster); changes over time (steps)."""
