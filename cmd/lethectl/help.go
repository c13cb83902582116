package main

import (
	"flag"
	"fmt"
	"sort"
	"strings"
)

// defaultServer is the intake API of `make serve`.
const defaultServer = "http://127.0.0.1:8080"

// globals are the flags every command accepts, before or after its name. Empty values
// fall back to the environment.
type globals struct {
	server, token, brokers, auditDir, auditTable, output string
}

// globalFlags names the global flags, for help.
var globalFlags = map[string]bool{"server": true, "token": true, "brokers": true, "audit-dir": true, "audit-table": true, "output": true, "o": true}

// register adds the global flags to fs, keeping the values already parsed.
func (g *globals) register(fs *flag.FlagSet) {
	fs.StringVar(&g.server, "server", g.server, "intake API base URL (env LETHE_SERVER; default "+defaultServer+")")
	fs.StringVar(&g.token, "token", g.token, "bearer token for the intake API (env LETHE_TOKEN)")
	fs.StringVar(&g.brokers, "brokers", g.brokers, "Kafka seed brokers, comma separated (env LETHE_KAFKA_BROKERS; default 127.0.0.1:9092)")
	fs.StringVar(&g.auditDir, "audit-dir", g.auditDir, "directory audit store of a standalone deployment (env LETHE_AUDIT_DIR)")
	fs.StringVar(&g.auditTable, "audit-table", g.auditTable, "DynamoDB audit table (env LETHE_AUDIT_TABLE; endpoint LETHE_DYNAMODB_ENDPOINT)")
	fs.StringVar(&g.output, "output", g.output, "output format: table (for people) or json (for scripts)")
	fs.StringVar(&g.output, "o", g.output, "shorthand for --output")
}

// check validates the global flags.
func (g *globals) check() error {
	switch g.output {
	case "", "json", "table":
		return nil
	}
	return fmt.Errorf("--output must be json or table, not %q", g.output)
}

// env returns the flag value, else the environment variable, else def.
func (c *cli) env(flagValue, name, def string) string {
	if flagValue != "" {
		return flagValue
	}
	if v := c.getenv(name); v != "" {
		return v
	}
	return def
}

// json reports whether output is JSON; def is the command's default format.
func (c *cli) json(def string) bool {
	o := c.g.output
	if o == "" {
		o = def
	}
	return o == "json"
}

const exitCodesHelp = `Exit codes:
  0  success
  1  error: the server or broker could not be reached, a server error (5xx), or the
     server refused the credentials (401 unauthenticated: pass --token or set
     LETHE_TOKEN; 403 forbidden: the token may not act for the tenant)
  2  usage: bad flags or arguments, or input the server refused as invalid (400)
  3  not found: no such request, no receipt yet, no such file or topic
  4  the erasure FAILED (a store reported FAILED), or a check found problems (audit
     differences, a broken receipt chain, an invalid inventory)
  5  timed out waiting (--wait, --timeout)
`

func topHelp() string {
	var b strings.Builder
	b.WriteString(`lethectl operates Lethe: it submits right-to-erasure requests and waits for their
receipts, shows request status and SLA clocks, re-drives failed stores, inspects and
replays dead-letter topics, checks the audit table against the event topics, and
validates inventory files. Answers never contain raw identifiers: requests and receipts
name the subject by its keyed pseudonym only.

Usage:
  lethectl [global flags] <command> [flags] [arguments]

Commands:
`)
	for _, cmd := range commands {
		fmt.Fprintf(&b, "  %-20s %s\n", cmd.name, cmd.summary)
	}
	b.WriteString(`
Global flags (accepted before or after the command):
  --server URL       intake API base URL (env LETHE_SERVER; default ` + defaultServer + `)
  --token TOKEN      bearer token for the intake API (env LETHE_TOKEN)
  --brokers LIST     Kafka seed brokers for dlq, audit replay and topics (env LETHE_KAFKA_BROKERS;
                     TLS and SASL from LETHE_KAFKA_TLS*, LETHE_KAFKA_SASL_*)
  --audit-dir DIR    directory audit store for audit commands (env LETHE_AUDIT_DIR)
  --audit-table T    DynamoDB audit table for audit commands (env LETHE_AUDIT_TABLE;
                     endpoint LETHE_DYNAMODB_ENDPOINT; AWS credentials from the default chain)
  -o, --output FMT   table (default, for people) or json (for scripts)

`)
	b.WriteString(exitCodesHelp)
	b.WriteString(`
Run 'lethectl help <command>' or 'lethectl <command> --help' for a command's flags and examples.
`)
	return b.String()
}

func groupHelp(group string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "lethectl %s: %s\n\nCommands:\n", group, groups[group])
	for _, cmd := range commands {
		if strings.HasPrefix(cmd.name, group+" ") {
			fmt.Fprintf(&b, "  %-20s %s\n", cmd.name, cmd.summary)
		}
	}
	fmt.Fprintf(&b, "\nRun 'lethectl help %s <command>' for a command's flags and examples.\n", group)
	return b.String()
}

func commandHelp(cmd *command) string {
	var b strings.Builder
	fmt.Fprintf(&b, "lethectl %s: %s\n\nUsage:\n  lethectl %s %s\n\n%s\n", cmd.name, cmd.summary, cmd.name, cmd.args, strings.TrimSpace(cmd.help))
	fs := flag.NewFlagSet(cmd.name, flag.ContinueOnError)
	cmd.setup(&cli{}, fs)
	var own []*flag.Flag
	fs.VisitAll(func(f *flag.Flag) {
		if !globalFlags[f.Name] {
			own = append(own, f)
		}
	})
	if len(own) > 0 {
		sort.Slice(own, func(i, j int) bool { return own[i].Name < own[j].Name })
		b.WriteString("\nFlags:\n")
		for _, f := range own {
			kind, usage := flag.UnquoteUsage(f)
			if kind == "value" {
				kind = "string"
			}
			name := "--" + f.Name
			if kind != "" {
				name += " " + kind
			}
			fmt.Fprintf(&b, "  %-26s %s", name, usage)
			if f.DefValue != "" && f.DefValue != "false" && f.DefValue != "0" {
				fmt.Fprintf(&b, " (default %s)", f.DefValue)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("\nGlobal flags: --server, --token, --brokers, --audit-dir, --audit-table, -o/--output (see 'lethectl help').\n")
	if cmd.example != "" {
		fmt.Fprintf(&b, "\nExamples:\n%s\n", indent(strings.TrimSpace(cmd.example), "  "))
	}
	fmt.Fprintf(&b, "\nExit codes: %s\n", strings.TrimSpace(cmd.exits))
	return b.String()
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}
