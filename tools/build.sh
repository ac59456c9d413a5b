#!/usr/bin/env bash
# Build the pinned real tools (Pulumi CLI, pulumi-resource-kubernetes, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl, etcd, kwok, the KServe manager with its official
# CRDs and default configuration, and the local plane's real node: the kubelet, containerd with its
# runc shim, and the node's own images' binaries -- pause and the engine double -- Prometheus, and
# the ssa-oracle: Kubernetes' own server-side apply field manager, the read-only plan's referee, and
# the local plane's registry: distribution's reference implementation)
# from the Go module proxy.
#
# Each tool lands in its own cache entry, keyed by its pin in tools/versions.env:
#     $INFERCRANE_TOOLS_DIR/<tool>-<version>/bin/...
# (default INFERCRANE_TOOLS_DIR: ${XDG_CACHE_HOME:-$HOME/.cache}/infercrane/tools).
# An entry is built in a temporary directory and renamed into place only when complete, so an
# interrupted build never leaves a half-filled entry. Entries already present are reused; a tool
# already on PATH at the pinned version is linked into the entry instead of being built.
#
# Usage: tools/build.sh [--print-path | --print-kube-path MINOR] [TOOL ...]
#   TOOL: pulumi kubernetes-provider kube etcd kwok kserve gateway-api actionlint node node-images prometheus
#         ssa-oracle registry, or kube@MINOR
#         (another Kubernetes of KUBERNETES_VERSIONS, e.g. kube@1.34; `kube` is KUBERNETES_VERSION)
#   --print-path        print the PATH entries for the built tools (one per line) and exit
#   --print-kube-path   print the bin directory of that Kubernetes minor's entry and exit
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
cache="${INFERCRANE_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/infercrane/tools}"
all_tools=(pulumi kubernetes-provider kube etcd kwok kserve gateway-api actionlint node node-images prometheus ssa-oracle registry)

# node-images is keyed by its sources (the engine double changes with the tests that use it).
node_images_key() {
  (cd "$here/go/node-images" && find . -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12)
}

# ssa-oracle is keyed by its sources too (its go.mod pins the apimachinery it runs).
ssa_oracle_key() {
  (cd "$here/go/ssa-oracle" && find . -type f | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-12)
}

# kube_patch MINOR: the pinned patch release of a Kubernetes minor (1.34 -> 1.34.4), or fail.
kube_patch() {
  local v
  for v in $KUBERNETES_VERSIONS; do [[ "${v%.*}" == "$1" || "$v" == "$1" ]] && { echo "$v"; return 0; }; done
  echo "Kubernetes $1 is not pinned (tools/versions.env KUBERNETES_VERSIONS: $KUBERNETES_VERSIONS)" >&2
  return 2
}

entry() {
  case "$1" in
    kube@*) local patch; patch="$(kube_patch "${1#kube@}")" || return 2; echo "$cache/kubernetes-$patch" ;;
    pulumi) echo "$cache/pulumi-$PULUMI_VERSION" ;;
    kubernetes-provider) echo "$cache/pulumi-resource-kubernetes-$PULUMI_KUBERNETES_VERSION" ;;
    kube) echo "$cache/kubernetes-$KUBERNETES_VERSION" ;;
    etcd) echo "$cache/etcd-$ETCD_VERSION" ;;
    kwok) echo "$cache/kwok-$KWOK_VERSION" ;;
    kserve) echo "$cache/kserve-$KSERVE_VERSION-$KSERVE_BUILD" ;;
    gateway-api) echo "$cache/gateway-api-$GATEWAY_API_VERSION" ;;
    actionlint) echo "$cache/actionlint-$ACTIONLINT_VERSION" ;;
    node) echo "$cache/node-$KUBERNETES_VERSION-containerd-$CONTAINERD_VERSION" ;;
    node-images) echo "$cache/node-images-$(node_images_key)" ;;
    prometheus) echo "$cache/prometheus-$PROMETHEUS_VERSION" ;;
    ssa-oracle) echo "$cache/ssa-oracle-$(ssa_oracle_key)" ;;
    registry) echo "$cache/registry-$REGISTRY_VERSION" ;;
    *) echo "unknown tool '$1' (known: ${all_tools[*]})" >&2; return 2 ;;
  esac
}

