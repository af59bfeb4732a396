//go:build tools

// Package tools records Argo Workflows' workflow-controller main package, so that `go mod tidy`
// keeps its module and go.sum lines here. It is never compiled: the `tools` build tag is never set.
// v4.0.5 has reported security flaws: the tests run it only on the test control plane, on loopback.
package tools

import (
	_ "github.com/argoproj/argo-workflows/v4/cmd/workflow-controller"
)
