package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
)

// podEnv is the environment Kubernetes gives container c: its envFrom ConfigMaps and
// Secrets, then its env entries (a Secret's key, a resourceFieldRef resolved as the kubelet
// does; a missing optional key or Secret leaves the variable unset).
func podEnv(t *testing.T, o objects, c any) map[string]string {
	t.Helper()
	env := map[string]string{}
	secretValue := func(name, k string) (string, bool) {
		v, ok := get(o["Secret"][name], "data", k).(string)
		if !ok {
			return "", false
		}
		b, err := base64.StdEncoding.DecodeString(v)
		if err != nil {
			t.Fatalf("Secret %s key %s: %v", name, k, err)
		}
		return string(b), true
	}
	for _, e := range list(c, "envFrom") {
		if name := str(e, "configMapRef", "name"); name != "" {
			for k, v := range get(o["ConfigMap"][name], "data").(map[string]any) {
				env[k] = fmt.Sprint(v)
			}
		}
		if name := str(e, "secretRef", "name"); name != "" {
			if o["Secret"][name] == nil && get(e, "secretRef", "optional") == true {
				continue // an optional Secret that does not exist: the kubelet starts the pod without it
			}
			for k := range get(o["Secret"][name], "data").(map[string]any) {
				env[k], _ = secretValue(name, k)
			}
		}
	}
	for _, e := range list(c, "env") {
		name := str(e, "name")
		switch {
		case get(e, "value") != nil:
			env[name] = str(e, "value")
		case get(e, "valueFrom", "secretKeyRef") != nil:
			ref := get(e, "valueFrom", "secretKeyRef")
			v, ok := secretValue(str(ref, "name"), str(ref, "key"))
			switch {
			case ok:
				env[name] = v
			case get(ref, "optional") != true:
				t.Fatalf("env %s: Secret %s has no key %s and the reference is not optional: the pod would not start", name, str(ref, "name"), str(ref, "key"))
			}
		case str(e, "valueFrom", "resourceFieldRef", "resource") == "limits.memory":
			env[name] = strconv.FormatInt(quantity(t, str(c, "resources", "limits", "memory")), 10)
		default:
			t.Fatalf("env %s: a source the test does not resolve: %v", name, e)
		}
	}
	return env
}

// quantity parses a Kubernetes memory quantity such as 256Mi into bytes.
func quantity(t *testing.T, q string) int64 {
	t.Helper()
	for suffix, mult := range map[string]int64{"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30} {
		if n, ok := strings.CutSuffix(q, suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			if err != nil {
				t.Fatalf("quantity %q: %v", q, err)
			}
			return v * mult
		}
	}
	t.Fatalf("quantity %q: unsupported unit", q)
	return 0
}

// replacePlaceholders gives every Secret value marked PLACEHOLDER a test value a real
// environment would hold, and returns them by key.
func replacePlaceholders(t *testing.T, o objects) map[string]string {
	t.Helper()
	random := func(n int) []byte {
		b := make([]byte, n)
		rand.Read(b)
		return b
	}
	token := hex.EncodeToString(random(16))
	sum := sha256.Sum256([]byte(token))
	values := map[string]string{
		"LETHE_HMAC_KEY":       base64.StdEncoding.EncodeToString(random(32)),
		"LETHE_KEK":            base64.StdEncoding.EncodeToString(random(32)),
		"LETHE_MAC_KEY":        base64.StdEncoding.EncodeToString(random(32)),
		"LETHE_CHAIN_KEY":      base64.StdEncoding.EncodeToString(random(32)),
		"LETHE_TOKENS":         "contract-test:" + hex.EncodeToString(sum[:]) + ":vastralaya",
		"LETHE_QDRANT_API_KEY": hex.EncodeToString(random(16)),
		"LETHE_REDIS_PASSWORD": hex.EncodeToString(random(16)),
		"token":                token, // the caller's own token, not in the Secret
	}
	for name, s := range o["Secret"] {
		data, _ := get(s, "data").(map[string]any)
		for k, v := range data {
			b, _ := base64.StdEncoding.DecodeString(fmt.Sprint(v))
			if !strings.HasPrefix(string(b), "PLACEHOLDER") {
				continue
			}
			if values[k] == "" {
				t.Fatalf("Secret %s: placeholder %s has no test value", name, k)
			}
			data[k] = base64.StdEncoding.EncodeToString([]byte(values[k]))
			t.Logf("Secret %s: %s=PLACEHOLDER… replaced by a test value", name, k)
		}
	}
	return values
}

