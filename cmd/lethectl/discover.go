package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/lethe-erasure/lethe/pkg/apiclient"
	"github.com/lethe-erasure/lethe/pkg/discovery"
)

var inventoryDiscoverCmd = &command{
	name:    "inventory discover",
	args:    "--deleter URL [--deleter URL ...]",
	summary: "list backend locations with subject-shaped data that no inventory store covers",
	help: `Asks each deleter for its inventory discovery report and prints every location of its
backend that holds subject-shaped data (identity-like fields or values of personal-data
patterns) but that no inventory store covers: erasures never look there. Each deleter whose
kind can discover serves the report on its metrics address (GET /discovery: its last
scheduled run; POST /discovery: a run now, the default here). lethectl reads only these
reports, whatever the kinds: it links no store client and needs no backend credentials.

Deleters are given by --deleter (repeatable) or LETHE_DELETERS (comma-separated), as base
URLs such as http://redis-deleter:9090. Reports name locations as shapes ({tenant}, {id}
in place of names and identifiers), reasons and counts, never a value.`,
	example: `lethectl inventory discover --deleter http://redis-deleter:9090 --deleter http://dataset-deleter:9090
LETHE_DELETERS=http://10.0.0.5:9090 lethectl inventory discover --cached -o json | jq '.reports[].uncovered[]'`,
	exits: "0 nothing uncovered; 1 a deleter unreachable, or a run failed; 2 usage; 4 uncovered locations found (for a deploy pipeline).",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		var deleters stringList
		fs.Var(&deleters, "deleter", "base URL of a deleter's metrics address (repeatable; default $LETHE_DELETERS)")
		cached := fs.Bool("cached", false, "print each deleter's last scheduled run instead of running discovery now")
		return func(ctx context.Context, args []string) error {
			if len(args) != 0 {
				return usageErrorf("no arguments expected, got %d", len(args))
			}
			urls, err := c.deleterURLs(deleters)
			if err != nil {
				return err
			}
			return c.discover(ctx, urls, *cached)
		}
	},
}

var inventorySuggestCmd = &command{
	name:    "inventory suggest",
	args:    "--deleter URL [--deleter URL ...]",
	summary: "print the inventory entries that would cover what discovery found outside the inventory",
	help: `Asks each deleter for its last discovery report (as inventory discover --cached) and prints,
as entries of the inventory file's stores list, the entry each deleter suggests for the
locations it found outside the inventory: a new store, or an existing one with the missing
field added. Review them, add them to the inventory, restart the services with it, and
re-drive the INCOMPLETE requests for the new stores (lethectl retry ID --store NAME).
Locations its kind cannot cover with an entry are listed as comments.`,
	example: `lethectl inventory suggest --deleter http://redis-deleter:9090 >> suggested.yaml`,
	exits:   "0 nothing to suggest; 1 a deleter unreachable; 2 usage; 4 entries printed.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		var deleters stringList
		fs.Var(&deleters, "deleter", "base URL of a deleter's metrics address (repeatable; default $LETHE_DELETERS)")
		return func(ctx context.Context, args []string) error {
			if len(args) != 0 {
				return usageErrorf("no arguments expected, got %d", len(args))
			}
			urls, err := c.deleterURLs(deleters)
			if err != nil {
				return err
			}
			return c.suggest(ctx, urls)
		}
	},
}

// deleterURLs is flags, or else LETHE_DELETERS split at commas.
func (c *cli) deleterURLs(flags []string) ([]string, error) {
	urls := flags
	if len(urls) == 0 {
		for _, u := range strings.Split(c.getenv("LETHE_DELETERS"), ",") {
			if u = strings.TrimSpace(u); u != "" {
				urls = append(urls, u)
			}
		}
	}
	if len(urls) == 0 {
		return nil, usageErrorf("name the deleters with --deleter or LETHE_DELETERS")
	}
	return urls, nil
}

