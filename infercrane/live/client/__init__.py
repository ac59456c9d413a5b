"""The request edge: the command's one connection (:mod:`.api`), reads, writes and dry runs
(:mod:`.cluster`; the kubeconfigs it reads, :mod:`.kubeconfigs`), and what a failed request means
(:mod:`.failures`)."""
