// Package catalog lists every Lethe service binary with its declared configuration and
// writes docs/configuration.md from them (Markdown; make docs). It links every store's
// client: no service imports it.
package catalog

//go:generate go run ./cmd/configdoc -o ../../docs/configuration.md

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/lethe-erasure/lethe/pkg/aggregator"
	"github.com/lethe-erasure/lethe/pkg/datasetstore"
	"github.com/lethe-erasure/lethe/pkg/embedded"
	"github.com/lethe-erasure/lethe/pkg/envconf"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/pkg/postgresstore"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore"
	"github.com/lethe-erasure/lethe/pkg/redisstore"
	"github.com/lethe-erasure/lethe/pkg/s3env"
	"github.com/lethe-erasure/lethe/pkg/service"
	"github.com/lethe-erasure/lethe/pkg/webhookstore"
)

// Service is one service binary and its declared configuration.
type Service struct {
	Name   string // the binary, as under services/
	Config any    // a zero value of the configuration its main loads
}

// Services are every service binary, in the order the docs list them.
var Services = []Service{
	{"intake", service.Config[intake.Config]{}},
	{"aggregator", service.Config[aggregator.Config]{}},
	{"qdrant-deleter", service.Config[service.DeleterSettings[qdrantstore.Settings]]{}},
	{"redis-deleter", service.Config[service.DeleterSettings[redisstore.Settings]]{}},
	{"dataset-deleter", service.Config[service.DeleterSettings[datasetstore.DeleterSettings]]{}},
	{"postgres-deleter", service.Config[service.DeleterSettings[postgresstore.Settings]]{}},
	{"s3prefix-deleter", service.Config[service.DeleterSettings[s3env.Settings]]{}},
	{"webhook-deleter", service.Config[service.DeleterSettings[webhookstore.Settings]]{}},
	{"audit-verifier", service.Config[service.DeleterSettings[struct{}]]{}},
	{"standalone", embedded.StandaloneConfig{}},
}

// Section is a group of settings: the declarations of its Owners (envconf.Var.Owner).
type Section struct {
	Title  string
	Owners []string
	Note   string
}

// Sections group every declaration of Services, in the order the docs list them.
var Sections = []Section{
	{"Every service process", []string{"config.Process", "config.Metrics"}, ""},
	{"Consumer groups", []string{"service.Consumers", "service.InFlight"}, "The intake handles the records of each partition one at a time."},
	{"Kafka", []string{"broker.Settings"}, "TLS and SASL (PLAIN, SCRAM-SHA-256/512) to the brokers; plaintext without them."},
	{"Schema Registry and framing", []string{"schemareg.Settings", "schemareg.FramingSettings"}, ""},
	{"Keys", []string{"subject.KeySettings", "envelope.KEKSettings", "envelope.KMSSettings", "integrity.MACSettings", "integrity.ChainSettings"},
		"Secrets are read from the variable or its file and never printed. The KEK, record MAC and chain keys rotate by id: set the new key with a new _ID and move the old one to the _OLD list (README, Configuration)."},
	{"Audit and data-key stores", []string{"config.Stores"}, "AWS credentials and region come from the AWS default credential chain."},
	{"Intake", []string{"intake.Config", "intake.PolicySettings"}, ""},
	{"Authentication", []string{"auth.Settings"},
		"The intake requires credentials or LETHE_AUTH_DISABLED=true; deleters use them to let operators only run discovery on request (POST /discovery); the standalone runs without them on loopback only."},
	{"Aggregator", []string{"aggregator.Config"}, ""},
	{"Deleters", []string{"service.DeleterConfig", "service.Batch", "discovery.Settings"}, ""},
	{"Qdrant", []string{"qdrantstore.Settings"}, ""},
	{"Redis", []string{"redisstore.Settings"}, ""},
	{"S3", []string{"s3env.Settings"}, "Credentials and region come from the AWS default credential chain; with an endpoint buckets are addressed path-style."},
	{"Datasets", []string{"datasetstore.Settings"}, ""},
	{"PostgreSQL", []string{"postgresstore.Settings"}, ""},
	{"Webhooks", []string{"webhookstore.Settings"}, ""},
	{"Standalone", []string{"embedded.Addrs"}, "Flags of the same names (-kafka, -registry, -qdrant, -redis, -s3, -http) win over the variables."},
}