// container is how one workload's container runs here.
type container struct {
	name  string
	bin   string
	args  []string
	env   []string
	dir   string // the working directory: read-only with readOnlyRootFilesystem
	cred  *syscall.Credential
	r     *rewriter
	ports map[string]int // container port by name
	spec  any
}

// prepare resolves the container of a pod template: its binary (the image's entrypoint),
// its environment, its volumes (a ConfigMap as a read-only directory of its keys, an
// emptyDir as a writable directory owned by the pod's user) and its working directory.
func prepare(t *testing.T, o objects, name string, pod any, hosts, extra map[string]string) *container {
	t.Helper()
	c := get(pod, "containers", "0")
	image := path.Base(str(c, "image"))
	image, _, _ = strings.Cut(image, ":")
	ct := &container{name: name, bin: filepath.Join(binaries(t), strings.TrimPrefix(image, "lethe-")), spec: c, ports: map[string]int{}}
	for _, a := range list(c, "args") {
		ct.args = append(ct.args, fmt.Sprint(a))
	}
	uid, gid := -1, -1
	if os.Geteuid() == 0 {
		// As root the modes below would not bind: run as the pod's user, as the kubelet does.
		u, _ := get(pod, "securityContext", "runAsUser").(int)
		g, _ := get(pod, "securityContext", "runAsGroup").(int)
		if u == 0 {
			t.Fatalf("%s: no runAsUser", name)
		}
		uid, gid = u, g
		ct.cred = &syscall.Credential{Uid: uint32(u), Gid: uint32(g)}
	}
	ct.r = &rewriter{t: t, hosts: hosts, mounts: map[string]string{}, ports: map[int]int{}}
	volumes := map[string]any{}
	for _, v := range list(pod, "volumes") {
		volumes[str(v, "name")] = v
	}
	env := podEnv(t, o, c)
	for _, m := range list(c, "volumeMounts") {
		v := volumes[str(m, "name")]
		var dir string
		switch {
		case get(v, "configMap") != nil:
			dir = writableDir(t)
			for k, val := range get(o["ConfigMap"][str(v, "configMap", "name")], "data").(map[string]any) {
				if err := os.WriteFile(filepath.Join(dir, k), []byte(fmt.Sprint(val)), 0o444); err != nil {
					t.Fatal(err)
				}
			}
			os.Chmod(dir, 0o555)
		case get(v, "emptyDir") != nil:
			dir = volumeDir(t, uid, gid)
		default:
			t.Fatalf("%s: volume %s of a kind the test does not play", name, str(m, "name"))
		}
		ct.r.mounts[str(m, "mountPath")] = dir
		if str(m, "mountPath") == "/tmp" {
			env["TMPDIR"] = dir // the process cannot be given its own /tmp
			t.Logf("%s: /tmp is the emptyDir %s (TMPDIR)", name, dir)
		}
	}
	for k, v := range extra {
		env[k] = v
		t.Logf("%s: %s=%s added (the cluster's own identity and endpoints)", name, k, v)
	}
	ct.dir = writableDir(t)
	if get(c, "securityContext", "readOnlyRootFilesystem") == true {
		ct.dir = readOnlyDir(t)
	}
	env["HOME"] = ct.dir // the image's home is on the read-only root filesystem too
	ct.env = ct.r.env(name, env)
	for _, p := range list(c, "ports") {
		cp, _ := get(p, "containerPort").(int)
		if ct.r.ports[cp] == 0 {
			t.Fatalf("%s: port %s (%d) is not a listen address of its environment", name, str(p, "name"), cp)
		}
		ct.ports[str(p, "name")] = ct.r.ports[cp]
	}
	return ct
}

