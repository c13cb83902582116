package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"strings"

	"github.com/lethe-erasure/lethe/pkg/inventory"
)

var inventoryValidateCmd = &command{
	name:    "inventory validate",
	args:    "FILE",
	summary: "check an inventory file; list its stores or every error",
	help: `Loads an inventory file as every service does and reports every problem common to all
kinds: unknown top-level fields, a missing version or stores, duplicate or malformed store
names, a store without a kind. Any kind is accepted, and locators are not read here: each
kind's deleter checks the locators of its stores when it starts and refuses to start,
naming the store and field, when one is invalid. A valid file prints its version and each
store with its kind; an invalid one prints each error and exits 4.`,
	example: `lethectl inventory validate deploy/inventory.yaml
lethectl inventory validate new-inventory.yaml -o json | jq -r '.errors[]'`,
	exits: "0 valid; 1 error reading the file; 2 usage; 3 no such file; 4 invalid.",
	setup: func(c *cli, fs *flag.FlagSet) func(context.Context, []string) error {
		return func(ctx context.Context, args []string) error {
			if len(args) != 1 {
				return usageErrorf("one inventory file expected, got %d arguments", len(args))
			}
			return c.validateInventory(args[0])
		}
	},
}

// inventoryResult is the JSON output of inventory validate.
type inventoryResult struct {
	File    string           `json:"file"`
	Valid   bool             `json:"valid"`
	Version string           `json:"version,omitempty"`
	Stores  []inventoryStore `json:"stores,omitempty"`
	Errors  []string         `json:"errors,omitempty"`
	Note    string           `json:"note,omitempty"`
}

// locatorsNote says what validate did not check.
const locatorsNote = "locators are checked by each kind's deleter at start"

type inventoryStore struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
}

func (c *cli) validateInventory(file string) error {
	inv, err := inventory.Load(file)
	if errors.Is(err, fs.ErrNotExist) {
		return withCode(exitNotFound, err)
	}
	var pathErr *fs.PathError
	if errors.As(err, &pathErr) {
		return err
	}
	res := inventoryResult{File: file, Valid: err == nil, Note: locatorsNote}
	if err != nil {
		res.Errors = inventoryErrors(err)
	} else {
		res.Version = inv.Version
		for _, s := range inv.Stores {
			res.Stores = append(res.Stores, inventoryStore{Name: s.Name, Kind: s.Kind})
		}
	}
	if c.json("table") {
		if err := printJSON(c.stdout, res); err != nil {
			return err
		}
	} else if res.Valid {
		fmt.Fprintf(c.stdout, "%s: valid, version %s, %d stores\n", file, res.Version, len(res.Stores))
		tw := table(c.stdout)
		fmt.Fprintln(tw, "STORE\tKIND")
		for _, s := range res.Stores {
			fmt.Fprintf(tw, "%s\t%s\n", s.Name, s.Kind)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "(%s)\n", locatorsNote)
	} else {
		fmt.Fprintf(c.stdout, "%s: invalid, %d errors:\n", file, len(res.Errors))
		for _, e := range res.Errors {
			fmt.Fprintf(c.stdout, "  - %s\n", e)
		}
	}
	if !res.Valid {
		return withCode(exitProblem, fmt.Errorf("%s is not a valid inventory", file))
	}
	return nil
}

// inventoryErrors lists the errors inside an inventory.Load error, one per problem,
// without the "inventory: " prefix.
func inventoryErrors(err error) []string {
	inner := errors.Unwrap(err)
	if inner == nil {
		inner = err
	}
	var out []string
	if joined, ok := inner.(interface{ Unwrap() []error }); ok {
		for _, e := range joined.Unwrap() {
			out = append(out, e.Error())
		}
		return out
	}
	for _, line := range strings.Split(strings.TrimPrefix(err.Error(), "inventory: "), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}