if [[ "${1:-}" == "--print-kube-path" ]]; then
  dir="$(entry "kube@${2:?--print-kube-path needs a minor, e.g. 1.34}")" || exit 2
  echo "$dir/bin"
  exit 0
fi

if [[ "${1:-}" == "--print-path" ]]; then
  for t in "${all_tools[@]}"; do echo "$(entry "$t")/bin"; done
  echo "$here/language-host"  # stand-in Python language host for plain `pulumi` (see its shim.py)
  exit 0
fi

log() { printf '[tools %(%H:%M:%S)T] %s\n' -1 "$*" >&2; }

# Build flags shared by every tool: reproducible paths, no VCS stamping (module builds),
# the wrapper modules' committed go.sum is the source of truth.
export GOFLAGS="-trimpath -buildvcs=false -mod=readonly"
export CGO_ENABLED=0
# The compiler collects its garbage 4x less often (about 2 GiB of memory at most here): Kubernetes'
# kube-scheduler from a cold build cache in 112 s against 132-159 s at Go's default (2 cores,
# 2026-12-07). A GOGC of the caller's own is kept.
export GOGC="${GOGC:-400}"

# ambient TOOL VERSION_SUBSTRING BINARY... : if every binary is on PATH and the first reports the
# pinned version, link them into DEST/bin and succeed.
ambient() {
  local dest="$1" want="$2"; shift 2
  local first="$1" path
  path="$(command -v "$first" 2>/dev/null)" || return 1
  "$path" --version 2>/dev/null | grep -q -- "$want" || "$path" version 2>/dev/null | grep -q -- "$want" || return 1
  mkdir -p "$dest/bin"
  for b in "$@"; do
    path="$(command -v "$b" 2>/dev/null)" || return 1
    ln -sf "$path" "$dest/bin/$b"
  done
}