// TestKubernetesContract renders the example overlay with kustomize, and the Helm chart
// with its example values, and runs each here: the lethe-tables Job's command against
// DynamoDB (the tables read back), the lethe-topics Job's command against a three-broker
// Kafka cluster (the topics read back with kadm), then every Deployment's container as the
// pod's user from a read-only working directory with only its volumes writable, with the
// environment of its ConfigMaps and Secrets (placeholders replaced, backing services
// mapped to stand-ins, the cluster's AWS identity replaced by the endpoints of moto's
// server). Each container's startup, liveness and readiness probes must answer, and an
// erasure submitted to the intake with a token of LETHE_TOKENS must end in a COMPLETE
// receipt. A second intake replica then starts from the same Deployment: a TENANT request
// submitted to one waits for approval, and both report it so (the workflow lives in the
// audit table they share).
func TestKubernetesContract(t *testing.T) {
	eachSource(t, kubernetesContract)
}

func kubernetesContract(t *testing.T, o objects) {
	secrets := replacePlaceholders(t, o)
	config, _ := named(o, "ConfigMap", "lethe-config")
	cfg := func(k string) string { return str(config, "data", k) }
	redisUser := cfg("LETHE_REDIS_USERNAME")
	if redisUser == "" {
		t.Fatal("lethe-config has no LETHE_REDIS_USERNAME")
	}
	s := startStandIns(t, 3, []string{"--user", "default", "off", "--user", redisUser, "on", ">" + secrets["LETHE_REDIS_PASSWORD"], "~*", "+@all"}, "lethe-datasets")
	brokers := strings.Split(cfg("LETHE_KAFKA_BROKERS"), ",")
	if len(brokers) > len(s.kafka) {
		t.Fatalf("LETHE_KAFKA_BROKERS names %d brokers, the stand-in has %d", len(brokers), len(s.kafka))
	}
	hosts := map[string]string{cfg("LETHE_QDRANT_ADDR"): s.qdrant, cfg("LETHE_REDIS_ADDRS"): s.redis}
	for i, b := range brokers {
		hosts[b] = s.kafka[i]
	}
	region := cfg("AWS_REGION")
	if region == "" {
		t.Fatal("lethe-config has no AWS_REGION")
	}
	extra := map[string]string{
		"LETHE_DYNAMODB_ENDPOINT": s.dynamo, "LETHE_S3_ENDPOINT": s.s3,
		"AWS_ACCESS_KEY_ID": "contract", "AWS_SECRET_ACCESS_KEY": "contract", "AWS_EC2_METADATA_DISABLED": "true",
	}

	// The tables Job creates the audit and data-key tables the services then find.
	tablesObj, tablesName := job(t, o, "lethe-tables")
	tables := prepare(t, o, tablesName, get(tablesObj, "spec", "template", "spec"), hosts, extra)
	start(t, tables.name, tables.bin, tables.args, tables.env, tables.dir, tables.cred).wait(t, 60*time.Second)
	s.checkTables(t, region, cfg("LETHE_AUDIT_TABLE"), cfg("LETHE_KEYS_TABLE"))

	topicsObj, topicsName := job(t, o, "lethe-topics")
	topics := prepare(t, o, topicsName, get(topicsObj, "spec", "template", "spec"), hosts, nil)
	start(t, topics.name, topics.bin, topics.args, topics.env, topics.dir, topics.cred).wait(t, 30*time.Second)
	checkTopics(t, s.kafka, topics.args)

	var (
		intakeURL  string
		intakeProc *proc
	)
	for _, sv := range services {
		name := "lethe-" + sv.name
		ct := prepare(t, o, name, get(o["Deployment"][name], "spec", "template", "spec"), hosts, extra)
		p := start(t, name, ct.bin, ct.args, ct.env, ct.dir, ct.cred)
		for _, probe := range []string{"startupProbe", "livenessProbe", "readinessProbe"} {
			g := get(ct.spec, probe, "httpGet")
			if g == nil {
				t.Fatalf("%s has no %s", name, probe)
			}
			port := ct.ports[str(g, "port")]
			if port == 0 {
				t.Fatalf("%s: %s probes port %v, which the container does not name", name, probe, get(g, "port"))
			}
			p.waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d%s", port, str(g, "path")))
		}
		if sv.name == "intake" {
			intakeURL, intakeProc = fmt.Sprintf("http://127.0.0.1:%d", ct.ports["http"]), p
		}
		t.Cleanup(func() { untouched(t, name, ct.dir) })
	}

	body := `{"tenant_id":"vastralaya","subject_id":"cust-42","session_ids":["s1"],"regulation":"GDPR"}`
	code, acc := submit(t, intakeURL, secrets["token"], "k8s-contract", body)
	if code != http.StatusAccepted || acc.RequestID == "" {
		t.Fatalf("submit: %d, request id %q", code, acc.RequestID)
	}
	st := awaitOutcome(t, intakeURL, secrets["token"], acc.RequestID)
	var rc event.Receipt
	if st.State != intake.StateComplete || getJSON(t, intakeURL+"/v1/erasures/"+acc.RequestID+"/receipt", secrets["token"], &rc) != http.StatusOK ||
		rc.Status != event.ReceiptComplete {
		t.Fatalf("status %+v, receipt %+v; want COMPLETE", st, rc)
	}

	name := "lethe-intake-2"
	ct := prepare(t, o, name, get(o["Deployment"]["lethe-intake"], "spec", "template", "spec"), hosts, extra)
	p := start(t, name, ct.bin, ct.args, ct.env, ct.dir, ct.cred)
	p.waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d%s", ct.ports[str(ct.spec, "readinessProbe", "httpGet", "port")], str(ct.spec, "readinessProbe", "httpGet", "path")))
	t.Cleanup(func() { untouched(t, name, ct.dir) })
	second := fmt.Sprintf("http://127.0.0.1:%d", ct.ports["http"])
	checkApproval(t, intakeProc, cfg("LETHE_AUDIT_TABLE"), intakeURL, secrets["token"], "vastralaya", intakeURL, second)
}

