//go:build tools

// Package tools records the main packages that hack/build-control-plane.sh builds, so that
// `go mod tidy` keeps their modules (and go.sum lines) in hack/go.mod. It is never compiled:
// the `tools` build tag is never set.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
