"""The Pulumi state as InferCrane names it: URNs (identity = the key) and times. Pure core."""
