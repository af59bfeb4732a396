//go:build tools

// Package tools records the Kubeflow training-operator's main package, so that `go mod tidy`
// keeps its module and go.sum lines here. It is never compiled: the `tools` build tag is never set.
package tools

import (
	_ "github.com/kubeflow/training-operator/cmd/training-operator.v1"
)
