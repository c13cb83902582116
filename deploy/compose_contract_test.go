package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"gopkg.in/yaml.v3"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/worker"
)

const composeFile = "../docker-compose.yml"

// composeStandIns maps the compose services that back Lethe, as the other services address
// them, to the stand-in that plays each.
func composeStandIns(s *standIns) map[string]string {
	return map[string]string{
		"kafka:9092":                  s.kafka[0],
		"qdrant:6334":                 s.qdrant,
		"redis:6379":                  s.redis,
		"http://dynamodb:8000":        s.dynamo,
		"http://minio:9000":           s.s3,
		"http://schema-registry:8081": s.registry,
	}
}

// composeHeader returns the shell lines the compose file documents in its header comment:
// the exports and the example request (continuation lines joined).
func composeHeader(t *testing.T) (exports []string, curl string) {
	t.Helper()
	exports, curl = headerOf(t, composeFile)
	if len(exports) == 0 || curl == "" {
		t.Fatalf("%s documents no exports or no curl example in its header", composeFile)
	}
	return exports, curl
}

// headerOf returns the export lines and the curl example (continuation lines joined) of
// file's header comment.
func headerOf(t *testing.T, file string) (exports []string, curl string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cont bool
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "#") {
			break
		}
		cmd := strings.TrimSpace(strings.TrimPrefix(line, "#"))
		switch {
		case cont:
			curl += " " + strings.TrimSuffix(cmd, "\\")
		case strings.HasPrefix(cmd, "export "):
			exports = append(exports, cmd)
		case strings.HasPrefix(cmd, "curl "):
			curl = strings.TrimSuffix(cmd, "\\")
		default:
			continue
		}
		cont = strings.HasSuffix(cmd, "\\")
	}
	return exports, curl
}

