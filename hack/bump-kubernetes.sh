#!/usr/bin/env bash
# Re-pins hack/go.mod to another Kubernetes release:
#
#     hack/bump-kubernetes.sh v1.36.4 [kwok-version]
#
# k8s.io/kubernetes requires its staging modules (k8s.io/api, k8s.io/client-go, ...) at v0.0.0
# and resolves them through ./staging replace lines that only work inside its own repository.
# This script reads the list of staging modules from the release's own go.mod and replaces
# each with the published v0.<minor>.<patch> that matches v1.<minor>.<patch>, then tidies.
# Run it under `nice`; it downloads modules but builds nothing.
set -euo pipefail

die() { echo "bump-kubernetes: ERROR: $*" >&2; exit 1; }

[[ $# -ge 1 && $1 =~ ^v1\.[0-9]+\.[0-9]+$ ]] || die "usage: $0 v1.X.Y [kwok-version]"
KUBE="$1"
STAGING="v0.${KUBE#v1.}"
HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "${HACK_DIR}"

kube_mod="$(go mod download -json "k8s.io/kubernetes@${KUBE}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')"
[[ -f "${kube_mod}" ]] || die "could not download k8s.io/kubernetes@${KUBE}"

# Staging modules: the `k8s.io/x => ./staging/src/k8s.io/x` lines of the release's go.mod.
mapfile -t staging < <(awk '$2 == "=>" && $3 ~ /^\.\/staging\// { print $1 }' "${kube_mod}" | sort -u)
(( ${#staging[@]} > 0 )) || die "no staging replace lines found in ${kube_mod}"

# Drop the old k8s.io replaces, then add the new ones (skipping modules never published,
# such as k8s.io/sample-cli-plugin, which nothing imports).
for old in $(go mod edit -json | awk -F'"' '/"Old":/ { getline; print $4 }' | grep '^k8s.io/' || true); do
    go mod edit -dropreplace="${old}"
done
published=()
for m in "${staging[@]}"; do
    if go mod download "${m}@${STAGING}" >/dev/null 2>&1; then
        published+=("${m}")
    else
        echo "bump-kubernetes: skipping ${m}@${STAGING} (not on the module proxy)" >&2
    fi
done
{
    echo
    echo "replace ("
    for m in "${published[@]}"; do
        printf '\t%s => %s %s\n' "${m}" "${m}" "${STAGING}"
    done
    echo ")"
} >>go.mod
go mod edit -fmt
go mod edit -require="k8s.io/kubernetes@${KUBE}"
if [[ $# -ge 2 ]]; then
    go mod edit -require="sigs.k8s.io/kwok@$2"
fi
go mod tidy
echo "hack/go.mod now pins k8s.io/kubernetes ${KUBE} (staging ${STAGING});" \
     "run hack/build-control-plane.sh to build it" >&2
