package deploy

import (
	"bytes"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestEveryFileParses parses every YAML and JSON file under deploy/ and docker-compose.yml.
func TestEveryFileParses(t *testing.T) {
	files := []string{"../docker-compose.yml"}
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "templates" && filepath.Base(filepath.Dir(filepath.Dir(p))) == "helm" {
			return filepath.SkipDir // Go templates, parsed by helm lint and helm template
		}
		switch filepath.Ext(p) {
		case ".yaml", ".yml", ".json":
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"k8s/base/kustomization.yaml", "k8s/overlays/example/kustomization.yaml", "helm/lethe/values.yaml",
		"prometheus/alerts.yml", "prometheus/prometheus.yml", "grafana/dashboards/lethe.json"} {
		if !slices.Contains(files, want) {
			t.Errorf("%s is missing", want)
		}
	}
	for _, f := range files {
		if filepath.Ext(f) == ".json" {
			readJSON(t, f)
			continue
		}
		if len(readYAML(t, f)) == 0 {
			t.Errorf("%s holds no document", f)
		}
	}
}

// objects are the Kubernetes objects of a kustomization's resource files, by kind and name.
type objects map[string]map[string]any

func (o objects) add(t *testing.T, doc any, where string) {
	kind, name := str(doc, "kind"), str(doc, "metadata", "name")
	if kind == "" || name == "" || str(doc, "apiVersion") == "" {
		t.Fatalf("%s: object without apiVersion, kind or name", where)
	}
	if o[kind] == nil {
		o[kind] = map[string]any{}
	}
	if o[kind][name] != nil {
		t.Fatalf("%s: duplicate %s %s", where, kind, name)
	}
	o[kind][name] = doc
}

// baseObjects loads the objects in the resource files of k8s/base.
func baseObjects(t *testing.T) objects {
	t.Helper()
	k := readYAML(t, "k8s/base/kustomization.yaml")[0]
	o := objects{}
	for _, r := range list(k, "resources") {
		p := filepath.Join("k8s/base", r.(string))
		for _, doc := range readYAML(t, p) {
			o.add(t, doc, p)
		}
	}
	return o
}

// generatedLiterals returns the KEY=value literals of a kustomization's generator.
func generatedLiterals(t *testing.T, kustomization, generator, name string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, g := range list(readYAML(t, kustomization)[0], generator) {
		if str(g, "name") != name {
			continue
		}
		for _, l := range list(g, "literals") {
			k, v, ok := strings.Cut(l.(string), "=")
			if !ok {
				t.Fatalf("%s: literal %q without =", kustomization, l)
			}
			out[k] = v
		}
	}
	return out
}

func TestDeployments(t *testing.T) {
	o := baseObjects(t)
	config := generatedLiterals(t, "k8s/base/kustomization.yaml", "configMapGenerator", "lethe-config")
	if len(o["Deployment"]) != len(services) {
		t.Errorf("base has %d Deployments, want one per service (%d): %v", len(o["Deployment"]), len(services), sortedKeys(o["Deployment"]))
	}
	for _, s := range services {
		d := o["Deployment"]["lethe-"+s.name]
		if d == nil {
			t.Errorf("no Deployment lethe-%s", s.name)
			continue
		}
		pod := get(d, "spec", "template", "spec")
		if get(pod, "securityContext", "runAsNonRoot") != true {
			t.Errorf("lethe-%s: pod securityContext.runAsNonRoot is not true", s.name)
		}
		containers := list(pod, "containers")
		if len(containers) != 1 {
			t.Fatalf("lethe-%s: %d containers, want 1", s.name, len(containers))
		}
		c := containers[0]
		if str(c, "image") != "lethe-"+s.name {
			t.Errorf("lethe-%s: image %q, want lethe-%s (the overlay sets registry and tag)", s.name, str(c, "image"), s.name)
		}
		ports := map[string]int{}
		for _, p := range list(c, "ports") {
			ports[str(p, "name")], _ = get(p, "containerPort").(int)
		}
		if ports["metrics"] != 9090 {
			t.Errorf("lethe-%s: no container port metrics=9090: %v", s.name, ports)
		}
		if s.name == "intake" && ports["http"] != 8080 {
			t.Errorf("lethe-intake: no container port http=8080: %v", ports)
		}
		for probe, p := range map[string]string{"readinessProbe": "/readyz", "livenessProbe": "/healthz", "startupProbe": "/healthz"} {
			if str(c, probe, "httpGet", "path") != p || str(c, probe, "httpGet", "port") != "metrics" {
				t.Errorf("lethe-%s: %s is not GET %s on port metrics", s.name, probe, p)
			}
		}
		for _, r := range [][]string{{"requests", "cpu"}, {"requests", "memory"}, {"limits", "memory"}} {
			if str(c, append([]string{"resources"}, r...)...) == "" {
				t.Errorf("lethe-%s: no resources.%s", s.name, strings.Join(r, "."))
			}
		}
		sc := get(c, "securityContext")
		if get(sc, "readOnlyRootFilesystem") != true || get(sc, "allowPrivilegeEscalation") != false ||
			!slices.Equal(list(sc, "capabilities", "drop"), []any{"ALL"}) {
			t.Errorf("lethe-%s: container securityContext must be read-only, without privilege escalation, dropping ALL: %v", s.name, sc)
		}
		var envFrom []string
		for _, e := range list(c, "envFrom") {
			envFrom = append(envFrom, str(e, "configMapRef", "name")+str(e, "secretRef", "name"))
		}
		// Secrets are referenced key by key (TestSecretKeysPerWorkload); only the
		// webhook-deleter takes a Secret whole, its own of processor secrets.
		want := []string{"lethe-config"}
		if s.name == "webhook-deleter" {
			want = append(want, "lethe-webhook-secrets")
		}
		if !slices.Equal(envFrom, want) {
			t.Errorf("lethe-%s: envFrom %v, want %v", s.name, envFrom, want)
		}
		checkInventoryMount(t, s.name, pod, c, config["LETHE_INVENTORY"])
		if sa := str(pod, "serviceAccountName"); sa != "lethe-"+s.name || o["ServiceAccount"][sa] == nil {
			t.Errorf("lethe-%s: serviceAccountName %q, want its own ServiceAccount lethe-%s", s.name, sa, s.name)
		}
		np := o["NetworkPolicy"]["lethe-"+s.name]
		if !selects(get(np, "spec", "podSelector", "matchLabels"), get(d, "spec", "template", "metadata", "labels")) ||
			!slices.Equal(list(np, "spec", "policyTypes"), []any{"Ingress", "Egress"}) {
			t.Errorf("lethe-%s: no NetworkPolicy lethe-%s selecting its pods for ingress and egress", s.name, s.name)
		}
	}
}

func TestTopicsJob(t *testing.T) {
	o := baseObjects(t)
	job := o["Job"]["lethe-topics"]
	pod := get(job, "spec", "template", "spec")
	c := get(pod, "containers", "0")
	if str(c, "image") != "lethe-lethectl" || !slices.Equal(list(c, "args")[:2], []any{"topics", "apply"}) {
		t.Fatalf("Job lethe-topics runs %s %v, want lethectl topics apply", str(c, "image"), list(c, "args"))
	}
	if get(c, "securityContext", "readOnlyRootFilesystem") != true || get(pod, "securityContext", "runAsNonRoot") != true {
		t.Error("Job lethe-topics: not read-only and non-root")
	}
	config := generatedLiterals(t, "k8s/base/kustomization.yaml", "configMapGenerator", "lethe-config")
	if config["LETHE_CREATE_TOPICS"] != "false" {
		t.Errorf("LETHE_CREATE_TOPICS = %q: the services must leave topics to the Job", config["LETHE_CREATE_TOPICS"])
	}
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule"} {
		for name, obj := range o[kind] {
			if str(obj, "metadata", "labels", "release") == "" {
				t.Errorf("%s %s has no release label for kube-prometheus-stack's selector", kind, name)
			}
		}
	}
}