// composeConfig runs the documented exports in bash and renders the compose file with
// Compose itself (docker-compose config: anchors merged, variables interpolated).
func composeConfig(t *testing.T, exports []string) (map[string]any, []string) {
	t.Helper()
	var names []string
	for _, e := range exports {
		name, _, _ := strings.Cut(strings.TrimPrefix(e, "export "), "=")
		names = append(names, name)
	}
	script := strings.Join(exports, "\n") + "\n"
	for _, n := range names {
		script += fmt.Sprintf("printf '%%s=%%s\\n' %s \"$%s\"\n", n, n)
	}
	out, err := exec.Command("bash", "-c", script).Output()
	if err != nil {
		t.Fatalf("the documented exports: %v", err)
	}
	secrets := strings.Split(strings.TrimSpace(string(out)), "\n")
	cmd := tool(t, "apt-get install docker-compose", []string{"docker-compose"}, []string{"docker", "compose"})
	c := exec.Command(cmd[0], append(cmd[1:], "-f", composeFile, "config")...)
	c.Env = append(filterEnv(os.Environ(), names...), secrets...)
	rendered, err := c.Output()
	if err != nil {
		t.Fatalf("compose config: %v", err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(rendered, &doc); err != nil {
		t.Fatal(err)
	}
	return doc, secrets
}

// dockerfileEnv returns the ENV of the Dockerfile's last stage: the environment every
// image starts from before Compose's.
func dockerfileEnv(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	stages := strings.Split(text, "\nFROM ")
	env := map[string]string{}
	for _, line := range strings.Split(stages[len(stages)-1], "\n") {
		if rest, ok := strings.CutPrefix(line, "ENV "); ok {
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
		}
	}
	return env
}

func composeEnv(t *testing.T, svc any) map[string]string {
	t.Helper()
	env := dockerfileEnv(t)
	for k, v := range get(svc, "environment").(map[string]any) {
		env[k] = fmt.Sprint(v)
	}
	return env
}

// composeRun is one run of the compose stack on stand-ins.
type composeRun struct {
	st        intake.Status
	receipt   *event.Receipt
	redis     *redis.Client
	seededKey string
	intake    *proc  // the intake process
	intakeURL string // its published port's address
	token     string // the example request's bearer token
}

// runCompose runs doc (a rendered compose file) on stand-ins: the topics one-shot, then
// every Lethe service with its environment, then the file's curl example as written, and
// returns the request's outcome.
func runCompose(t *testing.T, doc map[string]any, curl string) composeRun {
	t.Helper()
	bin := binaries(t)
	svcs := get(doc, "services").(map[string]any)

	// redis-server with the compose file's own arguments (its ACL users), and a user of the
	// test's own to seed data with; minio-init's bucket, versioned.
	var redisArgs []string
	for _, a := range list(svcs["redis"], "command")[1:] {
		redisArgs = append(redisArgs, fmt.Sprint(a))
	}
	redisArgs = append(redisArgs, "--user", "contract-seeder", "on", ">contract-seeder", "~*", "+@all")
	bucket := regexp.MustCompile(`mc mb -p local/([a-z0-9.-]+)`).FindStringSubmatch(fmt.Sprint(list(svcs["minio-init"], "entrypoint")...))
	if bucket == nil {
		t.Fatal("minio-init creates no bucket")
	}
	s := startStandIns(t, 1, redisArgs, bucket[1])
	t.Logf("stand-ins: kafka %s, qdrant %s, redis %s, dynamodb %s, minio %s (bucket %s)", s.kafka[0], s.qdrant, s.redis, s.dynamo, s.s3, bucket[1])

	rdb := redis.NewClient(&redis.Options{Addr: s.redis, Username: "contract-seeder", Password: "contract-seeder"})
	t.Cleanup(func() { rdb.Close() })
	run := composeRun{redis: rdb, seededKey: "session:vastralaya:cust-42:s1"}
	if err := rdb.Set(t.Context(), run.seededKey, "hello from cust-42", 0).Err(); err != nil {
		t.Fatal(err)
	}

	hosts := composeStandIns(s)
	newRewriter := func(svc any) *rewriter {
		r := &rewriter{t: t, hosts: hosts, mounts: map[string]string{}, ports: map[int]int{}}
		for _, v := range list(svc, "volumes") {
			src, target := str(v, "source"), str(v, "target") // Compose v2's long form
			if s, ok := v.(string); ok {                      // v1's source:target[:mode]
				parts := strings.Split(s, ":")
				src, target = parts[0], parts[min(1, len(parts)-1)]
			}
			if filepath.IsAbs(src) {
				r.mounts[target] = src
			}
		}
		return r
	}

	topics := svcs["topics"]
	if str(topics, "build", "args", "SERVICE") != "lethectl" {
		t.Fatal("compose has no topics one-shot built from lethectl")
	}
	var args []string
	for _, a := range list(topics, "command") {
		args = append(args, fmt.Sprint(a))
	}
	start(t, "topics", filepath.Join(bin, "lethectl"), args, newRewriter(topics).env("topics", composeEnv(t, topics)), writableDir(t), nil).
		wait(t, 30e9)

	// The example request addresses the intake's published ports on localhost.
	published := map[string]string{}
	for _, sv := range services {
		c := svcs[sv.name]
		if str(c, "build", "args", "SERVICE") != sv.name {
			t.Fatalf("compose %s is not built from services/%s", sv.name, sv.name)
		}
		r := newRewriter(c)
		env := r.env(sv.name, composeEnv(t, c))
		p := start(t, sv.name, filepath.Join(bin, sv.name), nil, env, writableDir(t), nil)
		p.waitHTTP(t, fmt.Sprintf("http://127.0.0.1:%d/readyz", r.ports[9090]))
		if sv.name == "intake" {
			run.intake = p
		}
		for _, pub := range list(c, "ports") {
			hostPort, target := fmt.Sprint(get(pub, "published")), fmt.Sprint(get(pub, "target")) // Compose v2's long form
			if s, ok := pub.(string); ok {                                                        // v1's host_ip:published:target/proto
				f := strings.Split(strings.TrimSuffix(s, "/tcp"), ":")
				hostPort, target = f[max(0, len(f)-2)], f[len(f)-1]
			}
			if cp, _ := strconv.Atoi(target); r.ports[cp] != 0 {
				published["localhost:"+hostPort] = fmt.Sprintf("127.0.0.1:%d", r.ports[cp])
			}
		}
	}
	intakeURL := ""
	line := curl
	for from, to := range published {
		if strings.Contains(line, from) {
			line, intakeURL = strings.ReplaceAll(line, from, to), to
			t.Logf("the example request: %s (published port) rewritten to %s", from, to)
		}
	}
	if intakeURL == "" {
		t.Fatalf("the example request addresses no published port of a Lethe service: %s", curl)
	}
	t.Logf("the example request as run: %s", line)
	out, err := exec.Command("bash", "-c", line).Output()
	if err != nil {
		t.Fatalf("the example request: %v", err)
	}
	var acc struct {
		RequestID string `json:"request_id"`
		Error     string `json:"error"`
	}
	if err := json.Unmarshal(out, &acc); err != nil || acc.RequestID == "" {
		t.Fatalf("the example request answered %q (%v)", out, err)
	}
	token := regexp.MustCompile(`Authorization: Bearer ([^'" ]+)`).FindStringSubmatch(line)
	if token == nil {
		t.Fatal("the example request sends no bearer token")
	}
	run.intakeURL, run.token = "http://"+intakeURL, token[1]
	run.st = awaitOutcome(t, run.intakeURL, run.token, acc.RequestID)
	var rc event.Receipt
	if getJSON(t, "http://"+intakeURL+"/v1/erasures/"+acc.RequestID+"/receipt", token[1], &rc) == 200 {
		run.receipt = &rc
	}
	return run
}

// TestComposeContract runs docker-compose.yml's Lethe services as processes with exactly
// the environment Compose gives them (backing services replaced by local stand-ins, see
// rewriter), after the topics one-shot, and sends the file's documented curl example: it
// must end in a COMPLETE receipt that erased the seeded Redis key. The intake keeps its
// workflow in the audit table with approval on: a TENANT request waits for approval.
func TestComposeContract(t *testing.T) {
	exports, curl := composeHeader(t)
	doc, _ := composeConfig(t, exports)
	run := runCompose(t, doc, curl)
	if run.st.State != intake.StateComplete || run.receipt == nil || run.receipt.Status != event.ReceiptComplete {
		t.Fatalf("status %+v, receipt %v; want COMPLETE with a receipt", run.st, run.receipt)
	}
	for _, s := range run.st.Stores {
		if s.Store == "redis" && s.Deleted < 1 {
			t.Errorf("redis deleted %d, want the seeded key", s.Deleted)
		}
	}
	if n, err := run.redis.Exists(t.Context(), run.seededKey).Result(); err != nil || n != 0 {
		t.Errorf("the seeded key: exists %d, %v; want erased", n, err)
	}
	table := str(doc, "services", "intake", "environment", "LETHE_AUDIT_TABLE")
	checkApproval(t, run.intake, table, run.intakeURL, run.token, "vastralaya", run.intakeURL)
}

// TestComposeContractWithoutSharedKeyTable removes LETHE_KEYS_TABLE from redis-deleter in a
// copy of the rendered compose file: the deleter then reads its own key store, finds no key
// for the request, and its stores report FAILED with the missing-key reason instead of
// taking the request for complete.
func TestComposeContractWithoutSharedKeyTable(t *testing.T) {
	exports, curl := composeHeader(t)
	doc, _ := composeConfig(t, exports)
	env := get(doc, "services", "redis-deleter", "environment").(map[string]any)
	if _, ok := env["LETHE_KEYS_TABLE"]; !ok {
		t.Fatal("redis-deleter has no LETHE_KEYS_TABLE to remove")
	}
	delete(env, "LETHE_KEYS_TABLE")
	run := runCompose(t, doc, curl)
	if run.st.State != intake.StateFailed {
		t.Fatalf("state %s, want FAILED", run.st.State)
	}
	var failed []string
	for _, s := range run.st.Stores {
		if s.Status == event.StatusFailed {
			failed = append(failed, s.Store)
			if s.Error != worker.ReasonMissingKey {
				t.Errorf("%s: error %q, want %q", s.Store, s.Error, worker.ReasonMissingKey)
			}
		}
	}
	slices.Sort(failed)
	if !slices.Equal(failed, []string{"langgraph", "redis"}) {
		t.Errorf("FAILED stores %v, want redis-deleter's: langgraph, redis", failed)
	}
	if n, _ := run.redis.Exists(t.Context(), run.seededKey).Result(); n != 1 {
		t.Error("the seeded key is gone although the deleter had no identifiers")
	}
	t.Logf("stores: %+v", run.st.Stores)
}
