"""The embedded local control plane: supervised real processes (etcd, kube-apiserver,
controller-manager, scheduler, kwok, the KServe manager), their certificates and bootstrap.
A sibling of the engine layer: neither imports the other."""