// untouched fails t if the read-only working directory dir holds anything.
func untouched(t *testing.T, name, dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) > 0 {
		t.Errorf("%s wrote into its working directory: %v %v", name, entries, err)
	}
}

// checkTopics reads the topics back with kadm: the replication factor and
// min.insync.replicas the Job's arguments ask for.
func checkTopics(t *testing.T, brokers, args []string) {
	t.Helper()
	want := map[string]string{}
	for i := 0; i+1 < len(args); i++ {
		if strings.HasPrefix(args[i], "--") {
			want[strings.TrimPrefix(args[i], "--")] = args[i+1]
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	details, err := adm.ListTopics(kadm.WithAuthorizedOps(ctx), event.TopicRequested)
	if err != nil {
		t.Fatal(err)
	}
	d := details[event.TopicRequested]
	if d.Err != nil || strconv.Itoa(d.Partitions.NumReplicas()) != want["replication-factor"] || strconv.Itoa(len(d.Partitions)) != want["partitions"] {
		t.Errorf("erasure.requested after the Job: %v, %d partitions of %d replicas; want %s of %s", d.Err, len(d.Partitions), d.Partitions.NumReplicas(), want["partitions"], want["replication-factor"])
	}
	rc, err := adm.DescribeTopicConfigs(ctx, event.TopicRequested)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rc.On(event.TopicRequested, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got bytes.Buffer
	for _, kv := range c.Configs {
		if kv.Key == "min.insync.replicas" && kv.Value != nil {
			got.WriteString(*kv.Value)
		}
	}
	if got.String() != want["min-insync-replicas"] {
		t.Errorf("erasure.requested min.insync.replicas %q, want %q", got.String(), want["min-insync-replicas"])
	}
}
