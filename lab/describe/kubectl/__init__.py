"""lab import: a describe front end. kubectl's objects (Nodes, Pods, Services, EndpointSlices, kube-proxy's
ConfigMap, kubectl version) become a scenario file of the lab's own format, which describe then validates like
any other; what the lab cannot reproduce is said, never dropped silently."""
