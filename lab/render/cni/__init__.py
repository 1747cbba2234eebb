"""What a CNI plugin's own agent writes on each node beside kube-proxy, one module per CNI, as pure functions."""
