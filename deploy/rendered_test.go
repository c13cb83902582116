package deploy

// The manifests as a cluster receives them, from either source: the kustomize example
// overlay and the Helm chart with its example values. The contract and structure tests
// below run on both, so the two cannot drift apart.

import (
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/catalog"
	"github.com/lethe-erasure/lethe/pkg/envconf"
)

// helmInstall is how CI gets the helm binary.
const helmInstall = "GOFLAGS= go install helm.sh/helm/v4/cmd/helm@v4.3.2"

const (
	chartDir      = "helm/lethe"
	exampleValues = "helm/lethe/ci/example-values.yaml"
)

// source is one way of rendering Lethe's manifests.
type source struct {
	name   string
	render func(t *testing.T) objects
}

// sources are the kustomize example overlay and the chart with its example values.
var sources = []source{
	{"kustomize", func(t *testing.T) objects { return build(t, "k8s/overlays/example") }},
	{"helm", func(t *testing.T) objects { return helmTemplate(t) }},
}

// eachSource runs f on the objects of every source, as a subtest each.
func eachSource(t *testing.T, f func(t *testing.T, o objects)) {
	for _, s := range sources {
		t.Run(s.name, func(t *testing.T) { f(t, s.render(t)) })
	}
}

// helmTemplate renders the chart with its example values and the extra helm arguments.
func helmTemplate(t *testing.T, args ...string) objects {
	t.Helper()
	out := helm(t, append([]string{"template", "lethe", chartDir, "--namespace", "lethe", "-f", exampleValues}, args...)...)
	docs, err := decodeYAML(out)
	if err != nil {
		t.Fatalf("helm template: rendered YAML: %v", err)
	}
	o := objects{}
	for _, doc := range docs {
		o.add(t, doc, chartDir)
	}
	return o
}

// helm runs the helm binary (failing, not skipping, when it is missing) and returns stdout.
func helm(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := tool(t, helmInstall, []string{"helm"})
	var stderr bytes.Buffer
	c := exec.Command(cmd[0], args...)
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), err, stderr.String(), out)
	}
	return out
}

// named returns the object of kind called name, or name with a suffix (kustomize's
// content hash, the topics Job's version or hash), and its full name.
func named(o objects, kind, name string) (any, string) {
	if obj := o[kind][name]; obj != nil {
		return obj, name
	}
	for _, n := range sortedKeys(o[kind]) {
		if strings.HasPrefix(n, name+"-") {
			return o[kind][n], n
		}
	}
	return nil, ""
}

// job returns the Job whose name is name or name with a suffix (the version or hash the
// provisioning Jobs' names carry), failing t unless there is exactly one.
func job(t *testing.T, o objects, name string) (any, string) {
	t.Helper()
	var names []string
	for n := range o["Job"] {
		if n == name || strings.HasPrefix(n, name+"-") {
			names = append(names, n)
		}
	}
	if len(names) != 1 {
		t.Fatalf("Jobs %s: %v, want one", name, names)
	}
	return o["Job"][names[0]], names[0]
}

// provisioningJobs are the one-shot Jobs, by the name their names start with.
var provisioningJobs = []string{"lethe-topics", "lethe-tables"}

// declaredSecrets are the secret variables each binary declares, by the name of its
// workload: the services' from the catalog the configuration docs are written from,
// lethectl topics apply's (the topics Job) from the broker settings it loads.
func declaredSecrets() map[string][]string {
	out := map[string][]string{}
	add := func(workload string, config any) {
		for _, v := range envconf.Vars(config) {
			if v.Secret {
				out[workload] = append(out[workload], v.Name)
			}
		}
	}
	for _, s := range catalog.Services {
		add("lethe-"+s.Name, s.Config)
	}
	add("lethe-topics", broker.Settings{})
	return out
}

