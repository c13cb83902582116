package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// kustomizeInstall is how CI gets the kustomize binary (v5.8.3 needs Go 1.27).
const kustomizeInstall = "go install sigs.k8s.io/kustomize/kustomize/v5@v5.8.2"

// build renders a kustomization with kustomize (or kubectl's built-in kustomize) and
// returns its objects.
func build(t *testing.T, dir string) objects {
	t.Helper()
	cmd := tool(t, kustomizeInstall, []string{"kustomize", "build"}, []string{"kubectl", "kustomize"})
	var stderr bytes.Buffer
	c := exec.Command(cmd[0], append(cmd[1:], dir)...)
	c.Stderr = &stderr
	out, err := c.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", strings.Join(cmd, " "), dir, err, stderr.String())
	}
	docs, err := decodeYAML(out)
	if err != nil {
		t.Fatalf("%s: rendered YAML: %v", dir, err)
	}
	o := objects{}
	for _, doc := range docs {
		o.add(t, doc, dir)
	}
	return o
}

func TestKustomizeBuild(t *testing.T) {
	inventory, err := os.ReadFile("inventory.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		dir       string
		namespace string
		overlay   bool
	}{
		{dir: "k8s/base"},
		{dir: "k8s/overlays/example", namespace: "lethe", overlay: true},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			o := build(t, tc.dir)
			if len(o["Deployment"]) != len(services) {
				t.Errorf("%d Deployments, want %d", len(o["Deployment"]), len(services))
			}
			// Generated names carry a hash suffix; every reference must follow it.
			refs := map[string]string{}
			for name, cm := range o["ConfigMap"] {
				refs["ConfigMap/"+name] = name
				if strings.HasPrefix(name, "lethe-inventory-") && get(cm, "data", "inventory.yaml") != string(inventory) {
					t.Errorf("ConfigMap %s does not hold deploy/inventory.yaml", name)
				}
			}
			for name := range o["Secret"] {
				refs["Secret/"+name] = name
			}
			for name, d := range o["Deployment"] {
				pod := get(d, "spec", "template", "spec")
				c := get(pod, "containers", "0")
				for _, e := range list(c, "envFrom") {
					if cm := str(e, "configMapRef", "name"); cm != "" && refs["ConfigMap/"+cm] == "" {
						t.Errorf("%s: envFrom ConfigMap %s does not exist", name, cm)
					}
					if s := str(e, "secretRef", "name"); s != "" && refs["Secret/"+s] == "" && get(e, "secretRef", "optional") != true {
						t.Errorf("%s: envFrom Secret %s does not exist", name, s)
					}
				}
				for _, e := range list(c, "env") {
					ref := get(e, "valueFrom", "secretKeyRef")
					if s := str(ref, "name"); s != "" && refs["Secret/"+s] == "" && (tc.overlay || s != "lethe-secrets" && s != "lethe-chain-key") {
						t.Errorf("%s: env %s from Secret %s, which does not exist", name, str(e, "name"), s)
					}
				}
				for _, v := range list(pod, "volumes") {
					if cm := str(v, "configMap", "name"); cm != "" && refs["ConfigMap/"+cm] == "" {
						t.Errorf("%s: volume ConfigMap %s does not exist", name, cm)
					}
				}
				if !selects(get(o["Service"]["lethe-metrics"], "spec", "selector"), get(d, "spec", "template", "metadata", "labels")) {
					t.Errorf("%s: the lethe-metrics Service does not select its pods", name)
				}
				image := str(c, "image")
				if tc.overlay && (!strings.Contains(image, "/") || !strings.HasSuffix(image, ":0.1.0")) {
					t.Errorf("%s: image %q, want the overlay's registry and tag", name, image)
				}
			}
			for name, so := range o["ScaledObject"] {
				if o["Deployment"][str(so, "spec", "scaleTargetRef", "name")] == nil {
					t.Errorf("ScaledObject %s targets no Deployment", name)
				}
			}
			if !tc.overlay {
				return
			}
			for kind, byName := range o {
				for name, obj := range byName {
					if ns := str(obj, "metadata", "namespace"); kind != "Namespace" && ns != tc.namespace {
						t.Errorf("%s %s: namespace %q, want %q", kind, name, ns, tc.namespace)
					}
				}
			}
			if get(o["Deployment"]["lethe-intake"], "spec", "replicas") != 3 {
				t.Errorf("lethe-intake replicas = %v, want the overlay's 3", get(o["Deployment"]["lethe-intake"], "spec", "replicas"))
			}
			for name, cm := range o["ConfigMap"] {
				if strings.HasPrefix(name, "lethe-config-") && (str(cm, "data", "LETHE_METRICS_ADDR") == "" || str(cm, "data", "AWS_REGION") == "") {
					t.Errorf("ConfigMap %s does not merge the overlay's values into the base's", name)
				}
			}
		})
	}
}

// TestKafkaAuthComponent enables the kafka-sasl-tls component in a copy of the example
// overlay as its comment says, and checks that every KEDA trigger then authenticates with
// the TriggerAuthentication, whose Secrets exist under their generated names.
func TestKafkaAuthComponent(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(filepath.Join(dir, "k8s"), os.DirFS("k8s")); err != nil {
		t.Fatal(err)
	}
	overlay := filepath.Join(dir, "k8s", "overlays", "example", "kustomization.yaml")
	b, err := os.ReadFile(overlay)
	if err != nil {
		t.Fatal(err)
	}
	enabled := strings.Replace(strings.Replace(string(b), "# components:", "components:", 1),
		"#   - ../../components/kafka-sasl-tls", "  - ../../components/kafka-sasl-tls", 1)
	if enabled == string(b) {
		t.Fatal("the example overlay has no commented components entry for kafka-sasl-tls")
	}
	if err := os.WriteFile(overlay, []byte(enabled), 0o644); err != nil {
		t.Fatal(err)
	}
	o := build(t, filepath.Join(dir, "k8s", "overlays", "example"))
	ta := o["TriggerAuthentication"]["lethe-kafka"]
	if ta == nil {
		t.Fatal("no TriggerAuthentication lethe-kafka")
	}
	for _, ref := range list(ta, "spec", "secretTargetRef") {
		if o["Secret"][str(ref, "name")] == nil {
			t.Errorf("TriggerAuthentication refers to Secret %s, which is not rendered (generated names carry a hash)", str(ref, "name"))
		}
	}
	for name, so := range o["ScaledObject"] {
		for i, tr := range list(so, "spec", "triggers") {
			if str(tr, "authenticationRef", "name") != "lethe-kafka" {
				t.Errorf("ScaledObject %s trigger %d does not authenticate with lethe-kafka", name, i)
			}
		}
	}
}
