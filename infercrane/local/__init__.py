"""The embedded local control plane (see :mod:`infercrane.local.plane`)."""
