// Command lethectl is the operator's command line for Lethe: it submits erasure requests
// and waits for their receipts, shows status, lists requests, re-drives failed stores,
// inspects and replays dead-letter topics, checks the audit table against the event topics
// and the receipt chains, validates inventory files, and provisions the topics. Run
// "lethectl help" for the commands and exit codes.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
