package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

func TestCompose(t *testing.T) {
	compose := readYAML(t, "../docker-compose.yml")[0]
	svcs, _ := get(compose, "services").(map[string]any)
	for _, s := range services {
		c := svcs[s.name]
		if c == nil {
			t.Errorf("compose has no service %s", s.name)
			continue
		}
		if str(c, "build", "args", "SERVICE") != s.name {
			t.Errorf("compose %s: build arg SERVICE=%q", s.name, str(c, "build", "args", "SERVICE"))
		}
		env, _ := get(c, "environment").(map[string]any)
		if env["LETHE_METRICS_ADDR"] != "0.0.0.0:9090" {
			t.Errorf("compose %s: LETHE_METRICS_ADDR = %v, want 0.0.0.0:9090", s.name, env["LETHE_METRICS_ADDR"])
		}
		for _, secret := range []string{"LETHE_HMAC_KEY", "LETHE_KEK", "LETHE_MAC_KEY"} {
			if v, _ := env[secret].(string); !strings.HasPrefix(v, "${"+secret+":?") {
				t.Errorf("compose %s: %s = %q, want it required from the environment (${%s:?…})", s.name, secret, v, secret)
			}
		}
		// The chain key vouches for the receipts: only their writer holds it.
		if v, _ := env["LETHE_CHAIN_KEY"].(string); (s.name == "aggregator") != strings.HasPrefix(v, "${LETHE_CHAIN_KEY:?") {
			t.Errorf("compose %s: LETHE_CHAIN_KEY = %q; want it required for the aggregator and absent elsewhere", s.name, v)
		}
		if get(c, "depends_on", "kafka", "condition") != "service_healthy" {
			t.Errorf("compose %s: does not wait for a healthy kafka", s.name)
		}
		if get(c, "depends_on", "topics", "condition") != "service_completed_successfully" || env["LETHE_CREATE_TOPICS"] != "false" {
			t.Errorf("compose %s: must leave the topics to the topics one-shot and wait for it", s.name)
		}
		if env["LETHE_KEYS_TABLE"] == nil || env["LETHE_AUDIT_TABLE"] == nil {
			t.Errorf("compose %s: no shared LETHE_KEYS_TABLE and LETHE_AUDIT_TABLE: each process would keep its own keys", s.name)
		}
	}
	if env, _ := get(svcs["intake"], "environment").(map[string]any); env["LETHE_TOKENS"] == nil {
		t.Error("compose intake: no LETHE_TOKENS: the intake refuses to start without credentials")
	}
	// Published ports listen on the loopback interface only; stores keep their data on volumes.
	for name, c := range svcs {
		for _, p := range list(c, "ports") {
			if !strings.HasPrefix(p.(string), "127.0.0.1:") {
				t.Errorf("compose %s publishes %s on every interface", name, p)
			}
		}
	}
	for name, dir := range map[string]string{"kafka": "/var/lib/kafka/data", "dynamodb": "/home/dynamodblocal/data", "minio": "/data", "qdrant": "/qdrant/storage"} {
		found := false
		for _, v := range list(svcs[name], "volumes") {
			src, target, _ := strings.Cut(v.(string), ":")
			found = found || target == dir && !strings.HasPrefix(src, ".")
		}
		if !found {
			t.Errorf("compose %s keeps %s on no named volume", name, dir)
		}
	}
	if slices.Contains(list(svcs["dynamodb"], "command"), any("-inMemory")) {
		t.Error("compose dynamodb runs in memory")
	}
	if env, _ := get(svcs["intake"], "environment").(map[string]any); env["LETHE_HTTP_ADDR"] != "0.0.0.0:8080" {
		t.Errorf("compose intake: LETHE_HTTP_ADDR = %v", env["LETHE_HTTP_ADDR"])
	}
	for _, name := range []string{"kafka", "qdrant", "redis", "dynamodb", "minio", "minio-init", "prometheus", "grafana"} {
		if svcs[name] == nil {
			t.Errorf("compose has no service %s", name)
		}
	}
	// Every host path mounted into a container exists.
	for name, c := range svcs {
		for _, v := range list(c, "volumes") {
			host, _, _ := strings.Cut(v.(string), ":")
			if !strings.HasPrefix(host, ".") {
				continue
			}
			if _, err := os.Stat(filepath.Join("..", host)); err != nil {
				t.Errorf("compose %s mounts %s: %v", name, host, err)
			}
		}
	}
}

// TestComposeConfig validates docker-compose.yml with Compose itself, and checks that it
// refuses to run without any of the pseudonym key, the key-encryption key, the record MAC
// key and the receipt chain key.
func TestComposeConfig(t *testing.T) {
	cmd := tool(t, "apt-get install docker-compose", []string{"docker-compose"}, []string{"docker", "compose"})
	keys := []string{"LETHE_HMAC_KEY", "LETHE_KEK", "LETHE_MAC_KEY", "LETHE_CHAIN_KEY"}
	run := func(env ...string) (string, error) {
		c := exec.Command(cmd[0], append(cmd[1:], "-f", "../docker-compose.yml", "config", "-q")...)
		c.Env = append(filterEnv(os.Environ(), keys...), env...)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	set := func(except string) []string {
		var env []string
		for _, k := range keys {
			if k != except {
				env = append(env, k+"=k")
			}
		}
		return env
	}
	t.Run("every key", func(t *testing.T) {
		t.Parallel()
		if out, err := run(set("")...); err != nil {
			t.Fatalf("compose config: %v\n%s", err, out)
		}
	})
	for _, missing := range keys {
		t.Run("without "+missing, func(t *testing.T) {
			t.Parallel()
			if _, err := run(set(missing)...); err == nil {
				t.Errorf("compose config passes without %s", missing)
			}
		})
	}
}

func filterEnv(env []string, drop ...string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, d := range drop {
			keep = keep && k != d
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}

// TestDockerfile: the build image is the toolchain go.work asks for, and the module cache
// is mounted where that image keeps it (GOPATH=/go).
func TestDockerfile(t *testing.T) {
	work, err := os.ReadFile("../go.work")
	if err != nil {
		t.Fatal(err)
	}
	version := regexp.MustCompile(`(?m)^go (\S+)`).FindSubmatch(work)
	if version == nil {
		t.Fatal("go.work names no go version")
	}
	b, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "FROM golang:"+string(version[1])+" ") {
		t.Errorf("the Dockerfile does not build with golang:%s, the toolchain go.work asks for", version[1])
	}
	if !strings.Contains(string(b), "--mount=type=cache,target=/go/pkg/mod") {
		t.Error("the Dockerfile does not cache /go/pkg/mod, the golang image's module cache")
	}
	// The version and commit are stamped into the variables pkg/version declares.
	src, err := os.ReadFile("../pkg/version/version.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"Version", "Revision"} {
		if !strings.Contains(string(b), "-X github.com/lethe-erasure/lethe/pkg/version."+v+"=${") {
			t.Errorf("the Dockerfile does not stamp version.%s", v)
		}
		if !regexp.MustCompile(`(?m)^var ` + v + ` = "`).Match(src) {
			t.Errorf("pkg/version declares no string variable %s to stamp", v)
		}
	}
}