// secretRefs returns the Secret keys a container references (env secretKeyRef, by Secret
// name) and the Secrets it takes whole (envFrom secretRef, secret volumes).
func secretRefs(pod, c any) (keys map[string][]string, whole []string) {
	keys = map[string][]string{}
	for _, e := range list(c, "env") {
		if ref := get(e, "valueFrom", "secretKeyRef"); ref != nil {
			if str(e, "name") != str(ref, "key") {
				whole = append(whole, "env "+str(e, "name")+" from key "+str(ref, "key"))
			}
			keys[str(ref, "name")] = append(keys[str(ref, "name")], str(ref, "key"))
		}
	}
	for _, e := range list(c, "envFrom") {
		if s := str(e, "secretRef", "name"); s != "" {
			whole = append(whole, s)
		}
	}
	for _, v := range list(pod, "volumes") {
		if s := str(v, "secret", "secretName"); s != "" {
			whole = append(whole, s)
		}
	}
	return keys, whole
}

// TestSecretKeysPerWorkload: every Deployment and Job references, one by one, only secret
// variables its binary declares (none it does not read), none of them from a Secret taken
// whole (only the webhook-deleter's own Secret of processor secrets, whose keys the
// inventory names); the keys each service needs to start are there, the receipt chain key
// is the aggregator's alone, the topics Job gets nothing but the broker's password and the
// tables Job no secret at all.
func TestSecretKeysPerWorkload(t *testing.T) {
	declared := declaredSecrets()
	if !slices.Contains(declared["lethe-aggregator"], "LETHE_CHAIN_KEY") || !slices.Contains(declared["lethe-topics"], "LETHE_KAFKA_SASL_PASSWORD") ||
		slices.Contains(declared["lethe-topics"], "LETHE_HMAC_KEY") {
		t.Fatalf("declared secrets are not what the code declares: %v", declared)
	}
	eachSource(t, func(t *testing.T, o objects) {
		workloads := map[string]any{}
		for name, d := range o["Deployment"] {
			workloads[name] = get(d, "spec", "template", "spec")
		}
		for _, name := range provisioningJobs {
			j, _ := job(t, o, name)
			workloads[name] = get(j, "spec", "template", "spec")
		}
		if len(workloads) != len(services)+len(provisioningJobs) {
			t.Errorf("%d workloads, want %d", len(workloads), len(services)+len(provisioningJobs))
		}
		for name, pod := range workloads {
			keys, whole := secretRefs(pod, get(pod, "containers", "0"))
			if name == "lethe-webhook-deleter" {
				if i := slices.Index(whole, "lethe-webhook-secrets"); i >= 0 {
					whole = slices.Delete(whole, i, i+1)
				} else {
					t.Errorf("%s: does not take the processors' secrets from lethe-webhook-secrets", name)
				}
			}
			if len(whole) > 0 {
				t.Errorf("%s: takes %v whole or under other names; reference each key by its own name", name, whole)
			}
			var all []string
			for secret, ks := range keys {
				if _, s := named(o, "Secret", secret); s == "" && secret != "lethe-webhook-secrets" {
					t.Errorf("%s: references Secret %s, which is not rendered", name, secret)
				}
				for _, k := range ks {
					if !slices.Contains(declared[name], k) {
						t.Errorf("%s: references %s, which its binary does not declare (it declares %v)", name, k, declared[name])
					}
					if k == "LETHE_CHAIN_KEY" && !strings.HasPrefix(secret, "lethe-chain-key") {
						t.Errorf("%s: LETHE_CHAIN_KEY from %s, want lethe-chain-key", name, secret)
					}
				}
				all = append(all, ks...)
			}
			if name == "lethe-topics" {
				if !slices.Equal(all, []string{"LETHE_KAFKA_SASL_PASSWORD"}) {
					t.Errorf("lethe-topics: references %v, want the broker's password alone", all)
				}
				continue
			}
			if name == "lethe-tables" {
				if len(all) > 0 {
					t.Errorf("lethe-tables: references %v, want no secret", all)
				}
				continue
			}
			for _, k := range []string{"LETHE_HMAC_KEY", "LETHE_KEK", "LETHE_MAC_KEY", "LETHE_KAFKA_SASL_PASSWORD"} {
				if !slices.Contains(all, k) {
					t.Errorf("%s: does not reference %s, which it needs", name, k)
				}
			}
			if chain := slices.Contains(all, "LETHE_CHAIN_KEY"); chain != (name == "lethe-aggregator") {
				t.Errorf("%s: references LETHE_CHAIN_KEY: %v; only the aggregator may", name, chain)
			}
			if tokens := slices.Contains(all, "LETHE_TOKENS"); name == "lethe-intake" && !tokens {
				t.Errorf("lethe-intake: does not reference LETHE_TOKENS")
			}
			for k, owner := range map[string]string{"LETHE_QDRANT_API_KEY": "lethe-qdrant-deleter", "LETHE_REDIS_PASSWORD": "lethe-redis-deleter", "LETHE_POSTGRES_DSN": "lethe-postgres-deleter"} {
				if slices.Contains(all, k) != (name == owner) {
					t.Errorf("%s: references %s: %v; it is %s's alone", name, k, !(name == owner), owner)
				}
			}
		}
	})
}

