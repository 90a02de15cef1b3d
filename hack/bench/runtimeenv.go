/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/egressproxy/provider-egressproxy/internal/testenv"
)

// runtimeFile is the provider's documented runtime: make bench runs the
// provider with the environment its DeploymentRuntimeConfig gives the
// provider's container (GOMEMLIMIT among it), as a cluster would.
const runtimeFile = "examples/runtime/provider-egressproxy.yaml"

const errFmtRuntimeEnv = "cannot read the provider's environment from %s"

// runtimeEnv returns NAME=value for every environment variable with a
// literal value of the package-runtime container of the
// DeploymentRuntimeConfig in path (one of several YAML documents).
func runtimeEnv(path string) ([]string, error) {
	b, err := os.ReadFile(path) //nolint:gosec // Our own example.
	if err != nil {
		return nil, errors.Wrapf(err, errFmtRuntimeEnv, path)
	}
	var env []string
	for _, doc := range strings.Split(string(b), "\n---") {
		var drc struct {
			Kind string `json:"kind"`
			Spec struct {
				DeploymentTemplate struct {
					Spec struct {
						Template corev1.PodTemplateSpec `json:"template"`
					} `json:"spec"`
				} `json:"deploymentTemplate"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &drc); err != nil {
			return nil, errors.Wrapf(err, errFmtRuntimeEnv, path)
		}
		if drc.Kind != "DeploymentRuntimeConfig" {
			continue
		}
		for _, c := range drc.Spec.DeploymentTemplate.Spec.Template.Spec.Containers {
			if c.Name != "package-runtime" {
				continue
			}
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					env = append(env, e.Name+"="+e.Value)
				}
			}
		}
	}
	return env, nil
}

// documentedRuntimeEnv is runtimeEnv of runtimeFile in this checkout.
func documentedRuntimeEnv() ([]string, error) {
	return runtimeEnv(filepath.Join(testenv.RepoRoot(), runtimeFile))
}
