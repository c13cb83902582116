package deploy

import (
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"
)

// requiredAlerts are the alerts the rules must hold, by the metric each one watches.
var requiredAlerts = map[string]string{
	"LetheErasureOverdue":     "lethe_overdue_requests",
	"LetheDeadLetters":        "lethe_dlq_records_total",
	"LetheStoreFailures":      "lethe_store_outcomes_total",
	"LetheConsumerLagHigh":    "lethe_consumer_lag",
	"LetheNoReceipts":         "lethe_receipts_total",
	"LetheMissingDataKeys":    "lethe_missing_data_keys_total",
	"LetheErasureReappeared":  "lethe_reappeared_total",
	"LetheReverifyFailed":     "lethe_addenda_total",
	"LetheInventoryUncovered": "lethe_inventory_uncovered_locations",
	"LetheMetricsAbsent":      "lethe_build_info",
	"LetheTargetDown":         "",
}

func TestAlertRules(t *testing.T) {
	groups := list(readYAML(t, "prometheus/alerts.yml")[0], "groups")
	runbooks, err := os.ReadFile("../docs/runbooks.md")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, g := range groups {
		for _, r := range list(g, "rules") {
			name, expr := str(r, "alert"), str(r, "expr")
			if name == "" || expr == "" {
				t.Errorf("group %s: a rule without alert name or expr: %v", str(g, "name"), r)
				continue
			}
			if seen[name] {
				t.Errorf("alert %s is defined twice", name)
			}
			seen[name] = true
			known, unknown := metricsIn(expr)
			if len(unknown) > 0 {
				t.Errorf("alert %s reads metrics Lethe does not serve: %v", name, unknown)
			}
			if want := requiredAlerts[name]; want != "" && !slices.Contains(known, want) {
				t.Errorf("alert %s does not read %s: %s", name, want, expr)
			}
			if sev := str(r, "labels", "severity"); sev != "critical" && sev != "warning" {
				t.Errorf("alert %s: severity %q, want critical or warning", name, sev)
			}
			if str(r, "annotations", "summary") == "" || str(r, "annotations", "description") == "" {
				t.Errorf("alert %s: needs a summary and a description", name)
			}
			want := "https://github.com/lethe-erasure/lethe/blob/main/docs/runbooks.md#" + strings.ToLower(name)
			if got := str(r, "annotations", "runbook_url"); got != want {
				t.Errorf("alert %s: runbook_url %q, want %q", name, got, want)
			}
			if !strings.Contains(string(runbooks), "\n## "+name+"\n") {
				t.Errorf("alert %s has no section in docs/runbooks.md", name)
			}
			if strings.Count(expr, "(") != strings.Count(expr, ")") {
				t.Errorf("alert %s: unbalanced parentheses: %s", name, expr)
			}
		}
	}
	for name := range requiredAlerts {
		if !seen[name] {
			t.Errorf("no alert %s", name)
		}
	}
}

func TestPrometheusRuleMirrorsAlerts(t *testing.T) {
	file := readYAML(t, "prometheus/alerts.yml")[0]
	rule := readYAML(t, "k8s/base/prometheusrule.yaml")[0]
	if str(rule, "kind") != "PrometheusRule" {
		t.Fatalf("k8s/base/prometheusrule.yaml holds a %s", str(rule, "kind"))
	}
	if !reflect.DeepEqual(get(file, "groups"), get(rule, "spec", "groups")) {
		t.Error("the PrometheusRule's groups differ from prometheus/alerts.yml; copy the groups over")
	}
	if len(list(file, "groups")) == 0 {
		t.Error("alerts.yml has no groups")
	}
}

// TestDashboard checks that the dashboard queries only Lethe's metrics and shows each of
// the views operators need.
func TestDashboard(t *testing.T) {
	dash := readJSON(t, "grafana/dashboards/lethe.json")
	if str(dash, "uid") == "" || str(dash, "title") == "" {
		t.Error("dashboard needs a uid and a title")
	}
	queried := map[string]bool{}
	ids := map[float64]bool{}
	for _, p := range list(dash, "panels") {
		id, _ := get(p, "id").(float64)
		if ids[id] {
			t.Errorf("panel id %v used twice", id)
		}
		ids[id] = true
		if str(p, "type") == "row" {
			continue
		}
		if str(p, "datasource", "uid") != "${datasource}" {
			t.Errorf("panel %q does not use the ${datasource} variable", str(p, "title"))
		}
		targets := list(p, "targets")
		if len(targets) == 0 {
			t.Errorf("panel %q has no query", str(p, "title"))
		}
		for _, q := range targets {
			known, unknown := metricsIn(str(q, "expr"))
			if len(known) == 0 || len(unknown) > 0 {
				t.Errorf("panel %q queries %q: Lethe metrics %v, unknown %v", str(p, "title"), str(q, "expr"), known, unknown)
			}
			for _, m := range known {
				queried[m] = true
			}
		}
	}
	for _, m := range []string{
		"lethe_requests_total", "lethe_store_outcomes_total", "lethe_store_duration_seconds",
		"lethe_store_retries_total", "lethe_consumer_retries_total", "lethe_dlq_records_total",
		"lethe_consumer_lag", "lethe_overdue_requests", "lethe_receipts_total",
	} {
		if !queried[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
}

func TestGrafanaProvisioning(t *testing.T) {
	ds := readYAML(t, "grafana/provisioning/datasources/prometheus.yml")[0]
	if str(ds, "datasources", "0", "type") != "prometheus" || str(ds, "datasources", "0", "url") != "http://prometheus:9090" {
		t.Errorf("datasource is not the compose Prometheus: %v", ds)
	}
	prov := readYAML(t, "grafana/provisioning/dashboards/lethe.yml")[0]
	if str(prov, "providers", "0", "options", "path") != "/var/lib/grafana/dashboards" {
		t.Errorf("dashboard provider path: %v", prov)
	}
}

func TestPrometheusScrapesEveryService(t *testing.T) {
	cfg := readYAML(t, "prometheus/prometheus.yml")[0]
	if !slices.Contains(list(cfg, "rule_files"), any("/etc/prometheus/alerts.yml")) {
		t.Errorf("prometheus.yml does not load /etc/prometheus/alerts.yml: %v", get(cfg, "rule_files"))
	}
	var targets []string
	for _, job := range list(cfg, "scrape_configs") {
		if str(job, "job_name") != "lethe" {
			continue
		}
		for _, sc := range list(job, "static_configs") {
			for _, tg := range list(sc, "targets") {
				targets = append(targets, tg.(string))
			}
		}
	}
	var want []string
	for _, s := range services {
		want = append(want, s.name+":9090")
	}
	sort.Strings(targets)
	sort.Strings(want)
	if !slices.Equal(targets, want) {
		t.Errorf("job lethe scrapes %v, want %v", targets, want)
	}
}