// TestSecretKeysCheckCatches keeps the check above honest: a workload that takes
// lethe-secrets whole, or a key its binary does not declare, is caught.
func TestSecretKeysCheckCatches(t *testing.T) {
	declared := declaredSecrets()
	pod := map[string]any{"volumes": []any{}}
	c := map[string]any{
		"envFrom": []any{map[string]any{"secretRef": map[string]any{"name": "lethe-secrets"}}},
		"env":     []any{map[string]any{"name": "LETHE_CHAIN_KEY", "valueFrom": map[string]any{"secretKeyRef": map[string]any{"name": "lethe-chain-key", "key": "LETHE_CHAIN_KEY"}}}},
	}
	keys, whole := secretRefs(pod, c)
	if !slices.Equal(whole, []string{"lethe-secrets"}) || !slices.Equal(keys["lethe-chain-key"], []string{"LETHE_CHAIN_KEY"}) {
		t.Errorf("secretRefs = %v, %v", keys, whole)
	}
	if slices.Contains(declared["lethe-topics"], "LETHE_CHAIN_KEY") || slices.Contains(declared["lethe-intake"], "LETHE_QDRANT_API_KEY") {
		t.Error("declared secrets are too broad to catch anything")
	}
}

// kafkaPorts returns, per NetworkPolicy, the ports of its egress rule commented kafka
// (the second rule, after DNS); the tables Job's reaches DynamoDB alone.
func kafkaPorts(t *testing.T, o objects) map[string]any {
	t.Helper()
	out := map[string]any{}
	for name, np := range o["NetworkPolicy"] {
		if name == "lethe-tables" {
			if p := get(np, "spec", "egress", "1", "ports", "0", "port"); p != 443 || len(list(np, "spec", "egress")) != 2 {
				t.Errorf("lethe-tables: egress %v, want DNS and 443 alone", get(np, "spec", "egress"))
			}
			continue
		}
		out[name] = get(np, "spec", "egress", "1", "ports", "0", "port")
	}
	if len(out) != len(services)+1 {
		t.Errorf("%d NetworkPolicies with a kafka rule, want one per service and the topics Job's", len(out))
	}
	return out
}

// withOverlayEdit renders a copy of deploy/k8s with the example overlay's text edited.
func withOverlayEdit(t *testing.T, old, new string) objects {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "k8s"), os.DirFS("k8s")); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "k8s", "overlays", "example", "kustomization.yaml")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), old, new, 1)
	if edited == string(b) {
		t.Fatalf("the example overlay has no %q", old)
	}
	if err := os.WriteFile(p, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	return build(t, filepath.Dir(p))
}