build_pulumi() {
  local out="$1/bin"
  # The Python language host is its own module; the proxy here refuses it. Report it by name and
  # the fallback used, so a proxy that starts serving it is noticed.
  if ! (cd "$here/go/pulumi" && GOFLAGS=-mod=mod go list -m -json \
      "github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3@latest" >/dev/null 2>&1); then
    log "  pulumi-language-python: module github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3 refused by the module proxy;"
    log "  fallback: the SDK's in-process language server (Automation API) and tools/language-host for plain pulumi"
  fi
  (cd "$here/go/pulumi" && go build -o "$out/pulumi" \
    -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
    github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
}

build_kubernetes_provider() {
  # The provider module embeds schema-embed.json and terraform-mapping-embed.json, which are
  # generated (not in the module zip): copy the module out of the module cache, run its own
  # generate.go, and build with the committed wrapper go.mod (the ../sdk replace dropped).
  local out="$1/bin" src="$1/src" mod="github.com/pulumi/pulumi-kubernetes/provider/v4"
  local dir
  dir="$(cd "$here/go/pulumi-resource-kubernetes" && GOFLAGS=-mod=mod go mod download -json "$mod@$PULUMI_KUBERNETES_MODULE" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  cp -r "$dir" "$src"
  chmod -R u+w "$src"
  cp "$here/go/pulumi-resource-kubernetes/go.mod" "$here/go/pulumi-resource-kubernetes/go.sum" "$src/"
  (cd "$src/cmd/pulumi-resource-kubernetes" && VERSION="$PULUMI_KUBERNETES_VERSION" go run generate.go)
  (cd "$src" && go build -o "$out/pulumi-resource-kubernetes" \
    -ldflags "-s -w -X $mod/pkg/version.Version=$PULUMI_KUBERNETES_VERSION" ./cmd/pulumi-resource-kubernetes)
  rm -rf "$src"
}

# kube_ldflags VERSION: the version stamps of a Kubernetes binary.
kube_ldflags() {
  local v="v$1" ldflags="-s -w"
  for k in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $k.gitVersion=$v -X $k.gitTreeState=clean -X $k.buildDate=1970-01-01T00:00:00Z"
    ldflags+=" -X $k.gitMajor=${1%%.*} -X $k.gitMinor=$(cut -d. -f2 <<<"$1")"
  done
  echo "$ldflags"
}

# build_kube DEST [PATCH]: the control plane and kubectl of one Kubernetes release (default
# KUBERNETES_VERSION) from its wrapper module tools/go/kubernetes-<minor>; another release of the
# matrix (kube@MINOR) gets its kubelet too, for the real node of a plane of that version (the
# default release's kubelet is in the node entry, beside containerd).
build_kube() {
  local out="$1/bin" version="${2:-$KUBERNETES_VERSION}" ldflags cmds=(kube-apiserver kube-controller-manager kube-scheduler kubectl)
  local module="$here/go/kubernetes-${version%.*}"
  [[ -f "$module/go.mod" ]] || { log "  kube: no wrapper module $module"; return 1; }
  [[ "$version" == "$KUBERNETES_VERSION" ]] || cmds+=(kubelet)
  ldflags="$(kube_ldflags "$version")"
  for cmd in "${cmds[@]}"; do
    log "  kube $version: $cmd"
    (cd "$module" && go build -o "$out/$cmd" -ldflags "$ldflags" "k8s.io/kubernetes/cmd/$cmd")
  done
}

build_node() {
  # The real node's processes: the kubelet of KUBERNETES_VERSION (its wrapper module), containerd,
  # its runc shim and ctr (tools/go/containerd). runc and the CNI plugins come from Debian's
  # packages (README: the fresh-machine line).
  local out="$1/bin" module="$here/go/kubernetes-${KUBERNETES_VERSION%.*}"
  log "  node: kubelet $KUBERNETES_VERSION"
  (cd "$module" && go build -o "$out/kubelet" -ldflags "$(kube_ldflags "$KUBERNETES_VERSION")" k8s.io/kubernetes/cmd/kubelet)
  for cmd in containerd containerd-shim-runc-v2 ctr; do
    log "  node: $cmd $CONTAINERD_VERSION"
    (cd "$here/go/containerd" && go build -o "$out/$cmd" \
      -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$CONTAINERD_VERSION" \
      "github.com/containerd/containerd/v2/cmd/$cmd")
  done
}

build_node_images() {
  # The binaries of the node's own images (infercrane/local/images.py packs them): pause, and the
  # engine double -- a test double of the engines' interfaces, never an engine.
  for cmd in pause engine-double; do
    (cd "$here/go/node-images" && go build -o "$1/bin/$cmd" -ldflags "-s -w" "./cmd/$cmd")
  done
}

build_etcd() {
  (cd "$here/go/etcd" && go build -o "$1/bin/etcd" -ldflags "-s -w" go.etcd.io/etcd/server/v3)
}

build_kwok() {
  (cd "$here/go/kwok" && go build -o "$1/bin/kwok" -ldflags "-s -w" sigs.k8s.io/kwok/cmd/kwok)
  kwok_stages "$1"
}

build_kserve() {
  # The manager (cmd/manager: InferenceService, TrainedModel and InferenceGraph controllers and
  # KServe's admission webhooks) built with the committed wrapper go.mod, which repeats KServe's
  # own `replace sigs.k8s.io/controller-runtime => v0.19.7` (a dependency's replace does not apply
  # to the module that requires it; KEDA's API types need 0.19). Beside it, from the same module
  # zip: the official CRDs (config/crd/full), the default inferenceservice-config ConfigMap, the
  # manager's ClusterRole and its webhook configurations.
  #
  #
  # One line differs from KServe's own cmd/manager/main.go, built from a copy beside the wrapper's
  # go.mod (the module's sources stay as the proxy served them): the webhook server listens on
  # 127.0.0.1, not on every interface, as every other listener of the local plane does (KServe's
  # manager has no flag for the host).
  local out="$1/bin" share="$1/share" mod="github.com/kserve/kserve" dir src="$1/src"
  dir="$(cd "$here/go/kserve" && GOFLAGS=-mod=mod go mod download -json "$mod@v$KSERVE_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  mkdir -p "$src"
  cp "$here/go/kserve/go.mod" "$here/go/kserve/go.sum" "$src/"
  sed 's|^\(\t\t\tPort: options.webhookPort,\)$|\1\n\t\t\tHost: "127.0.0.1", // infercrane: loopback only|' \
    "$dir/cmd/manager/main.go" >"$src/main.go"
  if [[ "$(grep -c 'Host: "127.0.0.1", // infercrane' "$src/main.go")" != 1 ]]; then
    log "  kserve: cmd/manager/main.go no longer has the webhook server's Port line to bind to loopback"
    return 1
  fi
  if ! (cd "$src" && go build -o "$out/kserve-manager" -ldflags "-s -w" .); then
    log "  kserve: the manager did not build (a dependency refused by the module proxy is named above)"
    return 1
  fi
  rm -rf "$src"
  mkdir -p "$share/crds"
  cp "$dir"/config/crd/full/serving.kserve.io_*.yaml "$share/crds/"
  cp "$dir/config/configmap/inferenceservice.yaml" "$share/inferenceservice-config.yaml"
  cp "$dir/config/rbac/role.yaml" "$share/manager-role.yaml"
  cp "$dir/config/webhook/manifests.yaml" "$share/webhooks.yaml"
  chmod -R u+w "$share"
}

build_gateway_api() {
  # Nothing to build: the official standard-channel CRDs from the pinned module zip (go.sum in
  # the wrapper module pins their hash). bin/ stays empty; share/crds is what the tests apply.
  local dir
  dir="$(cd "$here/go/gateway-api" && go mod download -json "sigs.k8s.io/gateway-api@v$GATEWAY_API_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
  mkdir -p "$1/bin" "$1/share/crds"
  cp "$dir"/config/crd/standard/gateway.networking.k8s.io_*.yaml "$1/share/crds/"
  chmod -R u+w "$1/share"
}

# Prometheus (its server only; the web UI's assets are not built in: the plane asks its HTTP API) --
# the local plane's, scraping the real node's pods, so a canary judged from a Prometheus is tested.
build_prometheus() {
  (cd "$here/go/prometheus" && go build -o "$1/bin/prometheus" -ldflags "-s -w" github.com/prometheus/prometheus/cmd/prometheus)
}

# The read-only plan's referee (tests/integration/test_fields_oracle.py): the field manager the
# API server runs (k8s.io/apimachinery managedfields) with client-go's schema of the built-in types.
build_ssa_oracle() {
  (cd "$here/go/ssa-oracle" && go build -o "$1/bin/ssa-oracle" -ldflags "-s -w" .)
}

# The local plane's OCI registry (distribution's reference implementation, the CNCF registry): the
# real node pulls the engine double and the model images from it, so pulls are real bytes on a wire.
build_registry() {
  (cd "$here/go/registry" && go build -o "$1/bin/registry" -ldflags "-s -w -X github.com/distribution/distribution/v3/version.version=v$REGISTRY_VERSION" \
    github.com/distribution/distribution/v3/cmd/registry)
}

build_actionlint() {
  (cd "$here/go/actionlint" && go build -o "$1/bin/actionlint" \
    -ldflags "-s -w -X github.com/rhysd/actionlint.version=v$ACTIONLINT_VERSION" github.com/rhysd/actionlint/cmd/actionlint)
}

# kwok refuses to start without stages. Assemble the ones kwokctl uses by default (node initialize,
# heartbeat with lease; pod ready, complete, delete) from the pinned kwok module into etc/stages.yaml.
kwok_stages() {
  local dest="$1" dir tmp
  [[ -f "$dest/etc/stages.yaml" ]] && return 0
  dir="$(cd "$here/go/kwok" && GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kwok@v$KWOK_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')/kustomize/stage"
  mkdir -p "$dest/etc"
  tmp="$(mktemp "$dest/etc/.stages.XXXXXX")"
  for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
    pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
    printf -- '---\n' >>"$tmp"
    cat "$dir/$f" >>"$tmp"
  done
  mv "$tmp" "$dest/etc/stages.yaml"
}

ensure() {
  local tool="$1" dest tmp start
  dest="$(entry "$tool")"
  if [[ -d "$dest/bin" ]]; then
    log "$tool: cached at $(basename "$dest")"
    return 0
  fi
  mkdir -p "$cache"
  tmp="$(mktemp -d "$cache/.building-${tool//@/-}.XXXXXX")"
  chmod 755 "$tmp"
  case "$tool" in
    pulumi) ambient "$tmp" "v$PULUMI_VERSION" pulumi && { mv "$tmp" "$dest"; log "$tool: using the one on PATH"; return 0; } ;;
    kube) ambient "$tmp" "v$KUBERNETES_VERSION" kube-apiserver kube-controller-manager kube-scheduler kubectl \
      && { mv "$tmp" "$dest"; log "$tool: using the ones on PATH"; return 0; } ;;
    etcd) ambient "$tmp" "$ETCD_VERSION" etcd && { mv "$tmp" "$dest"; log "$tool: using the one on PATH"; return 0; } ;;
    kwok) ambient "$tmp" "$KWOK_VERSION" kwok && { mv "$tmp" "$dest"; log "$tool: using the one on PATH"; return 0; } ;;
    actionlint) ambient "$tmp" "$ACTIONLINT_VERSION" actionlint && { mv "$tmp" "$dest"; log "$tool: using the one on PATH"; return 0; } ;;
  esac
  rm -rf "$tmp/bin"
  start=$SECONDS
  local logfile="$cache/logs/${tool//@/-}.log" expected
  expected="$(estimate "$tool")"
  mkdir -p "$cache/logs"
  log "$tool: building $(basename "$dest") (about ${expected}s; its go output: $logfile)"
  local build=("build_${tool//-/_}" "$tmp")
  [[ "$tool" == kube@* ]] && build=(build_kube "$tmp" "$(kube_patch "${tool#kube@}")")
  if ! "${build[@]}" >"$logfile" 2>&1; then
    rm -rf "$tmp"
    tail -n 25 "$logfile" >&2
    log "$tool: BUILD FAILED after $((SECONDS - start))s -- the last lines of its go output are above (all of it: $logfile); nothing was installed, the cache holds no half-built entry"
    return 1
  fi
  mv "$tmp" "$dest"
  echo "${tool%@*} $((SECONDS - start))" >>"$cache/build-times"
  left="$(still_to_build)"
  log "$tool: built in $((SECONDS - start))s$([[ $left -gt 0 ]] && echo "; about $(( (left + 59) / 60 )) min left")"
}

# estimate TOOL: seconds its build took here last (the cache's build-times), else a typical time on
# 2 cores with the downloads (a cold `make demo`, 2026-12-07; Prometheus and the ssa-oracle earlier).
estimate() {
  local last
  last="$(awk -v t="${1%@*}" '$1 == t { s = $2 } END { if (s) print s }' "$cache/build-times" 2>/dev/null || true)"
  if [[ -n "$last" ]]; then echo "$last"; return; fi
  case "${1%@*}" in
    pulumi) echo 150 ;; kubernetes-provider) echo 300 ;; kube) echo 210 ;; etcd) echo 20 ;; kwok) echo 50 ;;
    kserve) echo 100 ;; node) echo 60 ;; prometheus) echo 290 ;; actionlint) echo 10 ;; ssa-oracle) echo 130 ;; registry) echo 50 ;; *) echo 5 ;;
  esac
}

