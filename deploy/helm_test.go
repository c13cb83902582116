package deploy

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestHelmLint runs helm lint on the chart with its example values, strict (warnings fail).
func TestHelmLint(t *testing.T) {
	out := helm(t, "lint", "--strict", chartDir, "-f", exampleValues)
	if !bytes.Contains(out, []byte("1 chart(s) linted, 0 chart(s) failed")) {
		t.Errorf("helm lint: %s", out)
	}
}

// TestChartCopiesAreTheReference: the chart cannot read files outside its directory, so
// it holds copies of the reference inventory and of the alert rules.
func TestChartCopiesAreTheReference(t *testing.T) {
	for ref, cp := range map[string]string{"inventory.yaml": "helm/lethe/files/inventory.yaml", "prometheus/alerts.yml": "helm/lethe/files/alerts.yml"} {
		a, err := os.ReadFile(ref)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(cp)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs from %s; run: cp deploy/%s deploy/%s", cp, ref, ref, cp)
		}
	}
}

// TestHelmKafkaSASL: with a SASL mechanism the services get the Kafka TLS and SASL settings
// in lethe-config, and every KEDA trigger authenticates with the TriggerAuthentication,
// which reads the password from the key of lethe-secrets the services read.
func TestHelmKafkaSASL(t *testing.T) {
	o := helmTemplate(t, "--set", "kafka.tls=true", "--set", "kafka.sasl.mechanism=SCRAM-SHA-512", "--set", "kafka.sasl.username=lethe",
		"--set", "secrets.values.LETHE_KAFKA_SASL_PASSWORD=PLACEHOLDER-kafka-password")
	config := o["ConfigMap"]["lethe-config"]
	for k, want := range map[string]string{"LETHE_KAFKA_TLS": "true", "LETHE_KAFKA_SASL_MECHANISM": "SCRAM-SHA-512", "LETHE_KAFKA_SASL_USERNAME": "lethe"} {
		if got := str(config, "data", k); got != want {
			t.Errorf("lethe-config %s = %q, want %q", k, got, want)
		}
	}
	ta := o["TriggerAuthentication"]["lethe-kafka"]
	if ta == nil {
		t.Fatal("no TriggerAuthentication lethe-kafka")
	}
	for _, ref := range list(ta, "spec", "secretTargetRef") {
		if s := o["Secret"][str(ref, "name")]; get(s, "data", str(ref, "key")) == nil {
			t.Errorf("TriggerAuthentication reads %s/%s, which is not rendered", str(ref, "name"), str(ref, "key"))
		}
	}
	if len(o["ScaledObject"]) == 0 {
		t.Fatal("no ScaledObjects")
	}
	for name, so := range o["ScaledObject"] {
		for i, tr := range list(so, "spec", "triggers") {
			if str(tr, "authenticationRef", "name") != "lethe-kafka" {
				t.Errorf("ScaledObject %s trigger %d does not authenticate with lethe-kafka", name, i)
			}
		}
	}
	if plain := helmTemplate(t); len(plain["TriggerAuthentication"]) != 0 {
		t.Error("a TriggerAuthentication without SASL")
	}
}

// TestHelmExistingSecrets: with secrets.create=false the chart renders no Secret and the
// workloads reference the Secrets named in the values.
func TestHelmExistingSecrets(t *testing.T) {
	o := helmTemplate(t, "--set", "secrets.create=false", "--set", "secrets.name=from-vault", "--set", "secrets.chainKeyName=chain-from-vault")
	if len(o["Secret"]) != 0 {
		t.Errorf("Secrets rendered: %v", sortedKeys(o["Secret"]))
	}
	refs := map[string]bool{}
	for _, d := range o["Deployment"] {
		keys, _ := secretRefs(get(d, "spec", "template", "spec"), get(d, "spec", "template", "spec", "containers", "0"))
		for s := range keys {
			refs[s] = true
		}
	}
	if len(refs) != 2 || !refs["from-vault"] || !refs["chain-from-vault"] {
		t.Errorf("the workloads reference Secrets %v, want from-vault and chain-from-vault", sortedKeys(refs))
	}
}

// TestHelmRequiresKeys: the chart refuses to create lethe-secrets without the keys every
// service needs to start.
func TestHelmRequiresKeys(t *testing.T) {
	cmd := tool(t, helmInstall, []string{"helm"})
	for _, key := range []string{"secrets.values.LETHE_HMAC_KEY", "secrets.values.LETHE_MAC_KEY", "secrets.chainKey"} {
		var stderr bytes.Buffer
		c := exec.Command(cmd[0], "template", "lethe", chartDir, "-f", exampleValues, "--set", key+"=")
		c.Stderr = &stderr
		if err := c.Run(); err == nil || !strings.Contains(stderr.String(), key+" is required") {
			t.Errorf("helm template with %s empty: %v, %s; want it refused", key, err, stderr.String())
		}
	}
}
