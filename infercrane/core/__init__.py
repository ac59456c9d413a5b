"""Pure core: the configuration model and its validation, naming, image and GPU rules, engines,
kinds, the intent hash, rendering, guards, URNs, promotion bundles, every error class
(:mod:`.errors`) and how a rollout stops (:mod:`.stops`).

No pulumi, no Kubernetes client, no ``os``/``pathlib``/``subprocess``: values and the environment
are passed in, so everything here is a function of its arguments (import-linter enforces it).
"""
