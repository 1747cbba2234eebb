"""describe's steps from the parsed file to a Topology, one part of the file each, in the order load.py runs them.

parse (the file against the schema), matrix (the variants), then per variant: cluster, network (nodes, external
hosts and routers), workload (pods, Services, endpoints), actors (load balancers, egress gateway,
ip-masq-agent), probes. Each step checks its part against what the earlier steps resolved and returns frozen
topology objects; none reaches back into a later step's part.
"""
