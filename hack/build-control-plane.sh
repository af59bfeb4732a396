#!/usr/bin/env bash
# Builds the test control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kwok) from the Go module proxy, at the versions pinned in hack/go.mod, into
#
#     ${STROMBOLI_CACHE:-~/.cache/stromboli}/controlplane/<version>/bin/
#
# and prints that bin directory as the LAST line of its output (everything else goes to
# stderr). <version> is the Kubernetes version plus a short hash of hack/go.mod and
# hack/go.sum, so any change of pins gets a fresh directory.
#
# Idempotent: a binary already in the bin directory is not rebuilt; binaries are built under
# a temporary name and renamed into place, so an interrupted build never leaves a half-written
# binary behind. Any failure exits non-zero with a message.
#
# Reuse: a binary missing here is first looked for in the other version directories. One whose
# embedded build information (`go version -m`: Go version, GOOS/GOARCH/CGO_ENABLED, and every
# linked module at its version, replacements included) equals what this build would link is
# hard-linked in instead of rebuilt, so adding a binary to tools.go (which changes go.sum and
# therefore the directory) rebuilds only that binary. The -ldflags of this script are not part
# of that record (-trimpath omits them); they depend only on module versions, but after
# changing how they are formed, run once with STROMBOLI_FORCE=1.
#
# Environment:
#   STROMBOLI_CACHE       cache root (default ~/.cache/stromboli)
#   STROMBOLI_BUILD_JOBS  `go build -p` (default 2); the build is also run under `nice`
#   STROMBOLI_FORCE=1     rebuild even when binaries exist (here or reusable elsewhere)
#   GO                    the go command (default: go)
#
# The first build takes minutes (about 9 min on 2 cores, plus module downloads); kube-apiserver
# and kube-controller-manager need about 2 GB of RAM each to link. Later runs only hash two files.
set -euo pipefail

die() { echo "build-control-plane: ERROR: $*" >&2; exit 1; }
log() { echo "build-control-plane: $*" >&2; }

HACK_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
GO="${GO:-go}"
JOBS="${STROMBOLI_BUILD_JOBS:-2}"
CACHE_ROOT="${STROMBOLI_CACHE:-${HOME}/.cache/stromboli}"

[[ -f "${HACK_DIR}/go.mod" && -f "${HACK_DIR}/go.sum" ]] || die "missing ${HACK_DIR}/go.mod or go.sum"

# Version of a module required in hack/go.mod (first field after the module path).
required_version() {
    local v
    v="$(awk -v m="$1" '$1 == m && $2 ~ /^v/ { print $2; exit }' "${HACK_DIR}/go.mod")"
    [[ -n "${v}" ]] || die "module $1 is not required in hack/go.mod"
    echo "${v}"
}

KUBE_VERSION="$(required_version k8s.io/kubernetes)"
KWOK_VERSION="$(required_version sigs.k8s.io/kwok)"
ETCD_VERSION="$(required_version go.etcd.io/etcd/server/v3)"

if command -v sha256sum >/dev/null 2>&1; then
    PIN_HASH="$(cat "${HACK_DIR}/go.mod" "${HACK_DIR}/go.sum" | sha256sum | cut -c1-10)"
else
    PIN_HASH="$(cat "${HACK_DIR}/go.mod" "${HACK_DIR}/go.sum" | shasum -a 256 | cut -c1-10)"
fi
OUT_DIR="${CACHE_ROOT}/controlplane/${KUBE_VERSION}-${PIN_HASH}"
BIN_DIR="${OUT_DIR}/bin"

# name | main package | extra ldflags
KUBE_MAJOR="${KUBE_VERSION#v}"; KUBE_MAJOR="${KUBE_MAJOR%%.*}"
KUBE_MINOR="${KUBE_VERSION#v*.}"; KUBE_MINOR="${KUBE_MINOR%%.*}"
KUBE_LDFLAGS=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    KUBE_LDFLAGS+=" -X ${pkg}.gitVersion=${KUBE_VERSION}"
    KUBE_LDFLAGS+=" -X ${pkg}.gitMajor=${KUBE_MAJOR}"
    KUBE_LDFLAGS+=" -X ${pkg}.gitMinor=${KUBE_MINOR}"
    KUBE_LDFLAGS+=" -X ${pkg}.gitTreeState=clean"
done
KWOK_LDFLAGS="-X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}"
KWOK_LDFLAGS+=" -X sigs.k8s.io/kwok/pkg/consts.KubeVersion=${KUBE_VERSION#v}"

TARGETS=(
    "etcd|go.etcd.io/etcd/server/v3|"
    "kube-apiserver|k8s.io/kubernetes/cmd/kube-apiserver|${KUBE_LDFLAGS}"
    "kube-controller-manager|k8s.io/kubernetes/cmd/kube-controller-manager|${KUBE_LDFLAGS}"
    "kube-scheduler|k8s.io/kubernetes/cmd/kube-scheduler|${KUBE_LDFLAGS}"
    "kwok|sigs.k8s.io/kwok/cmd/kwok|${KWOK_LDFLAGS}"
)