// Vars are the variables of every service, each once, in the order of Sections.
func Vars() ([]envconf.Var, error) {
	byOwner := map[string][]envconf.Var{}
	seen := map[string]envconf.Var{}
	for _, s := range Services {
		for _, v := range envconf.Vars(s.Config) {
			if p, ok := seen[v.Name]; ok {
				if p.Default != v.Default || p.Doc != v.Doc || p.Type != v.Type || p.Secret != v.Secret || p.Owner != v.Owner {
					return nil, fmt.Errorf("catalog: %s is declared by %s and %s differently", v.Name, p.Owner, v.Owner)
				}
				continue
			}
			seen[v.Name] = v
			byOwner[v.Owner] = append(byOwner[v.Owner], v)
		}
	}
	var out []envconf.Var
	for _, sec := range Sections {
		for _, o := range sec.Owners {
			out = append(out, byOwner[o]...)
			delete(byOwner, o)
		}
	}
	for o := range byOwner {
		return nil, fmt.Errorf("catalog: no section lists the settings of %s", o)
	}
	return out, nil
}

// Reads reports whether the service named reads the variable.
func Reads(svc Service, name string) bool {
	return slices.ContainsFunc(envconf.Vars(svc.Config), func(v envconf.Var) bool { return v.Name == name })
}

// Markdown writes docs/configuration.md: which service reads which section, then each
// section's variables with their defaults and meanings.
func Markdown(w io.Writer) error {
	vars, err := Vars()
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(`# Configuration

<!-- Generated from the declared settings by make docs (go generate ./catalog in pkg); edit the doc tags, not this file. -->

Every Lethe service reads its configuration from ` + "`LETHE_`" + ` environment variables, declared once
in the package that owns them and loaded in one place (package ` + "`envconf`" + `). An unset or empty
variable takes its default. A value that does not parse, or is out of range, stops the service
at start with an error naming the variable. Each service logs its whole configuration at start,
secrets masked, and ` + "`<service> --print-config`" + ` prints it (one ` + "`NAME=value`" + ` line per variable) and exits.

The standalone runs the intake, the aggregator and the qdrant, redis and dataset deleters and
the audit verifier in one process, built by the same constructors with the same settings, on
embedded components: it reads the settings below marked in its column, and the components it
embeds replace the others (Kafka, the Schema Registry's URL, the audit and data-key stores, the
stores' clients and the metrics address, which it serves on the intake's address).

## Which service reads what

`)
	b.WriteString("| section |")
	for _, s := range Services {
		fmt.Fprintf(&b, " %s |", s.Name)
	}
	b.WriteString("\n|---|" + strings.Repeat("---|", len(Services)) + "\n")
	for _, sec := range Sections {
		fmt.Fprintf(&b, "| [%s](#%s) |", sec.Title, anchor(sec.Title))
		for _, s := range Services {
			n, of := 0, 0
			for _, v := range vars {
				if slices.Contains(sec.Owners, v.Owner) {
					of++
					if Reads(s, v.Name) {
						n++
					}
				}
			}
			switch {
			case n == of:
				b.WriteString(" ✓ |")
			case n > 0:
				fmt.Fprintf(&b, " %d of %d |", n, of)
			default:
				b.WriteString(" |")
			}
		}
		b.WriteString("\n")
	}
	for _, sec := range Sections {
		fmt.Fprintf(&b, "\n## %s\n\n", sec.Title)
		if sec.Note != "" {
			b.WriteString(sec.Note + "\n\n")
		}
		b.WriteString("| variable | default | type | meaning |\n|---|---|---|---|\n")
		for _, v := range vars {
			if !slices.Contains(sec.Owners, v.Owner) {
				continue
			}
			def, typ := "—", v.Type
			if v.Default != "" {
				def = "`" + v.Default + "`"
			}
			if v.Secret {
				typ += ", secret"
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", v.Name, def, typ, strings.ReplaceAll(v.Doc, "|", `\|`))
		}
	}
	_, err = io.WriteString(w, b.String())
	return err
}

// anchor is the fragment GitHub gives a heading.
func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		}
	}
	return b.String()
}
