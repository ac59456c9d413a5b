"""What the engines say of themselves: the serving evidence of a ready replica (:mod:`.served`)
and a canary's counts, from its pods (:mod:`.canary`) or from Prometheus (:mod:`.prometheus`)."""
