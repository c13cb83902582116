package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/lethe-erasure/lethe/pkg/version"
)

var versionCmd = &command{
	name:    "version",
	summary: "print lethectl's version and commit",
	help: `Prints the release lethectl was built as, the commit and the Go version. Every Lethe
service prints its own with --version and serves it as the lethe_build_info metric.`,
	example: "lethectl version\nlethectl version -o json",
	exits:   "0 printed; 2 usage.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		return func(_ context.Context, args []string) error {
			if len(args) > 0 {
				return usageErrorf("unexpected argument %q", args[0])
			}
			if c.json("text") {
				return printJSON(c.stdout, version.Get())
			}
			_, err := fmt.Fprintln(c.stdout, version.Get())
			return err
		}
	},
}
