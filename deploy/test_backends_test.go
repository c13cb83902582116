package deploy

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/lethe-erasure/lethe/pkg/qdrantfake/qdranttest"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

const testBackendsFile = "test-backends/docker-compose.yml"

// TestTestBackendsCompose checks the compose file of real backends for the test suite
// against what the switches in testenv and qdranttest read, without a container engine:
// Compose accepts it; it runs qdrant/qdrant, apache/kafka as one KRaft node, minio/minio and
// amazon/dynamodb-local at the versions of the production-like compose file; each variable
// its header exports is one the tests read, pointing at a port the file publishes on
// 127.0.0.1 (Kafka's the one it advertises); MinIO's root credentials are the exported AWS
// ones; DynamoDB Local keeps one database whatever the credentials; and docs/testing.md gives
// the same commands.
func TestTestBackendsCompose(t *testing.T) {
	cmd := tool(t, "apt-get install docker-compose", []string{"docker-compose"}, []string{"docker", "compose"})
	if out, err := exec.Command(cmd[0], append(cmd[1:], "-f", testBackendsFile, "config", "-q")...).CombinedOutput(); err != nil {
		t.Fatalf("compose config: %v\n%s", err, out)
	}
	doc := readYAML(t, testBackendsFile)[0]
	svcs, _ := get(doc, "services").(map[string]any)
	prod, _ := get(readYAML(t, composeFile)[0], "services").(map[string]any)
	for name, repo := range map[string]string{"qdrant": "qdrant/qdrant", "kafka": "apache/kafka", "minio": "minio/minio", "dynamodb": "amazon/dynamodb-local"} {
		image := str(svcs[name], "image")
		if r, _, _ := strings.Cut(image, ":"); r != repo {
			t.Errorf("service %s runs %q, want the %s image", name, image, repo)
		}
		if want := str(prod[name], "image"); image != want {
			t.Errorf("service %s runs %s, the production-like stack %s", name, image, want)
		}
	}
	if len(svcs) != 4 {
		t.Errorf("%d services, want qdrant, kafka, minio and dynamodb only", len(svcs))
	}

	published := map[string]string{} // host port -> service
	for name, c := range svcs {
		for _, p := range list(c, "ports") {
			rest, ok := strings.CutPrefix(p.(string), "127.0.0.1:")
			if !ok {
				t.Errorf("service %s publishes %s on every interface", name, p)
				continue
			}
			host, _, _ := strings.Cut(rest, ":")
			published[host] = name
		}
	}
	exports, _ := headerOf(t, testBackendsFile)
	env := map[string]string{}
	for _, e := range exports {
		k, v, _ := strings.Cut(strings.TrimPrefix(e, "export "), "=")
		env[k] = v
	}
	portOf := func(v string) string {
		if u, err := url.Parse(v); err == nil && u.Port() != "" {
			return u.Port()
		}
		_, p, _ := net.SplitHostPort(v)
		return p
	}
	for k, svc := range map[string]string{qdranttest.EnvAddr: "qdrant", testenv.EnvKafka: "kafka", testenv.EnvS3: "minio", testenv.EnvDynamoDB: "dynamodb"} {
		v, ok := env[k]
		if !ok {
			t.Errorf("the header exports no %s", k)
			continue
		}
		if got := published[portOf(v)]; got != svc {
			t.Errorf("%s=%s: port published by %q, want %s", k, v, got, svc)
		}
	}
	if portOf(env[qdranttest.EnvAddr]) != "6334" {
		t.Errorf("%s=%s: want Qdrant's gRPC port 6334", qdranttest.EnvAddr, env[qdranttest.EnvAddr])
	}

	kafka, _ := get(svcs["kafka"], "environment").(map[string]any)
	for k, want := range map[string]string{
		"KAFKA_PROCESS_ROLES":                    "broker,controller",
		"KAFKA_ADVERTISED_LISTENERS":             "PLAINTEXT://" + env[testenv.EnvKafka],
		"KAFKA_AUTO_CREATE_TOPICS_ENABLE":        "false",
		"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": "1",
		"KAFKA_CONTROLLER_LISTENER_NAMES":        "CONTROLLER",
	} {
		if got := fmt.Sprint(kafka[k]); got != want {
			t.Errorf("kafka %s = %q, want %q", k, got, want)
		}
	}
	minio, _ := get(svcs["minio"], "environment").(map[string]any)
	if str(minio, "MINIO_ROOT_USER") != env["AWS_ACCESS_KEY_ID"] || str(minio, "MINIO_ROOT_PASSWORD") != env["AWS_SECRET_ACCESS_KEY"] || env["AWS_REGION"] == "" {
		t.Errorf("MinIO's root credentials %s/%s, the exported AWS ones %s/%s (region %q)", str(minio, "MINIO_ROOT_USER"),
			str(minio, "MINIO_ROOT_PASSWORD"), env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], env["AWS_REGION"])
	}
	if !slices.Contains(list(svcs["dynamodb"], "command"), any("-sharedDb")) {
		t.Error("dynamodb runs without -sharedDb: a table would be seen only with the credentials and region that created it")
	}

	page, err := os.ReadFile("../docs/testing.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(page), "\n## Running the suite against real backends\n")
	if !ok {
		t.Fatal(`docs/testing.md has no section "Running the suite against real backends"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	for _, line := range append(exports, "docker compose -f deploy/test-backends/docker-compose.yml up -d --wait", "make test") {
		if !strings.Contains(section, line) {
			t.Errorf("the docs/testing.md section lacks %q", line)
		}
	}
}
