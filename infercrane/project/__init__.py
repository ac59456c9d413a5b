"""Project files: where the project is, stack files (strict read, validation with the
environment, comment-preserving edits) and where the real tools are. Above the pure core; no
Pulumi, no Kubernetes client."""