// checkInventoryMount asserts that the lethe-inventory ConfigMap is mounted where
// LETHE_INVENTORY points.
func checkInventoryMount(t *testing.T, name string, pod, c any, inventory string) {
	t.Helper()
	volume := ""
	for _, v := range list(pod, "volumes") {
		if str(v, "configMap", "name") == "lethe-inventory" {
			volume = str(v, "name")
		}
	}
	for _, m := range list(c, "volumeMounts") {
		if str(m, "name") == volume && volume != "" {
			if str(m, "mountPath") != path.Dir(inventory) || get(m, "readOnly") != true {
				t.Errorf("lethe-%s: inventory mounted at %s, LETHE_INVENTORY is %s", name, str(m, "mountPath"), inventory)
			}
			return
		}
	}
	t.Errorf("lethe-%s: the lethe-inventory ConfigMap is not mounted", name)
}

func TestConfigAndSecrets(t *testing.T) {
	config := generatedLiterals(t, "k8s/base/kustomization.yaml", "configMapGenerator", "lethe-config")
	for _, k := range []string{"LETHE_KAFKA_BROKERS", "LETHE_INVENTORY", "LETHE_METRICS_ADDR", "LETHE_QDRANT_ADDR", "LETHE_REDIS_ADDRS", "LETHE_AUDIT_TABLE", "LETHE_KEYS_TABLE", "LETHE_REDIS_USERNAME"} {
		if config[k] == "" {
			t.Errorf("lethe-config has no %s", k)
		}
	}
	if config["LETHE_METRICS_ADDR"] != "0.0.0.0:9090" {
		t.Errorf("LETHE_METRICS_ADDR = %q, want 0.0.0.0:9090 (the probes' port)", config["LETHE_METRICS_ADDR"])
	}
	secrets := generatedLiterals(t, "k8s/overlays/example/kustomization.yaml", "secretGenerator", "lethe-secrets")
	for k, v := range generatedLiterals(t, "k8s/overlays/example/kustomization.yaml", "secretGenerator", "lethe-chain-key") {
		if k != "LETHE_CHAIN_KEY" || !strings.HasPrefix(v, "PLACEHOLDER") {
			t.Errorf("lethe-chain-key holds %s = %q, want LETHE_CHAIN_KEY alone, marked PLACEHOLDER", k, v)
		}
	}
	if _, ok := secrets["LETHE_CHAIN_KEY"]; ok {
		t.Error("LETHE_CHAIN_KEY is in lethe-secrets; it has a Secret of its own, for the aggregator alone")
	}
	for _, k := range []string{"LETHE_HMAC_KEY", "LETHE_KEK", "LETHE_MAC_KEY", "LETHE_TOKENS", "LETHE_QDRANT_API_KEY", "LETHE_REDIS_PASSWORD"} {
		if _, ok := config[k]; ok {
			t.Errorf("secret %s is in the lethe-config ConfigMap", k)
		}
		if !strings.HasPrefix(secrets[k], "PLACEHOLDER") {
			t.Errorf("example secret %s = %q, want a value marked PLACEHOLDER", k, secrets[k])
		}
	}
}

