module infercrane.local/tools/gateway-api

go 1.26.0

// Only the CRDs are used (config/crd/standard): tools/build.sh gateway-api.
require sigs.k8s.io/gateway-api v1.6.3
