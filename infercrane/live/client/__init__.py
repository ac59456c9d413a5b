"""The request edge: the command's one connection (:mod:`.api`), reads, writes and dry runs
(:mod:`.cluster`), and what a failed request means (:mod:`.failures`)."""
