#!/usr/bin/env bash
# Write the wrapper module tools/go/kubernetes-<minor> for a pinned Kubernetes patch release:
# k8s.io/kubernetes replaces each of its staging modules with ./staging/...; a wrapper module
# cannot see those, so it replaces each with the published v0.<minor>.<patch> instead, then
# `go mod tidy` writes go.sum (downloads from the Go module proxy). Run once per new pin; the
# result is committed and builds with -mod=readonly (tools/build.sh kube@<minor>).
#
# Usage: tools/kube-module.sh 1.34.4
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
version="${1:?usage: tools/kube-module.sh <patch release, e.g. 1.34.4>}"
minor="${version%.*}"
staging="v0.${version#1.}"
dir="$here/go/kubernetes-$minor"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && go mod init tmp >/dev/null 2>&1 && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@v$version" >info.json)
gomod="$(python3 -c 'import json; print(json.load(open("'"$tmp"'/info.json"))["GoMod"])')"
go_directive="$(awk '$1 == "go" {print $2; exit}' "$gomod")"
mkdir -p "$dir"
{
  echo "module infercrane.local/tools/kubernetes"
  echo
  echo "go $go_directive"
  awk '$1 == "godebug" && $2 != "(" {print}' "$gomod"  # e.g. godebug default=go1.26: the release's own runtime defaults
  echo
  echo "// k8s.io/kubernetes replaces every staging module with ./staging/...; a wrapper"
  echo "// module cannot see those directories, so it pins the published $staging of each."
  echo "replace ("
  awk '/=> \.\/staging\/src\// {print "\t" $1 " => " $1 " '"$staging"'"}' "$gomod" | sort -u
  echo ")"
  echo
  echo "tool ("
  for cmd in kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet; do echo "	k8s.io/kubernetes/cmd/$cmd"; done
  echo ")"
  echo
  echo "require k8s.io/kubernetes v$version"
} >"$dir/go.mod"
(cd "$dir" && GOFLAGS=-mod=mod go mod tidy)
echo "wrote $dir (go $go_directive, staging $staging)"
