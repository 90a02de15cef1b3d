/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package admission

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"

	"github.com/egressproxy/provider-egressproxy/internal/testenv/kube"
)

// TestHealthyColumnShowsCondition checks on a real apiserver that kubectl
// get shows the Healthy condition of every ProviderConfig and
// ClusterProviderConfig in a HEALTHY column: the example of each is created,
// given a Healthy condition, and read back as the Table kubectl prints.
func TestHealthyColumnShowsCondition(t *testing.T) {
	e := kube.Shared(t)
	ns := e.Namespace(t, "healthy-column")
	hc, err := rest.HTTPClientFor(e.Config)
	if err != nil {
		t.Fatal(err)
	}

	seen := 0
	for _, u := range examples(t) {
		if u.GetKind() != "ProviderConfig" && u.GetKind() != "ClusterProviderConfig" {
			continue
		}
		seen++
		group := strings.SplitN(u.GetAPIVersion(), "/", 2)[0]
		t.Run(group+"/"+u.GetKind(), func(t *testing.T) {
			// A False condition on cluster configs and True on namespaced
			// ones shows the column reads the condition, not a constant.
			want := "True"
			path := "/apis/" + u.GetAPIVersion()
			if u.GetKind() == "ClusterProviderConfig" {
				want = "False"
			} else {
				u.SetNamespace(ns)
				path += "/namespaces/" + ns
			}
			u.SetName("healthy-column-" + strings.ToLower(u.GetKind()))
			u.SetAnnotations(nil)
			if err := e.Client.Create(t.Context(), u); err != nil {
				t.Fatalf("cannot create the example: %v", err)
			}
			// t.Context is already canceled when cleanups run.
			t.Cleanup(func() { _ = e.Client.Delete(context.Background(), u) })
			cond := map[string]any{"type": "Healthy", "status": want, "reason": "Checked", "lastTransitionTime": "2026-01-01T00:00:00Z"}
			if err := unstructured.SetNestedSlice(u.Object, []any{cond}, "status", "conditions"); err != nil {
				t.Fatal(err)
			}
			if err := e.Client.Status().Update(t.Context(), u); err != nil {
				t.Fatalf("cannot set the Healthy condition: %v", err)
			}

			path += "/" + strings.ToLower(u.GetKind()) + "s/" + u.GetName()
			got, err := cell(t, hc, strings.TrimSuffix(e.Config.Host, "/")+path, "HEALTHY")
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("HEALTHY column of %s: want %q, got %q", u.GetName(), want, got)
			}
		})
	}
	if seen != 6 {
		t.Errorf("want a ProviderConfig and a ClusterProviderConfig example for each of the three backends, found %d", seen)
	}
}

// cell gets url as the Table kubectl prints and returns the value of its
// column in the one row.
func cell(t *testing.T, hc *http.Client, url, column string) (string, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	rsp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer rsp.Body.Close() //nolint:errcheck // Read only.
	b, err := io.ReadAll(rsp.Body)
	if err != nil {
		return "", err
	}
	if rsp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", url, rsp.Status, b)
	}
	tbl := &metav1.Table{}
	if err := json.Unmarshal(b, tbl); err != nil {
		return "", err
	}
	if len(tbl.Rows) != 1 {
		t.Fatalf("GET %s: want one row, got %d", url, len(tbl.Rows))
	}
	var names []string
	for i, c := range tbl.ColumnDefinitions {
		names = append(names, c.Name)
		if c.Name == column {
			v, _ := tbl.Rows[0].Cells[i].(string)
			return v, nil
		}
	}
	t.Fatalf("GET %s: no %s column among %v", url, column, names)
	return "", nil
}