# still_to_build: about how many seconds the requested tools not yet in the cache take (their sum:
# the lanes share the machine's cores, and side by side were no faster where measured).
still_to_build() {
  local t sum=0
  for t in "${tools[@]}"; do [[ -d "$(entry "$t")/bin" ]] || sum=$((sum + $(estimate "$t"))); done
  echo "$sum"
}

# Lanes: the missing tools dealt, longest first, to the least loaded of JOBS lanes that build side
# by side (a build's downloads, code generation and single-threaded link leave cores idle that the
# other lane's compile could use). The node builds in the lane of Kubernetes, after it: the same
# wrapper module, its packages compiled once. One lane on 2 cores or fewer: there two lanes took
# 18.5 min for the demo's tools cold against 16.3 one after the other (2026-12-07) -- each go build
# already keeps both cores busy, and two contend.
tools=("$@")
[[ ${#tools[@]} -gt 0 ]] || tools=("${all_tools[@]}")
for t in "${tools[@]}"; do entry "$t" >/dev/null; done
jobs="${INFERCRANE_BUILD_JOBS:-$( (($(nproc) > 2)) && echo 2 || echo 1)}"
[[ "$jobs" =~ ^[1-9][0-9]*$ ]] || { echo "INFERCRANE_BUILD_JOBS must be a whole number of lanes, 1 or more (it is '$jobs')" >&2; exit 2; }
missing=()
for t in "${tools[@]}"; do
  if [[ -d "$(entry "$t")/bin" ]]; then log "$t: cached at $(basename "$(entry "$t")")"; else missing+=("$t"); fi
done
if [[ ${#missing[@]} -gt 0 ]]; then
  left="$(still_to_build)"
  log "to build: ${missing[*]} -- about $(( (left + 59) / 60 )) min on this machine$( ((jobs > 1)) && echo ", $jobs lanes side by side") (once; later runs reuse the cache)"
fi
lanes=() loads=()
for ((i = 0; i < jobs; i++)); do lanes+=(""); loads+=(0); done
for t in $(for m in "${missing[@]}"; do echo "$(estimate "$m") $m"; done | sort -rn | cut -d' ' -f2); do
  lane=0
  for ((i = 1; i < jobs; i++)); do ((loads[i] < loads[lane])) && lane=$i; done
  if [[ "$t" == node || "$t" == kube ]]; then  # one lane for both, whichever was dealt first
    other=$([[ "$t" == node ]] && echo kube || echo node)
    for ((i = 0; i < jobs; i++)); do [[ " ${lanes[i]} " == *" $other "* ]] && lane=$i; done
  fi
  lanes[lane]+=" $t"
  loads[lane]=$((loads[lane] + $(estimate "$t")))
done
# The node right after Kubernetes in its lane, whatever their estimates (whole words: node-images
# and kube@MINOR are other tools).
for ((i = 0; i < jobs; i++)); do
  read -ra words <<<"${lanes[i]}"
  [[ " ${words[*]} " == *" kube "* && " ${words[*]} " == *" node "* ]] || continue
  ordered=()
  for w in "${words[@]}"; do
    [[ "$w" == node ]] && continue
    ordered+=("$w")
    [[ "$w" == kube ]] && ordered+=(node)
  done
  lanes[i]=" ${ordered[*]}"
done
pids=()
for ((i = 0; i < jobs; i++)); do
  [[ -n "${lanes[i]// /}" ]] || continue
  # shellcheck disable=SC2086
  (for t in ${lanes[i]}; do ensure "$t" || exit 1; done) &
  pids+=($!)
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
[[ $failed -eq 0 ]] || { log "a tool did not build (named above); the others are in the cache -- fix it and run again"; exit 1; }
# An entry made before stages were assembled (or a kwok taken from PATH) gets them now.
for t in "${tools[@]}"; do [[ "$t" != kwok ]] || kwok_stages "$(entry kwok)"; done
log "all requested tools ready in $cache"
