package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/lethe-erasure/lethe/pkg/config"
	"github.com/lethe-erasure/lethe/pkg/envelope"
	"github.com/lethe-erasure/lethe/pkg/wal"
)

var keysRewrapCmd = &command{
	name:    "keys rewrap",
	args:    "[--dry-run] [--rate N] [--workers N]",
	summary: "re-wrap every live data key under the current KEK, so the old KEK can be dropped",
	help: `After a KEK rotation (the new key in LETHE_KEK with a new LETHE_KEK_ID, the old one moved
to LETHE_KEK_OLD), data keys wrapped by the old KEK still open, and only they keep it
needed. rewrap lists every live (not shredded) data key of the key store and re-wraps it
under the current KEK: the data key itself, and so every sealed payload, is unchanged. A
key shredded meanwhile stays shredded. It is idempotent: a key wrapped by the current KEK
already is counted and left alone, so an interrupted or partly failed run is finished by
running it again.

It reads the settings the services use: LETHE_KEK or LETHE_KEK_FILE, LETHE_KEK_ID,
LETHE_KEK_OLD, and the key store, LETHE_KEYS_TABLE (DynamoDB; endpoint
LETHE_DYNAMODB_ENDPOINT, AWS credentials from the default chain) or else LETHE_KEYS_DIR
(the directory store of standalone, which must not be running: one process at a time).

Progress goes to stderr; the counts (rewrapped, already current, shredded meanwhile,
failed by reason) to stdout. Afterwards it reads every live key again and says how many
are still wrapped by a KEK other than the current one: when none are, LETHE_KEK_OLD can
be dropped. Keep every service on the new LETHE_KEK before that, or they keep wrapping
new keys under the old one. --dry-run only counts the live keys by the KEK that wraps
them. Neither prints an id or a key.`,
	example: `LETHE_KEK=$NEW LETHE_KEK_ID=kek2 LETHE_KEK_OLD=kek1:$OLD LETHE_KEYS_TABLE=lethe-keys lethectl keys rewrap --dry-run
LETHE_KEK=$NEW LETHE_KEK_ID=kek2 LETHE_KEK_OLD=kek1:$OLD LETHE_KEYS_TABLE=lethe-keys lethectl keys rewrap --rate 200`,
	exits: "0 every live key is wrapped by the current KEK (--dry-run: counted); 1 error; 2 usage; 3 no key store in LETHE_KEYS_DIR; 4 a key failed, or keys are still wrapped by another KEK.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		var dryRun bool
		var perSecond float64
		var workers int
		fs.BoolVar(&dryRun, "dry-run", false, "count the live keys by the KEK that wraps them; change nothing")
		fs.Float64Var(&perSecond, "rate", 100, "at most this many keys per second (each costs a read and a write); 0 for no limit")
		fs.IntVar(&workers, "workers", 4, "keys handled at once")
		return func(ctx context.Context, args []string) error {
			if len(args) != 0 {
				return usageErrorf("keys rewrap takes no arguments, got %d", len(args))
			}
			if perSecond < 0 || workers < 1 {
				return usageErrorf("--rate must be 0 or more and --workers at least 1")
			}
			opt := envelope.BulkOptions{Workers: workers}
			if perSecond > 0 {
				opt.Limiter = rate.NewLimiter(rate.Limit(perSecond), 1)
			}
			return c.keysRewrap(ctx, dryRun, opt)
		}
	},
}

// rewrapReport is the outcome of keys rewrap, as JSON.
type rewrapReport struct {
	Store      string                 `json:"store"`
	CurrentKEK string                 `json:"current_kek"`
	Ring       []string               `json:"ring"`
	DryRun     bool                   `json:"dry_run"`
	Rewrap     *envelope.RewrapCounts `json:"rewrap,omitempty"`
	Census     envelope.Census        `json:"census"`
	// OtherKEK is how many live keys are wrapped by a KEK other than CurrentKEK.
	OtherKEK int `json:"other_kek"`
	// OldKEKDroppable says that every live key was read and is wrapped by CurrentKEK.
	OldKEKDroppable bool `json:"old_kek_droppable"`
}

// progressEvery is how often keys rewrap reports progress on stderr.
var progressEvery = 2 * time.Second

