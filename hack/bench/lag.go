/*
Copyright 2026 The provider-egressproxy Authors.

SPDX-License-Identifier: Apache-2.0
*/

package main

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"

	"github.com/crossplane/crossplane-runtime/v2/pkg/errors"
)

// cacheLagMetric is the provider's histogram of how long its cache took to
// show its own writes of managed resources (internal/controller/proxy,
// fresh.go).
const cacheLagMetric = "egressproxy_cache_lag_seconds"

// lagQuantiles are quantiles of the cache lag of the provider's own writes.
type lagQuantiles struct {
	writes        float64
	p50, p90, p99 float64
}

func (l lagQuantiles) String() string {
	if l.writes == 0 {
		return "-"
	}
	return fmt.Sprintf("%s / %s / %s (%.0f writes)", lagSecs(l.p50), lagSecs(l.p90), lagSecs(l.p99), l.writes)
}

func lagSecs(v float64) string {
	if math.IsInf(v, 1) {
		return "> 30 s"
	}
	return fmt.Sprintf("%.2f s", v)
}

// cacheLag reads the provider's cache lag histogram, of every kind.
func cacheLag(ctx context.Context, url string) (lagQuantiles, error) {
	s, err := scrape(ctx, url)
	if err != nil {
		return lagQuantiles{}, errors.Wrap(err, errScrape)
	}
	buckets := map[float64]float64{}
	for _, m := range s {
		if m.name != cacheLagMetric+"_bucket" {
			continue
		}
		le, err := strconv.ParseFloat(m.labels["le"], 64)
		if err != nil {
			continue
		}
		buckets[le] += m.value
	}
	return quantiles(buckets), nil
}

// quantiles estimates quantiles from cumulative buckets (upper bound to
// count) as Prometheus' histogram_quantile does: linear within a bucket,
// the lowest bucket starting at 0; in the +Inf bucket, +Inf.
func quantiles(buckets map[float64]float64) lagQuantiles {
	les := make([]float64, 0, len(buckets))
	for le := range buckets {
		les = append(les, le)
	}
	sort.Float64s(les)
	if len(les) == 0 || buckets[les[len(les)-1]] == 0 {
		return lagQuantiles{}
	}
	total := buckets[les[len(les)-1]]
	q := func(q float64) float64 {
		rank := q * total
		lower, below := 0.0, 0.0
		for _, le := range les {
			c := buckets[le]
			if c >= rank {
				if math.IsInf(le, 1) {
					return le
				}
				if c == below {
					return le
				}
				return lower + (le-lower)*(rank-below)/(c-below)
			}
			lower, below = le, c
		}
		return les[len(les)-1]
	}
	return lagQuantiles{writes: total, p50: q(0.5), p90: q(0.9), p99: q(0.99)}
}
