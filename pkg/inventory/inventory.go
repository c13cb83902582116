// Package inventory loads the written inventory of every store that holds personal data.
//
// The inventory is configuration: a YAML document with a version and one entry per store,
// naming its kind (which deleter serves it: any name, this package knows none), its
// locators (a mapping only the package serving the kind reads, with Locators.Decode; its
// templates use the placeholders {tenant}, {subject}, {subject_hash} and {session}) and
// notes on physical erasure. Its version travels in every request and receipt.
package inventory

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Placeholders usable in templates; which of them a template of a kind may use is the
// kind's to check (CheckTemplate).
const (
	Tenant      = "{tenant}"
	Subject     = "{subject}"
	SubjectHash = "{subject_hash}"
	Session     = "{session}"
)

// Inventory is the list of stores that must report for every request.
type Inventory struct {
	Version string  `yaml:"version" json:"version"`
	Stores  []Entry `yaml:"stores" json:"stores"`
}

// Entry is one inventory entry. Name and Kind are all the runtime reads: Kind names the
// deleter that serves the store, and only the package serving that kind reads Locators.
type Entry struct {
	Name     string   `yaml:"name" json:"name"`
	Kind     string   `yaml:"kind" json:"kind"`
	Locators Locators `yaml:"locators,omitempty" json:"locators,omitempty"`
	// Physical says what an erasure leaves physically pending (vacuum, versions, AOF).
	Physical string `yaml:"physical,omitempty" json:"physical,omitempty"`
	// PhysicalWithin is how long after a logical delete the store's bytes can survive
	// (segments until vacuum, AOF/RDB, object versions, the store's backups), e.g. 840h;
	// receipts carry completed_at + this as the store's physical_erasure_due. Zero: unstated.
	PhysicalWithin time.Duration `yaml:"physical_within,omitempty" json:"physical_within,omitempty"`
}

//go:embed reference.yaml
var reference []byte

// Reference is the reference inventory of five stores (deploy/inventory.yaml).
func Reference() *Inventory {
	inv, err := Parse(reference)
	if err != nil {
		panic(err)
	}
	return inv
}

// Load reads and validates an inventory file.
func Load(path string) (*Inventory, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	return Parse(b)
}

// Parse decodes and validates an inventory document. Unknown fields are errors.
func Parse(b []byte) (*Inventory, error) {
	var inv Inventory
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&inv); err != nil {
		return nil, fmt.Errorf("inventory: %w", err)
	}
	if err := inv.Validate(); err != nil {
		return nil, err
	}
	return &inv, nil
}

var nameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

// Validate checks what is common to every store: the inventory has a version and stores,
// store names are unique and match ^[a-z][a-z0-9_-]{0,62}$, and every store names a kind.
// Any kind is accepted, and locators are not read: each kind's deleter validates the
// locators of its own stores when it starts (deletion.Validator).
func (inv *Inventory) Validate() error {
	var errs []error
	if inv.Version == "" {
		errs = append(errs, errors.New("version is empty"))
	}
	if len(inv.Stores) == 0 {
		errs = append(errs, errors.New("no stores"))
	}
	seen := map[string]bool{}
	for i, s := range inv.Stores {
		where := fmt.Sprintf("stores[%d] %q", i, s.Name)
		if !nameRE.MatchString(s.Name) {
			errs = append(errs, fmt.Errorf("%s: name must match %s", where, nameRE))
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("%s: duplicate name", where))
		}
		seen[s.Name] = true
		if strings.TrimSpace(s.Kind) == "" {
			errs = append(errs, fmt.Errorf("%s: kind is empty", where))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	return nil
}

// Names returns the store names in inventory order.
func (inv *Inventory) Names() []string {
	out := make([]string, len(inv.Stores))
	for i, s := range inv.Stores {
		out[i] = s.Name
	}
	return out
}

// Entry returns the store named name.
func (inv *Inventory) Entry(name string) (Entry, bool) {
	for _, s := range inv.Stores {
		if s.Name == name {
			return s, true
		}
	}
	return Entry{}, false
}

// OfKinds returns the stores whose kind is one of kinds.
func (inv *Inventory) OfKinds(kinds ...string) []Entry {
	var out []Entry
	for _, s := range inv.Stores {
		if contains(kinds, s.Kind) {
			out = append(out, s)
		}
	}
	return out
}

// Vars are the values substituted into a template.
type Vars struct {
	Tenant, Subject, SubjectHash, Session string
}

// Expand substitutes v into tmpl, passing every value through escape first (identity when
// escape is nil). Escaping is the caller's: a Redis pattern escapes glob metacharacters, a
// path or a collection name needs none because tenants are validated.
func Expand(tmpl string, v Vars, escape func(string) string) string {
	if escape == nil {
		escape = func(s string) string { return s }
	}
	return placeholderRE.ReplaceAllStringFunc(tmpl, func(p string) string {
		switch p {
		case Tenant:
			return escape(v.Tenant)
		case Subject:
			return escape(v.Subject)
		case SubjectHash:
			return escape(v.SubjectHash)
		case Session:
			return escape(v.Session)
		}
		return p
	})
}

// Uses reports whether tmpl contains placeholder p.
func Uses(tmpl, p string) bool { return strings.Contains(tmpl, p) }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
