"""The thin Pulumi shell: one explicit provider, one component per replica, and the program that
validates, renders, guards, preflights, registers, exports and waits."""