# What `go version -m` would record for a build of main package $1 here: Go version, target and
# cgo setting, then the linked modules ("path version[ => path version]"), sorted.
planned_buildinfo() {
    echo "go $("${GO}" env GOVERSION) $("${GO}" env GOOS)/$("${GO}" env GOARCH) CGO_ENABLED=${CGO_ENABLED}"
    (cd "${HACK_DIR}" && "${GO}" list -mod=readonly -deps -f \
        '{{with .Module}}{{.Path}} {{.Version}}{{with .Replace}} => {{.Path}} {{.Version}}{{end}}{{end}}' \
        "$1") | sed '/^$/d' | sort -u
}

# The same record read back from binary $1 (empty if it has none).
built_buildinfo() {
    "${GO}" version -m "$1" 2>/dev/null | awk -F'\t' '
        NR == 1 { split($0, f, ": "); go = f[2] }
        $2 == "build" && $3 ~ /^(GOOS|GOARCH|CGO_ENABLED)=/ { split($3, kv, "="); b[kv[1]] = kv[2] }
        $2 == "mod" || $2 == "dep" { if (cur != "") mods[cur] = 1; cur = $3 " " $4 }
        $2 == "=>" { cur = cur " => " $3 " " $4 }
        END {
            if (cur != "") mods[cur] = 1
            if (go == "") exit
            print "go " go " " b["GOOS"] "/" b["GOARCH"] " CGO_ENABLED=" b["CGO_ENABLED"]
            fflush()
            for (m in mods) print m | "sort -u"
            close("sort -u")
        }'
}

# Path of a binary named $1 in another version directory that links exactly what building
# main package $2 here would (see "Reuse" above); empty if there is none.
reusable_binary() {
    local name="$1" pkg="$2" want cand
    want="$(planned_buildinfo "${pkg}")" || return 0
    for cand in "${CACHE_ROOT}"/controlplane/*/bin/"${name}"; do
        [[ -x "${cand}" && "${cand}" != "${BIN_DIR}/${name}" ]] || continue
        if [[ "$(built_buildinfo "${cand}")" == "${want}" ]]; then
            echo "${cand}"
            return 0
        fi
    done
}

missing=()
for t in "${TARGETS[@]}"; do
    name="${t%%|*}"
    if [[ "${STROMBOLI_FORCE:-0}" == 1 || ! -x "${BIN_DIR}/${name}" ]]; then
        missing+=("${t}")
    fi
done

if (( ${#missing[@]} > 0 )); then
    command -v "${GO}" >/dev/null 2>&1 || die "'${GO}' not found; Go >= $(awk '$1=="go"{print $2}' "${HACK_DIR}/go.mod") is needed"
    mkdir -p "${BIN_DIR}" || die "cannot create ${BIN_DIR}"
    log "building into ${BIN_DIR} (kubernetes ${KUBE_VERSION}, kwok ${KWOK_VERSION}, etcd ${ETCD_VERSION}, go build -p ${JOBS})"
    # Build from the hack module, never touching go.mod/go.sum; CGO off gives static binaries.
    export CGO_ENABLED="${CGO_ENABLED:-0}"
    export GOFLAGS="-mod=readonly -trimpath ${GOFLAGS:-}"
    for t in "${missing[@]}"; do
        IFS='|' read -r name pkg ldflags <<<"${t}"
        tmp="${BIN_DIR}/.${name}.tmp.$$"
        if [[ "${STROMBOLI_FORCE:-0}" != 1 ]]; then
            same="$(reusable_binary "${name}" "${pkg}")"
            if [[ -n "${same}" ]]; then
                ln -f "${same}" "${tmp}" 2>/dev/null || cp -p "${same}" "${tmp}" \
                    || die "cannot copy ${same} to ${BIN_DIR}"
                mv -f "${tmp}" "${BIN_DIR}/${name}"
                log "reused ${name} from ${same%/bin/*} (same Go, target and modules)"
                continue
            fi
        fi
        log "go build ${pkg} -> ${name}"
        start=${SECONDS}
        if ! (cd "${HACK_DIR}" && nice -n 19 "${GO}" build -p "${JOBS}" \
                -ldflags "-s -w ${ldflags}" -o "${tmp}" "${pkg}" >&2); then
            rm -f "${tmp}"
            die "go build of ${pkg} failed"
        fi
        [[ -x "${tmp}" ]] || die "go build of ${pkg} produced no binary"
        mv -f "${tmp}" "${BIN_DIR}/${name}"
        log "built ${name} in $(( SECONDS - start ))s"
    done
    {
        echo "kubernetes ${KUBE_VERSION}"
        echo "kwok ${KWOK_VERSION}"
        echo "etcd ${ETCD_VERSION}"
        echo "go $("${GO}" env GOVERSION)"
    } >"${OUT_DIR}/versions.txt"
fi

for t in "${TARGETS[@]}"; do
    name="${t%%|*}"
    [[ -x "${BIN_DIR}/${name}" ]] || die "${BIN_DIR}/${name} is missing after the build"
done

echo "${BIN_DIR}"
