"""The engine layer: the Automation API on the one program, Pulumi's state read directly, and the
operations built on them (plan, deploy with idempotency, exact destroy, promotion's health gate)."""