// suggest prints the entries the deleters at urls suggest, each once.
func (c *cli) suggest(ctx context.Context, urls []string) error {
	hc := &http.Client{Timeout: time.Minute}
	seen := map[string]bool{}
	printed := 0
	for _, base := range urls {
		reports, err := fetchDiscovery(ctx, hc, base, c.env(c.g.token, "LETHE_TOKEN", ""), true)
		if err != nil {
			return err
		}
		for _, r := range reports {
			for _, u := range r.Uncovered {
				fmt.Fprintf(c.stdout, "# %s %s: %d items: %s\n", u.Kind, u.Location, u.Count, u.Reason)
				if u.Suggest == "" {
					fmt.Fprintln(c.stdout, "#   no entry of this kind can cover it")
					continue
				}
				if seen[u.Suggest] {
					fmt.Fprintln(c.stdout, "#   covered by the entry above")
					continue
				}
				seen[u.Suggest] = true
				printed++
				fmt.Fprintln(c.stdout, indentEntry(u.Suggest))
			}
		}
	}
	if printed > 0 {
		return withCode(exitProblem, fmt.Errorf("%d inventory entries suggested", printed))
	}
	return nil
}

// indentEntry writes the YAML mapping y as an item of the inventory's stores list.
func indentEntry(y string) string {
	lines := strings.Split(strings.TrimRight(y, "\n"), "\n")
	for i, l := range lines {
		if i == 0 {
			lines[i] = "  - " + l
		} else {
			lines[i] = "    " + l
		}
	}
	return strings.Join(lines, "\n")
}

// discoverResult is the JSON output of inventory discover.
type discoverResult struct {
	Reports   []deleterReport `json:"reports"`
	Uncovered int             `json:"uncovered"`
}

type deleterReport struct {
	Deleter string `json:"deleter"`
	discovery.Report
}

func (c *cli) discover(ctx context.Context, urls []string, cached bool) error {
	hc := &http.Client{Timeout: 5 * time.Minute}
	var res discoverResult
	var errs []error
	for _, base := range urls {
		reports, err := fetchDiscovery(ctx, hc, base, c.env(c.g.token, "LETHE_TOKEN", ""), cached)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, r := range reports {
			res.Reports = append(res.Reports, deleterReport{Deleter: base, Report: r})
			res.Uncovered += len(r.Uncovered)
			if r.Error != "" {
				errs = append(errs, fmt.Errorf("%s: discovery of kind %s failed: %s", base, r.Kind, r.Error))
			}
		}
	}
	if res.Reports == nil {
		res.Reports = []deleterReport{}
	}
	if c.json("table") {
		if err := printJSON(c.stdout, res); err != nil {
			return err
		}
	} else {
		printDiscovery(c.stdout, res)
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if res.Uncovered > 0 {
		return withCode(exitProblem, fmt.Errorf("%d locations hold subject-shaped data outside the inventory", res.Uncovered))
	}
	return nil
}

func printDiscovery(w io.Writer, res discoverResult) {
	tw := table(w)
	fmt.Fprintln(tw, "DELETER\tKIND\tLAST RUN\tUNCOVERED")
	for _, r := range res.Reports {
		run := "never"
		if r.RunAt != nil {
			run = r.RunAt.UTC().Format(time.RFC3339)
		}
		if r.Error != "" {
			run += " (last run failed)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\n", r.Deleter, r.Kind, run, len(r.Uncovered))
	}
	tw.Flush()
	if res.Uncovered == 0 {
		fmt.Fprintln(w, "\nno location outside the inventory")
		return
	}
	fmt.Fprintln(w)
	tw = table(w)
	fmt.Fprintln(tw, "KIND\tLOCATION\tITEMS\tREASON")
	for _, r := range res.Reports {
		for _, u := range r.Uncovered {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", u.Kind, u.Location, u.Count, u.Reason)
		}
	}
	tw.Flush()
}

// fetchDiscovery asks the deleter at base for its reports: a run now (POST) or, when
// cached, its last run (GET); token, when set, is an operator's bearer token.
func fetchDiscovery(ctx context.Context, hc *http.Client, base, token string, cached bool) ([]discovery.Report, error) {
	u, err := url.Parse(strings.TrimRight(base, "/") + "/discovery")
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, usageErrorf("--deleter %q is not an http:// or https:// URL", base)
	}
	method := http.MethodPost
	if cached {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("deleter %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		return nil, fmt.Errorf("deleter %s serves no discovery (its kind cannot discover, or it is no deleter)", base)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("deleter %s: %s %s: %d", base, method, u.Path, resp.StatusCode)
	}
	var out discovery.Response
	if err := json.NewDecoder(io.LimitReader(resp.Body, apiclient.MaxAnswerBytes)).Decode(&out); err != nil {
		return nil, fmt.Errorf("deleter %s: undecodable discovery report: %w", base, err)
	}
	return out.Reports, nil
}
