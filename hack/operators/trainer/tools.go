//go:build tools

// Package tools records Kubeflow Trainer's controller manager main package, so that `go mod tidy`
// keeps its module and go.sum lines here. It is never compiled: the `tools` build tag is never set.
package tools

import (
	_ "github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager"
)
