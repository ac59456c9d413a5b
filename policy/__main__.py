"""InferCrane's policy pack: `pulumi preview --policy-pack policy` (see infercrane/shell/policy.py)."""

from infercrane.shell.policy import pack

pack()