func (c *cli) keysRewrap(ctx context.Context, dryRun bool, opt envelope.BulkOptions) error {
	cfg, err := config.KeysFromEnv("lethectl")
	if err != nil {
		return err
	}
	store := "dynamodb:" + cfg.KeysTable
	if cfg.KeysTable == "" {
		store = "dir:" + cfg.KeysDir
		if logs, _ := filepath.Glob(filepath.Join(cfg.KeysDir, "wal-*.log")); len(logs) == 0 {
			return withCode(exitNotFound, fmt.Errorf("%s holds no key store (no wal-*.log); set LETHE_KEYS_DIR or LETHE_KEYS_TABLE", cfg.KeysDir))
		}
	}
	sealer, err := cfg.Sealer(ctx)
	if errors.Is(err, wal.ErrInUse) {
		return fmt.Errorf("%w: a running process has %s open; stop it first (the directory key store serves one process)", err, cfg.KeysDir)
	}
	if err != nil {
		return err
	}
	defer cfg.Close()
	rep := rewrapReport{Store: store, CurrentKEK: sealer.KEK.CurrentID(), Ring: sealer.KEK.IDs(), DryRun: dryRun}
	fmt.Fprintf(c.stderr, "key store %s; current KEK %s; key ring %s\n", rep.Store, rep.CurrentKEK, strings.Join(rep.Ring, ", "))

	if !dryRun {
		p := newProgress(c.stderr, "rewrap")
		opt.Rewrapping = func(n envelope.RewrapCounts) {
			p.maybe(func() string {
				return fmt.Sprintf("%d rewrapped, %d already current, %d shredded meanwhile, %d failed",
					n.Rewrapped, n.AlreadyCurrent, n.Shredded, n.Failed)
			})
		}
		counts, err := sealer.RewrapAll(ctx, opt)
		rep.Rewrap = &counts
		if err != nil {
			_ = c.printRewrap(rep) // the counts so far; the error below is what matters
			return fmt.Errorf("stopped: %w; run it again to finish (it skips what is done)", err)
		}
		opt.Rewrapping = nil
	}
	p := newProgress(c.stderr, "count")
	opt.Counting = func(n envelope.Census) {
		p.maybe(func() string { return fmt.Sprintf("%d keys read", total(n)) })
	}
	if rep.Census, err = sealer.Census(ctx, opt); err != nil {
		_ = c.printRewrap(rep) // the counts so far; the error below is what matters
		return fmt.Errorf("counting the keys stopped: %w", err)
	}
	rep.OtherKEK = rep.Census.Other(rep.CurrentKEK)
	rep.OldKEKDroppable = rep.OtherKEK == 0 && rep.Census.Unreadable == 0
	if err := c.printRewrap(rep); err != nil {
		return err
	}
	switch {
	case dryRun:
		return nil
	case rep.Rewrap.Failed > 0:
		return withCode(exitProblem, fmt.Errorf("%d keys failed", rep.Rewrap.Failed))
	case !rep.OldKEKDroppable:
		return withCode(exitProblem, errors.New("keys are still wrapped by another KEK, or unreadable: keep LETHE_KEK_OLD"))
	}
	return nil
}

func (c *cli) printRewrap(rep rewrapReport) error {
	if c.json("table") {
		return printJSON(c.stdout, rep)
	}
	w := table(c.stdout)
	if r := rep.Rewrap; r != nil {
		fmt.Fprintf(w, "rewrapped\t%d\n", r.Rewrapped)
		fmt.Fprintf(w, "already current\t%d\n", r.AlreadyCurrent)
		fmt.Fprintf(w, "shredded meanwhile\t%d\n", r.Shredded)
		fmt.Fprintf(w, "failed\t%d%s\n", r.Failed, byReason(r.FailedBy))
		if r.FirstError != "" {
			fmt.Fprintf(w, "first store error\t%s\n", r.FirstError)
		}
	}
	if rep.Census.ByKEK != nil {
		for _, kid := range slices.Sorted(maps.Keys(rep.Census.ByKEK)) {
			note := ""
			switch {
			case kid == rep.CurrentKEK:
				note = " (current)"
			case !slices.Contains(rep.Ring, kid):
				note = " (not in the key ring: these keys cannot be opened)"
			}
			fmt.Fprintf(w, "live keys wrapped by %s\t%d%s\n", kid, rep.Census.ByKEK[kid], note)
		}
		if rep.Census.Unreadable > 0 {
			fmt.Fprintf(w, "live keys unreadable\t%d%s\n", rep.Census.Unreadable, byReason(rep.Census.UnreadableBy))
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	switch {
	case rep.Census.ByKEK == nil:
	case rep.OldKEKDroppable:
		fmt.Fprintf(c.stdout, "Every live key is wrapped by %s: no other KEK is needed (drop LETHE_KEK_OLD once every service runs with LETHE_KEK_ID=%s).\n", rep.CurrentKEK, rep.CurrentKEK)
	case rep.DryRun:
		fmt.Fprintf(c.stdout, "%d live keys are wrapped by a KEK other than %s: run 'lethectl keys rewrap' before dropping LETHE_KEK_OLD.\n", rep.OtherKEK, rep.CurrentKEK)
	default:
		fmt.Fprintf(c.stdout, "%d live keys are still wrapped by a KEK other than %s (%d unreadable): keep LETHE_KEK_OLD, put every service on the new KEK and run it again.\n", rep.OtherKEK, rep.CurrentKEK, rep.Census.Unreadable)
	}
	return nil
}

// byReason is " (reason n, …)" for a non-empty count by reason.
func byReason(m map[string]int) string {
	if len(m) == 0 {
		return ""
	}
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", r, m[r]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func total(c envelope.Census) int {
	n := c.Shredded + c.Unreadable
	for _, k := range c.ByKEK {
		n += k
	}
	return n
}

// progress prints a line at most every progressEvery.
type progress struct {
	w    io.Writer
	what string
	last time.Time
}

func newProgress(w io.Writer, what string) *progress {
	return &progress{w: w, what: what, last: time.Now()}
}

// maybe prints line() when progressEvery has passed since the last line.
func (p *progress) maybe(line func() string) {
	if now := time.Now(); now.Sub(p.last) >= progressEvery {
		p.last = now
		fmt.Fprintf(p.w, "%s: %s\n", p.what, line())
	}
}