func TestBaseInventoryIsTheReference(t *testing.T) {
	ref, err := os.ReadFile("inventory.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := os.ReadFile("k8s/base/inventory.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ref, cp) {
		t.Error("k8s/base/inventory.yaml differs from inventory.yaml; run: cp deploy/inventory.yaml deploy/k8s/base/inventory.yaml")
	}
}

func TestScaledObjects(t *testing.T) {
	o := baseObjects(t)
	config := generatedLiterals(t, "k8s/base/kustomization.yaml", "configMapGenerator", "lethe-config")
	targets := map[string]any{}
	for name, so := range o["ScaledObject"] {
		target := str(so, "spec", "scaleTargetRef", "name")
		if o["Deployment"][target] == nil {
			t.Errorf("ScaledObject %s targets %q, which is no Deployment", name, target)
		}
		targets[target] = so
	}
	for _, s := range services {
		so := targets["lethe-"+s.name]
		if !s.scaled {
			if so != nil {
				t.Errorf("lethe-%s is scaled by KEDA; it should not be", s.name)
			}
			continue
		}
		if so == nil {
			t.Errorf("no ScaledObject for lethe-%s", s.name)
			continue
		}
		maxReplicas, _ := get(so, "spec", "maxReplicaCount").(int)
		if minReplicas, _ := get(so, "spec", "minReplicaCount").(int); minReplicas < 1 || maxReplicas < minReplicas {
			t.Errorf("lethe-%s: replicas %d..%d, want at least one", s.name, minReplicas, maxReplicas)
		}
		got := map[string][]string{}
		for _, tr := range list(so, "spec", "triggers") {
			if str(tr, "type") != "kafka" {
				t.Errorf("lethe-%s: trigger type %q, want kafka", s.name, str(tr, "type"))
			}
			md := get(tr, "metadata")
			if fromEnv := str(md, "bootstrapServersFromEnv"); str(md, "bootstrapServers") == "" && config[fromEnv] == "" {
				t.Errorf("lethe-%s: trigger has no bootstrapServers and bootstrapServersFromEnv %q is not in lethe-config", s.name, fromEnv)
			}
			if n, err := strconv.Atoi(str(md, "lagThreshold")); err != nil || n < 1 {
				t.Errorf("lethe-%s: lagThreshold %q is not a positive integer (quoted)", s.name, str(md, "lagThreshold"))
			}
			if str(md, "offsetResetPolicy") != "earliest" {
				t.Errorf("lethe-%s: offsetResetPolicy %q, want earliest like the consumers", s.name, str(md, "offsetResetPolicy"))
			}
			got[str(md, "consumerGroup")] = append(got[str(md, "consumerGroup")], str(md, "topic"))
		}
		if len(got) != len(s.groups) {
			t.Errorf("lethe-%s: triggers cover groups %v, want %v", s.name, sortedKeys(got), sortedKeys(s.groups))
		}
		for g, topics := range s.groups {
			if !slices.Equal(got[g], topics) {
				t.Errorf("lethe-%s: group %s triggers on topics %v, want %v", s.name, g, got[g], topics)
			}
		}
	}
}

