package bench

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// batchTally is the subjects and batches of each store and operation
// (lethe_store_batch_subjects), keyed "store/op".
type batchTally map[string][2]float64

// batches reads the batch histogram off reg.
func batches(reg prometheus.Gatherer) batchTally {
	out := batchTally{}
	mfs, err := reg.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != "lethe_store_batch_subjects" {
			continue
		}
		for _, m := range mf.GetMetric() {
			var store, op string
			for _, l := range m.GetLabel() {
				switch l.GetName() {
				case "store":
					store = l.GetValue()
				case "op":
					op = l.GetValue()
				}
			}
			h := m.GetHistogram()
			out[store+"/"+op] = [2]float64{h.GetSampleSum(), float64(h.GetSampleCount())}
		}
	}
	return out
}

// since is the mean subjects per batch of each store and operation from before to t.
func (t batchTally) since(before batchTally) map[string]float64 {
	out := map[string]float64{}
	for k, v := range t {
		n := v[1] - before[k][1]
		if n > 0 {
			out[k] = (v[0] - before[k][0]) / n
		}
	}
	return out
}

// formatBatches lists means as "store/op 1.4, ...".
func formatBatches(means map[string]float64) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(means)) {
		if b.Len() > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %.1f", k, means[k])
	}
	return b.String()
}
