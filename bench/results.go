// Package bench measures what an erasure costs in Lethe against the naive pipeline it
// replaces, on the embedded stack: a real redis-server, the Qdrant emulator through the
// official client, gofakes3 over HTTP and kfake.
//
// Run seeds a small and a large corpus per store, erases subjects with a realistic
// footprint through the store adapters and through the baseline (Redis KEYS + DEL, Qdrant
// scroll-then-delete-by-ids with a 1000 page, a full dataset rewrite), then drives the
// whole system for end-to-end latency at a fixed rate, sustained throughput with one and
// three consumer instances per deleter, memory with a large number of requests in
// flight, and a burst of erasures of one tenant whose rows share one large dataset object
// (how many times that object is rewritten, and that exactly their rows went). Every
// figure is a Result; WriteJSON writes them for dashboards and PrintTable for people.
package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"text/tabwriter"
	"time"
)

// Result is one measured figure. Baseline and Ratio are set where the naive pipeline was
// measured the same way; Ratio is Baseline / Value (how many times Lethe is faster), or,
// for a scaling figure, the large-corpus value over the small-corpus one.
type Result struct {
	Name     string   `json:"name"`
	Value    float64  `json:"value"`
	Unit     string   `json:"unit"`
	Baseline *float64 `json:"baseline,omitempty"`
	Ratio    *float64 `json:"ratio,omitempty"`
	Note     string   `json:"note,omitempty"`
}

// Results collects figures in the order they were measured.
type Results struct {
	List []Result
}

// Add appends a figure without a baseline.
func (r *Results) Add(name string, value float64, unit, note string) {
	r.List = append(r.List, Result{Name: name, Value: round(value), Unit: unit, Note: note})
}

// AddVs appends a figure with its baseline; the ratio is baseline / value.
func (r *Results) AddVs(name string, value, baseline float64, unit string) {
	b := round(baseline)
	res := Result{Name: name, Value: round(value), Unit: unit, Baseline: &b}
	if value > 0 {
		q := round(baseline / value)
		res.Ratio = &q
	}
	r.List = append(r.List, res)
}

// AddRatio appends a dimensionless ratio (for example large over small corpus).
func (r *Results) AddRatio(name string, num, den float64, note string) {
	v := math.NaN()
	if den > 0 {
		v = num / den
	}
	if math.IsNaN(v) {
		v = 0
	}
	q := round(v)
	r.List = append(r.List, Result{Name: name, Value: q, Unit: "x", Ratio: &q, Note: note})
}

// round keeps three significant decimals, enough for milliseconds and ratios.
func round(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return math.Round(v*1000) / 1000
}

// WriteJSON writes the results as a JSON array to path, creating its directory.
func (r *Results) WriteJSON(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("results: %w", err)
	}
	b, err := json.MarshalIndent(r.List, "", "  ")
	if err != nil {
		return fmt.Errorf("results: %w", err)
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// PrintTable writes the results as an aligned table.
func (r *Results) PrintTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "figure\tvalue\tunit\tbaseline\tratio\t")
	for _, x := range r.List {
		b, q := "", ""
		if x.Baseline != nil {
			b = fmt.Sprintf("%.3f", *x.Baseline)
		}
		if x.Ratio != nil {
			q = fmt.Sprintf("%.1fx", *x.Ratio)
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%s\t%s\t%s\t\n", x.Name, x.Value, x.Unit, b, q)
	}
	tw.Flush()
	for _, x := range r.List {
		if x.Note != "" {
			fmt.Fprintf(w, "  note: %s: %s\n", x.Name, x.Note)
		}
	}
}

// Durations summarises latency samples.
type Durations []time.Duration

// Quantile returns the q-quantile (nearest rank) in milliseconds; 0 without samples.
func (d Durations) Quantile(q float64) float64 {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(math.Ceil(q*float64(len(s)))) - 1
	i = min(max(i, 0), len(s)-1)
	return float64(s[i]) / float64(time.Millisecond)
}

// Median is Quantile(0.5).
func (d Durations) Median() float64 { return d.Quantile(0.5) }
