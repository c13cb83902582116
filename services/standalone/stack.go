package main

import (
	"flag"
	"fmt"
	"io"
	"net"
	"path/filepath"

	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/envconf"
)

// Default listen addresses of the embedded components when serving (without -demo), the
// ports their real counterparts use, so that redis-cli, kcat, aws s3 and a RAG app reach
// them without configuration. -demo uses free ports.
var serveAddrs = embedded.Addrs{
	Kafka:    "127.0.0.1:9092",
	Registry: "127.0.0.1:8081",
	Qdrant:   "127.0.0.1:6334",
	Redis:    "127.0.0.1:6379",
	S3:       "127.0.0.1:9000",
}

// component is one embedded component's address flag.
type component struct {
	flag, what string
	addr       *string
}

func components(a *embedded.Addrs) []component {
	return []component{
		{"kafka", "Kafka broker (kfake)", &a.Kafka},
		{"registry", "Schema Registry (srfake)", &a.Registry},
		{"qdrant", "Qdrant emulator, gRPC", &a.Qdrant},
		{"redis", "redis-server (miniredis without one)", &a.Redis},
		{"s3", "S3 (gofakes3)", &a.S3},
	}
}

// addrFlags defines a flag per component on fs; the values are resolved by resolveAddrs.
func addrFlags(fs *flag.FlagSet, a *embedded.Addrs) {
	vars := envconf.Vars(a)
	for i, c := range components(a) {
		fs.StringVar(c.addr, c.flag, "", fmt.Sprintf("%s listen address (default $%s, or %s; -demo: a free port)", c.what, vars[i].Name, *components(&serveAddrs)[i].addr))
	}
}

// resolveAddrs sets each address of a, loaded from its variable, to its flag's value when
// given, then (unless demo) an unset one to serveAddrs'.
func resolveAddrs(a *embedded.Addrs, flags embedded.Addrs, demo bool) {
	set, given, serve := components(a), components(&flags), components(&serveAddrs)
	for i, c := range set {
		if *given[i].addr != "" {
			*c.addr = *given[i].addr
		}
		if *c.addr == "" && !demo {
			*c.addr = *serve[i].addr
		}
	}
}

// printStack writes where every component listens and, when serving (examples), commands
// that reach them. The examples name the demo customer, so the demo (whose output must
// hold no raw identifier) prints none.
func printStack(w io.Writer, sys *embedded.System, examples bool) {
	st := sys.Stack
	a := st.Addrs
	fmt.Fprintf(w, `lethe standalone: listening
  intake (HTTP)        %s
  kafka                %s
  schema registry      http://%s
  qdrant (gRPC)        %s (server reflection on)
  redis                %s (%s)
  s3                   http://%s (bucket %s, access key lethe, secret lethe-local)
  audit store          %s
`,
		sys.BaseURL, a.Kafka, a.Registry, a.Qdrant, a.Redis, st.RedisKind, a.S3, embedded.DatasetBucket,
		filepath.Join(sys.DataDir, "audit"))
	if !examples {
		return
	}
	fmt.Fprintf(w, `try:
  curl -s -X POST %s/v1/erasures -H 'Content-Type: application/json' -d '{"tenant_id":"%s","subject_id":"anna.schmidt@example.de","regulation":"GDPR"}'
  echo '{"tenant_id":"%s","subject_id":"anna.schmidt@example.de","regulation":"GDPR"}' | kcat -P -b %s -t erasure.intake -k %s -H content-type=application/json
  kcat -C -b %s -t erasure.completed -o beginning -e
  redis-cli -h %s -p %s --scan --pattern 'session:%s:*'
  AWS_ACCESS_KEY_ID=lethe AWS_SECRET_ACCESS_KEY=lethe-local AWS_DEFAULT_REGION=us-east-1 aws --endpoint-url http://%s s3 ls s3://%s --recursive
  curl -s http://%s/subjects
`,
		sys.BaseURL, demoTenant,
		demoTenant, a.Kafka, demoTenant,
		a.Kafka,
		host(a.Redis), port(a.Redis), demoTenant,
		a.S3, embedded.DatasetBucket,
		a.Registry)
}

func host(hostport string) string {
	h, _, _ := net.SplitHostPort(hostport)
	return h
}

func port(hostport string) string {
	_, p, _ := net.SplitHostPort(hostport)
	return p
}