// TestKafkaPortConfigurable: every NetworkPolicy lets its pods reach the brokers on 9092 by
// default and on the configured port (Amazon MSK's SASL/SCRAM 9096 here) otherwise, from
// the overlay's kafka-port and the chart's kafka.port.
func TestKafkaPortConfigurable(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    func(t *testing.T) (objects, objects)
	}{
		{"kustomize", func(t *testing.T) (objects, objects) {
			return build(t, "k8s/overlays/example"), withOverlayEdit(t, "- kafka-port=9092", "- kafka-port=9096")
		}},
		{"helm", func(t *testing.T) (objects, objects) {
			return helmTemplate(t), helmTemplate(t, "--set", "kafka.port=9096")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			def, msk := tc.o(t)
			for name, port := range kafkaPorts(t, def) {
				if port != 9092 {
					t.Errorf("%s: kafka egress port %v by default, want 9092", name, port)
				}
			}
			for name, port := range kafkaPorts(t, msk) {
				if port != 9096 {
					t.Errorf("%s: kafka egress port %v with the port set to 9096", name, port)
				}
			}
		})
	}
}

// dnsSubdomain is what Kubernetes accepts as a Job's name (and, at most 63 long, as the
// job-name label of its pods).
var dnsSubdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// TestProvisioningJobNamesFollowTheirImage: a Job's pod template is immutable, so kubectl
// apply (or helm upgrade) of a new version would fail on a Job of the same name. The topics
// and tables Jobs' names change with the lethectl image they run and stay put while
// nothing changes.
func TestProvisioningJobNamesFollowTheirImage(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    func(t *testing.T, tag string) objects
	}{
		{"kustomize", func(t *testing.T, tag string) objects {
			if tag == "0.1.0" {
				return build(t, "k8s/overlays/example")
			}
			return withOverlayEdit(t, `{name: lethe-lethectl, newName: registry.example.com/lethe/lethectl, newTag: "0.1.0"}`,
				`{name: lethe-lethectl, newName: registry.example.com/lethe/lethectl, newTag: "`+tag+`"}`)
		}},
		{"helm", func(t *testing.T, tag string) objects { return helmTemplate(t, "--set", "image.tag="+tag) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rendered := map[string]objects{}
			for _, tag := range []string{"0.1.0", "0.2.0", "again"} {
				rendered[tag] = tc.o(t, strings.Replace(tag, "again", "0.1.0", 1))
			}
			for _, base := range provisioningJobs {
				names := map[string]string{}
				for tag, o := range rendered {
					j, name := job(t, o, base)
					if image := str(j, "spec", "template", "spec", "containers", "0", "image"); tag != "again" && !strings.HasSuffix(image, "/lethectl:"+tag) {
						t.Errorf("tag %s: %s runs %s", tag, name, image)
					}
					if name == base || !dnsSubdomain.MatchString(name) || len(name) > 63 {
						t.Errorf("Job name %q: want %s with a suffix, a valid name of at most 63 characters", name, base)
					}
					names[tag] = name
				}
				if names["0.1.0"] == names["0.2.0"] {
					t.Errorf("%s is %s for both versions: an upgrade would patch its immutable pod template", base, names["0.1.0"])
				}
				if names["0.1.0"] != names["again"] {
					t.Errorf("the same version renders %s, then %s", names["0.1.0"], names["again"])
				}
			}
		})
	}
}