func TestDisruptionBudgetsAndServices(t *testing.T) {
	o := baseObjects(t)
	for _, s := range services {
		labels := get(o["Deployment"]["lethe-"+s.name], "spec", "template", "metadata", "labels")
		covered := false
		for _, pdb := range o["PodDisruptionBudget"] {
			if selects(get(pdb, "spec", "selector", "matchLabels"), labels) {
				covered = covered || get(pdb, "spec", "minAvailable") != nil || get(pdb, "spec", "maxUnavailable") != nil
			}
		}
		if !covered {
			t.Errorf("no PodDisruptionBudget with minAvailable or maxUnavailable selects lethe-%s", s.name)
		}
		if !selects(get(o["Service"]["lethe-metrics"], "spec", "selector"), labels) {
			t.Errorf("Service lethe-metrics does not select lethe-%s (its pod labels: %v)", s.name, labels)
		}
	}
	intake := o["Service"]["lethe-intake"]
	if str(intake, "spec", "ports", "0", "targetPort") != "http" || get(intake, "spec", "ports", "0", "port") != 8080 {
		t.Errorf("Service lethe-intake does not expose the API on 8080: %v", get(intake, "spec", "ports"))
	}
	if str(o["Service"]["lethe-metrics"], "spec", "ports", "0", "targetPort") != "metrics" {
		t.Error("Service lethe-metrics does not target port metrics")
	}
}

// selects reports whether a non-empty label selector matches labels.
func selects(selector, labels any) bool {
	sel, _ := selector.(map[string]any)
	lab, _ := labels.(map[string]any)
	for k, v := range sel {
		if lab[k] != v {
			return false
		}
	}
	return len(sel) > 0
}

func TestKustomizationReferencesExist(t *testing.T) {
	for _, dir := range []string{"k8s/base", "k8s/overlays/example"} {
		k := readYAML(t, filepath.Join(dir, "kustomization.yaml"))[0]
		var refs []string
		for _, r := range list(k, "resources") {
			refs = append(refs, r.(string))
		}
		for _, gen := range []string{"configMapGenerator", "secretGenerator"} {
			for _, g := range list(k, gen) {
				for _, f := range append(list(g, "files"), list(g, "envs")...) {
					_, file, _ := strings.Cut(f.(string), "=") // files may be key=path
					if file == "" {
						file = f.(string)
					}
					refs = append(refs, file)
				}
			}
		}
		if len(refs) == 0 {
			t.Errorf("%s: references nothing", dir)
		}
		for _, r := range refs {
			p := filepath.Join(dir, r)
			st, err := os.Stat(p)
			if err != nil {
				t.Errorf("%s: %v", dir, err)
				continue
			}
			if st.IsDir() {
				if _, err := os.Stat(filepath.Join(p, "kustomization.yaml")); err != nil {
					t.Errorf("%s: resource directory %s has no kustomization.yaml", dir, r)
				}
			}
		}
	}
}
