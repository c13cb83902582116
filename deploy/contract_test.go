package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// service is one Lethe service as the manifests must deploy it.
type service struct {
	name   string
	groups map[string][]string // consumer group -> topics it consumes
	scaled bool                // scaled by KEDA on consumer-group lag
}

// services lists every Lethe service, its consumer groups and whether KEDA scales it: intake
// and the aggregator, and every deleter found in ../services (see deleters), so a new kind's
// deleter must be deployed like the others without being listed here.
var services = append([]service{
	{name: "intake", groups: map[string][]string{"lethe-intake": {"erasure.intake"}}},
	{name: "aggregator", groups: map[string][]string{"lethe-aggregator": {"erasure.requested", "erasure.store.done"}}, scaled: true},
}, deleters("../services")...)

// deleterCall is how a deleter's main starts it: service.Deleter("<name>", ...).
var deleterCall = regexp.MustCompile(`service\.Deleter\(\s*"([a-z0-9-]+)"`)

// deleters returns one service per directory of dir whose main.go runs service.Deleter:
// consumer group "lethe-"+name on erasure.requested, scaled by KEDA. The name must be the
// directory's, as the image and the manifests name it.
func deleters(dir string) []service {
	entries, err := os.ReadDir(dir)
	if err != nil {
		panic(err)
	}
	var out []service
	for _, e := range entries {
		b, err := os.ReadFile(dir + "/" + e.Name() + "/main.go")
		if err != nil {
			continue
		}
		m := deleterCall.FindSubmatch(b)
		if m == nil {
			continue
		}
		if string(m[1]) != e.Name() {
			panic(fmt.Sprintf("services/%s runs deleter %q: name it after its directory", e.Name(), m[1]))
		}
		out = append(out, service{name: e.Name(), groups: map[string][]string{"lethe-" + e.Name(): {"erasure.requested"}}, scaled: true})
	}
	return out
}

// TestDeletersAreFound keeps the discovery honest: the deleters of the reference kinds are found.
func TestDeletersAreFound(t *testing.T) {
	var names []string
	for _, s := range deleters("../services") {
		names = append(names, s.name)
	}
	for _, want := range []string{"audit-verifier", "dataset-deleter", "qdrant-deleter", "redis-deleter"} {
		if !slices.Contains(names, want) {
			t.Errorf("deleters found %v, want %s among them", names, want)
		}
	}
}

// metricTypes are the metrics Lethe's services serve, by Prometheus type.
var metricTypes = map[string]string{
	"lethe_build_info":                                     "gauge",
	"lethe_http_requests_total":                            "counter",
	"lethe_http_request_duration_seconds":                  "histogram",
	"lethe_requests_total":                                 "counter",
	"lethe_intake_rejected_total":                          "counter",
	"lethe_store_outcomes_total":                           "counter",
	"lethe_store_duration_seconds":                         "histogram",
	"lethe_store_retries_total":                            "counter",
	"lethe_store_batch_subjects":                           "histogram",
	"lethe_consumer_retries_total":                         "counter",
	"lethe_dlq_records_total":                              "counter",
	"lethe_consumer_lag":                                   "gauge",
	"lethe_receipts_total":                                 "counter",
	"lethe_erasure_duration_seconds":                       "histogram",
	"lethe_overdue_requests":                               "gauge",
	"lethe_sla_threshold_total":                            "counter",
	"lethe_missing_data_keys_total":                        "counter",
	"lethe_reappeared_total":                               "counter",
	"lethe_addenda_total":                                  "counter",
	"lethe_inventory_uncovered_locations":                  "gauge",
	"lethe_inventory_discovery_last_run_timestamp_seconds": "gauge",
}

var metricRef = regexp.MustCompile(`lethe_[a-z_]+`)

// metricsIn returns the Lethe metric families a PromQL expression reads (a histogram's
// _bucket, _sum and _count series count as the histogram) and the names it uses that
// Lethe does not serve.
func metricsIn(expr string) (known, unknown []string) {
	for _, name := range metricRef.FindAllString(expr, -1) {
		family := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && metricTypes[base] == "histogram" {
				family = base
			}
		}
		if _, ok := metricTypes[family]; ok {
			known = append(known, family)
		} else {
			unknown = append(unknown, name)
		}
	}
	return known, unknown
}

// readYAML decodes every document of a YAML file; empty documents are dropped.
func readYAML(t *testing.T, path string) []any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := decodeYAML(b)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return docs
}

func decodeYAML(b []byte) ([]any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var docs []any
	for {
		var doc any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, err
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
}

func readJSON(t *testing.T, path string) any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return v
}

// get walks maps by key and lists by decimal index; it returns nil when a step is missing.
func get(v any, path ...string) any {
	for _, p := range path {
		switch x := v.(type) {
		case map[string]any:
			v = x[p]
		case []any:
			i := 0
			for _, c := range p {
				i = i*10 + int(c-'0')
			}
			if i >= len(x) {
				return nil
			}
			v = x[i]
		default:
			return nil
		}
	}
	return v
}

func str(v any, path ...string) string {
	s, _ := get(v, path...).(string)
	return s
}

func list(v any, path ...string) []any {
	l, _ := get(v, path...).([]any)
	return l
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// tool returns the command line of the first of the candidates found on the PATH; without
// any it fails the test (bash .ci/run installs them), never skips it.
func tool(t *testing.T, install string, candidates ...[]string) []string {
	t.Helper()
	for _, c := range candidates {
		if _, err := exec.LookPath(c[0]); err == nil {
			return c
		}
	}
	t.Fatal("none of " + candidateNames(candidates) + " is on the PATH; install with: " + install)
	return nil
}

func candidateNames(candidates [][]string) string {
	names := make([]string, len(candidates))
	for i, c := range candidates {
		names[i] = strings.Join(c, " ")
	}
	return strings.Join(names, ", ")
}

func TestMetricsIn(t *testing.T) {
	for _, tc := range []struct {
		expr           string
		known, unknown int
	}{
		{`sum(rate(lethe_requests_total[5m]))`, 1, 0},
		{`histogram_quantile(0.95, sum by (le) (rate(lethe_store_duration_seconds_bucket[5m])))`, 1, 0},
		{`lethe_consumer_lag_bucket`, 0, 1},
		{`rate(lethe_request_total[5m])`, 0, 1},
		{`up{job="lethe"}`, 0, 0},
	} {
		known, unknown := metricsIn(tc.expr)
		if len(known) != tc.known || len(unknown) != tc.unknown {
			t.Errorf("metricsIn(%q) = %v, %v; want %d known, %d unknown", tc.expr, known, unknown, tc.known, tc.unknown)
		}
	}
}