// TestRenderedWorkloads checks what every deployment of Lethe must hold, on both sources:
// one Deployment per service running its own image at the release's tag, with probes,
// resources, a locked-down security context, lethe-config and the inventory where
// LETHE_INVENTORY points, its own ServiceAccount, NetworkPolicy and PodDisruptionBudget,
// the KEDA ScaledObjects on the right consumer groups, the ServiceMonitor and
// PrometheusRule with the release label, the topics and tables Jobs, and the intake's
// Service.
func TestRenderedWorkloads(t *testing.T) {
	eachSource(t, func(t *testing.T, o objects) {
		config, _ := named(o, "ConfigMap", "lethe-config")
		if str(config, "data", "LETHE_CREATE_TOPICS") != "false" || str(config, "data", "LETHE_METRICS_ADDR") != "0.0.0.0:9090" {
			t.Errorf("lethe-config: LETHE_CREATE_TOPICS %q, LETHE_METRICS_ADDR %q", str(config, "data", "LETHE_CREATE_TOPICS"), str(config, "data", "LETHE_METRICS_ADDR"))
		}
		inventory, err := os.ReadFile("inventory.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if inv, _ := named(o, "ConfigMap", "lethe-inventory"); str(inv, "data", "inventory.yaml") != string(inventory) {
			t.Error("lethe-inventory does not hold deploy/inventory.yaml")
		}
		if len(o["Deployment"]) != len(services) {
			t.Errorf("%d Deployments, want %d", len(o["Deployment"]), len(services))
		}
		for _, s := range services {
			name := "lethe-" + s.name
			d := o["Deployment"][name]
			if d == nil {
				t.Errorf("no Deployment %s", name)
				continue
			}
			pod := get(d, "spec", "template", "spec")
			c := get(pod, "containers", "0")
			if image := str(c, "image"); path.Base(image) != s.name+":0.1.0" || !strings.Contains(image, "/") {
				t.Errorf("%s: image %q, want <registry>/%s:0.1.0", name, image, s.name)
			}
			if get(pod, "securityContext", "runAsNonRoot") != true || get(c, "securityContext", "readOnlyRootFilesystem") != true ||
				get(c, "securityContext", "allowPrivilegeEscalation") != false || !slices.Equal(list(c, "securityContext", "capabilities", "drop"), []any{"ALL"}) {
				t.Errorf("%s: not non-root, read-only, without privilege escalation and capabilities", name)
			}
			for probe, p := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz", "startupProbe": "/healthz"} {
				if str(c, probe, "httpGet", "path") != p || str(c, probe, "httpGet", "port") != "metrics" {
					t.Errorf("%s: %s is not GET %s on port metrics", name, probe, p)
				}
			}
			if str(c, "resources", "requests", "memory") == "" || str(c, "resources", "limits", "memory") == "" {
				t.Errorf("%s: no memory request and limit", name)
			}
			var cms []string
			for _, e := range list(c, "envFrom") {
				if cm := str(e, "configMapRef", "name"); cm != "" {
					cms = append(cms, cm)
				}
			}
			if _, full := named(o, "ConfigMap", "lethe-config"); !slices.Equal(cms, []string{full}) {
				t.Errorf("%s: envFrom ConfigMaps %v, want lethe-config", name, cms)
			}
			_, inv := named(o, "ConfigMap", "lethe-inventory")
			mounted := false
			for _, v := range list(pod, "volumes") {
				for _, m := range list(c, "volumeMounts") {
					mounted = mounted || str(v, "configMap", "name") == inv && str(m, "name") == str(v, "name") &&
						str(m, "mountPath") == path.Dir(str(config, "data", "LETHE_INVENTORY")) && get(m, "readOnly") == true
				}
			}
			if !mounted {
				t.Errorf("%s: the inventory is not mounted read-only where LETHE_INVENTORY points", name)
			}
			if sa := str(pod, "serviceAccountName"); sa != name || o["ServiceAccount"][sa] == nil || get(pod, "automountServiceAccountToken") != false {
				t.Errorf("%s: serviceAccountName %q, want its own, its token not mounted", name, sa)
			}
			labels := get(d, "spec", "template", "metadata", "labels")
			np := o["NetworkPolicy"][name]
			if !selects(get(np, "spec", "podSelector", "matchLabels"), labels) || !slices.Equal(list(np, "spec", "policyTypes"), []any{"Ingress", "Egress"}) {
				t.Errorf("%s: no NetworkPolicy of its own for ingress and egress", name)
			}
			if pdb := o["PodDisruptionBudget"][name]; !selects(get(pdb, "spec", "selector", "matchLabels"), labels) {
				t.Errorf("%s: no PodDisruptionBudget selecting its pods", name)
			}
			if !selects(get(o["Service"]["lethe-metrics"], "spec", "selector"), labels) {
				t.Errorf("%s: the lethe-metrics Service does not select its pods", name)
			}
			so := o["ScaledObject"][name]
			if (so != nil) != s.scaled {
				t.Errorf("%s: ScaledObject %v, want %v", name, so != nil, s.scaled)
				continue
			}
			got := map[string][]string{}
			for _, tr := range list(so, "spec", "triggers") {
				md := get(tr, "metadata")
				if str(md, "bootstrapServersFromEnv") != "LETHE_KAFKA_BROKERS" || str(md, "offsetResetPolicy") != "earliest" || str(md, "lagThreshold") == "" {
					t.Errorf("%s: trigger %v", name, md)
				}
				got[str(md, "consumerGroup")] = append(got[str(md, "consumerGroup")], str(md, "topic"))
			}
			for g, topics := range s.groups {
				if s.scaled && !slices.Equal(got[g], topics) {
					t.Errorf("%s: group %s triggers on %v, want %v", name, g, got[g], topics)
				}
			}
		}
		if get(o["Deployment"]["lethe-intake"], "spec", "replicas") != 3 {
			t.Errorf("lethe-intake replicas %v, want the example's 3", get(o["Deployment"]["lethe-intake"], "spec", "replicas"))
		}
		if svc := o["Service"]["lethe-intake"]; str(svc, "spec", "ports", "0", "targetPort") != "http" || get(svc, "spec", "ports", "0", "port") != 8080 {
			t.Error("Service lethe-intake does not expose the API on 8080")
		}
		for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
			obj := o[kind]["lethe"]
			if str(obj, "metadata", "labels", "release") != "kube-prometheus-stack" {
				t.Errorf("%s lethe: release label %q", kind, str(obj, "metadata", "labels", "release"))
			}
		}
		if !selects(get(o["ServiceMonitor"]["lethe"], "spec", "selector", "matchLabels"), get(o["Service"]["lethe-metrics"], "metadata", "labels")) {
			t.Error("the ServiceMonitor does not select the lethe-metrics Service")
		}
		if groups := list(o["PrometheusRule"]["lethe"], "spec", "groups"); len(groups) == 0 || len(groups) != len(list(readYAML(t, "prometheus/alerts.yml")[0], "groups")) {
			t.Errorf("the PrometheusRule has %d groups, alerts.yml %d", len(groups), len(list(readYAML(t, "prometheus/alerts.yml")[0], "groups")))
		}
		for name, args := range map[string][]any{
			"lethe-topics": {"topics", "apply", "--replication-factor", "3", "--min-insync-replicas", "2", "--partitions", "6"},
			"lethe-tables": {"tables", "apply"},
		} {
			j, _ := job(t, o, name)
			pod := get(j, "spec", "template", "spec")
			if jc := get(pod, "containers", "0"); !slices.Equal(list(jc, "args"), args) || path.Base(str(jc, "image")) != "lethectl:0.1.0" {
				t.Errorf("%s runs %s %v, want lethectl %v", name, str(jc, "image"), list(jc, "args"), args)
			}
			if str(pod, "serviceAccountName") != name || o["ServiceAccount"][name] == nil || get(pod, "securityContext", "runAsNonRoot") != true {
				t.Errorf("%s: not non-root under its own ServiceAccount", name)
			}
		}
		for kind, byName := range o {
			for n, obj := range byName {
				if ns := str(obj, "metadata", "namespace"); kind != "Namespace" && ns != "lethe" {
					t.Errorf("%s %s: namespace %q, want lethe", kind, n, ns)
				}
			}
		}
	})
}
