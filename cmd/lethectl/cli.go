package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/lethe-erasure/lethe/pkg/apiclient"
	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/broker"
	"github.com/lethe-erasure/lethe/pkg/integrity"
)

// Exit codes, documented in the top-level help.
const (
	exitOK       = 0 // success
	exitError    = 1 // network error, server error, refused credentials
	exitUsage    = 2 // bad flags or arguments, or input the server refused as invalid (400)
	exitNotFound = 3 // no such request, receipt, file or topic
	exitProblem  = 4 // the erasure FAILED, or a check found problems
	exitTimeout  = 5 // timed out waiting
)

// codeError is an error that decides the exit code.
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string { return e.err.Error() }
func (e *codeError) Unwrap() error { return e.err }

// withCode marks err to end the command with code.
func withCode(code int, err error) error { return &codeError{code: code, err: err} }

// usageErrorf is a usage error (exit 2).
func usageErrorf(format string, args ...any) error {
	return withCode(exitUsage, fmt.Errorf(format, args...))
}

// exitCode maps err to the process exit code.
func exitCode(err error) int {
	var ce *codeError
	var ae *apiclient.APIError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ce):
		return ce.code
	case errors.As(err, &ae):
		return apiExitCode(ae)
	}
	return exitError
}

// cli is one invocation's environment. Tests build it directly to inject the audit store
// and the broker configuration of an embedded system.
type cli struct {
	getenv func(string) string
	stdin  io.Reader
	isTTY  func() bool // whether stdin is a terminal (confirmation prompts)
	stdout io.Writer
	stderr io.Writer

	audit   auditlog.Table // when set, used instead of opening --audit-dir or --audit-table
	brokers *broker.Config // when set, used instead of --brokers and the environment
	// mac and chainKey, when set, are used instead of LETHE_MAC_KEY and LETHE_CHAIN_KEY.
	mac, chainKey *integrity.Ring

	g globals
}

// run runs lethectl with args and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c := &cli{getenv: os.Getenv, stdin: os.Stdin, isTTY: stdinIsTerminal, stdout: stdout, stderr: stderr}
	return c.run(ctx, args)
}

func stdinIsTerminal() bool {
	fi, err := os.Stdin.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// command is one lethectl command.
type command struct {
	name    string // "submit", "dlq list"
	args    string // the synopsis after the name
	summary string
	help    string
	example string
	exits   string
	// setup registers the command's flags on fs and returns what runs it with the
	// positional arguments.
	setup func(c *cli, fs *flag.FlagSet) func(ctx context.Context, args []string) error
}

// commands lists every command, in help order.
var commands []*command

func init() {
	commands = []*command{submitCmd, statusCmd, listCmd, receiptCmd, retryCmd, reapplyCmd,
		dlqListCmd, dlqReplayCmd, auditReplayCmd, auditVerifyChainCmd, inventoryValidateCmd, inventoryDiscoverCmd, inventorySuggestCmd, topicsApplyCmd}
	commands = append(commands, suppressionCheckCmd, suppressionLiftCmd)
	commands = append(commands, confirmCmd, cancelCmd, approveCmd, rejectCmd, reviewCmd, holdCmd)
	groups["suppression"] = "the suppression list that ingestion checks"
	commands = append(commands, keysRewrapCmd, versionCmd)
	groups["keys"] = "the data-key store (KEK rotation)"
	commands = append(commands, tablesApplyCmd)
	groups["tables"] = "DynamoDB table provisioning"
}

// groups are the first words of two-word commands.
var groups = map[string]string{
	"dlq":       "dead-letter topics",
	"audit":     "audit trail checks",
	"inventory": "inventory files and discovery",
	"topics":    "Kafka topic provisioning",
}

func (c *cli) run(ctx context.Context, args []string) int {
	top := flag.NewFlagSet("lethectl", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	c.g.register(top)
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(c.stdout, topHelp())
			return exitOK
		}
		fmt.Fprintf(c.stderr, "lethectl: %v\nRun 'lethectl help' for usage.\n", err)
		return exitUsage
	}
	rest := top.Args()
	if len(rest) == 0 {
		fmt.Fprint(c.stderr, topHelp())
		return exitUsage
	}
	if rest[0] == "help" {
		return c.help(rest[1:])
	}
	cmd, n := lookup(rest)
	if cmd == nil {
		if _, ok := groups[rest[0]]; ok {
			if len(rest) > 1 && rest[1] != "-h" && rest[1] != "--help" && rest[1] != "-help" {
				fmt.Fprintf(c.stderr, "lethectl: unknown command %q\n", rest[0]+" "+rest[1])
			} else if len(rest) > 1 {
				fmt.Fprint(c.stdout, groupHelp(rest[0]))
				return exitOK
			}
			fmt.Fprint(c.stderr, groupHelp(rest[0]))
			return exitUsage
		}
		fmt.Fprintf(c.stderr, "lethectl: unknown command %q\nRun 'lethectl help' for the commands.\n", rest[0])
		return exitUsage
	}
	fs := flag.NewFlagSet("lethectl "+cmd.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	c.g.register(fs)
	runCmd := cmd.setup(c, fs)
	pos, err := parseInterspersed(fs, rest[n:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(c.stdout, commandHelp(cmd))
			return exitOK
		}
		fmt.Fprintf(c.stderr, "lethectl %s: %v\nRun 'lethectl %s --help' for usage.\n", cmd.name, err, cmd.name)
		return exitUsage
	}
	if err := c.g.check(); err != nil {
		fmt.Fprintf(c.stderr, "lethectl %s: %v\n", cmd.name, withHint(err))
		return exitUsage
	}
	err = runCmd(ctx, pos)
	code := exitCode(err)
	if err != nil {
		fmt.Fprintf(c.stderr, "lethectl %s: %v\n", cmd.name, withHint(err))
		if code == exitUsage {
			fmt.Fprintf(c.stderr, "Run 'lethectl %s --help' for usage.\n", cmd.name)
		}
	}
	return code
}

// lookup finds the command named by the first one or two words of args and returns it
// with the number of words its name took.
func lookup(args []string) (*command, int) {
	if len(args) > 1 {
		for _, cmd := range commands {
			if cmd.name == args[0]+" "+args[1] {
				return cmd, 2
			}
		}
	}
	for _, cmd := range commands {
		if cmd.name == args[0] && !strings.Contains(cmd.name, " ") {
			return cmd, 1
		}
	}
	return nil, 0
}

func (c *cli) help(args []string) int {
	if len(args) == 0 {
		fmt.Fprint(c.stdout, topHelp())
		return exitOK
	}
	if cmd, n := lookup(args); cmd != nil && n == len(args) {
		fmt.Fprint(c.stdout, commandHelp(cmd))
		return exitOK
	}
	if _, ok := groups[args[0]]; ok && len(args) == 1 {
		fmt.Fprint(c.stdout, groupHelp(args[0]))
		return exitOK
	}
	fmt.Fprintf(c.stderr, "lethectl help: unknown command %q\n", strings.Join(args, " "))
	return exitUsage
}

// parseInterspersed parses fs over args, allowing flags after positional arguments, and
// returns the positional arguments. Everything after "--" is positional.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		consumed := len(args) - fs.NArg()
		if consumed > 0 && args[consumed-1] == "--" {
			return append(pos, fs.Args()...), nil
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = append(*l, v)
	return nil
}
