// Package inventory loads the written inventory of every store that holds personal data.
//
// The inventory is configuration: a YAML document with a version and one entry per store,
// naming its kind (which deleter serves it), its locators (templates with the placeholders
// {tenant}, {subject}, {subject_hash} and {session}) and notes on physical erasure. Its
// version travels in every request and receipt.
package inventory

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/lethe-erasure/lethe/pkg/qdrantstore/qdrantkey"
)

// Store kinds served by Lethe's deleters.
const (
	KindQdrant   = "qdrant"
	KindRedis    = "redis"
	KindDataset  = "dataset"
	KindAuditLog = "audit_log"
)

// Kinds lists every kind some deleter serves.
var Kinds = []string{KindQdrant, KindRedis, KindDataset, KindAuditLog}

// Placeholders usable in templates.
const (
	Tenant      = "{tenant}"
	Subject     = "{subject}"
	SubjectHash = "{subject_hash}"
	Session     = "{session}"
)

// Inventory is the list of stores that must report for every request.
type Inventory struct {
	Version string  `yaml:"version" json:"version"`
	Stores  []Store `yaml:"stores" json:"stores"`
}

// Store is one inventory entry.
type Store struct {
	Name     string   `yaml:"name" json:"name"`
	Kind     string   `yaml:"kind" json:"kind"`
	Locators Locators `yaml:"locators" json:"locators"`
	// Physical says what an erasure leaves physically pending (vacuum, versions, AOF).
	Physical string `yaml:"physical" json:"physical,omitempty"`
	// PhysicalWithin is how long after a logical delete the store's bytes can survive
	// (segments until vacuum, AOF/RDB, object versions, the store's backups), e.g. 840h;
	// receipts carry completed_at + this as the store's physical_erasure_due. Zero: unstated.
	PhysicalWithin time.Duration `yaml:"physical_within,omitempty" json:"physical_within,omitempty"`
}

// Locators say where the subject lives in a store. Each kind uses its own fields.
type Locators struct {
	// qdrant: collection templates; payload fields holding the subject id, its keyed hash,
	// or (legacy chunks) a session id.
	Collections   []string `yaml:"collections,omitempty" json:"collections,omitempty"`
	SubjectFields []string `yaml:"subject_fields,omitempty" json:"subject_fields,omitempty"`
	HashFields    []string `yaml:"hash_fields,omitempty" json:"hash_fields,omitempty"`
	SessionFields []string `yaml:"session_fields,omitempty" json:"session_fields,omitempty"`
	// redis: key templates whose last character may be a '*' wildcard; an optional
	// per-subject index set listing the subject's keys. With IndexOnly the app promises to
	// list every key in the index: erasure and verification then read the index alone and
	// cost the subject's footprint; without it every primary is also scanned for keys the
	// index does not list (legacy data).
	Keys      []string `yaml:"keys,omitempty" json:"keys,omitempty"`
	Index     string   `yaml:"index,omitempty" json:"index,omitempty"`
	IndexOnly bool     `yaml:"index_only,omitempty" json:"index_only,omitempty"`
	// dataset: object prefixes (s3://bucket/prefix/ or a directory path relative to the
	// dataset root), the columns holding the subject id or a session id (a dotted path such
	// as metadata.customer_id names a nested field), and glob patterns (path.Match, case
	// ignored) of objects under the prefixes that are no datasets: a pattern without a
	// slash matches an object's name, one with a slash its key below the prefix. Excluded
	// objects are never read and are listed in the verification.
	Prefixes       []string `yaml:"prefixes,omitempty" json:"prefixes,omitempty"`
	SubjectColumns []string `yaml:"subject_columns,omitempty" json:"subject_columns,omitempty"`
	SessionColumns []string `yaml:"session_columns,omitempty" json:"session_columns,omitempty"`
	Exclude        []string `yaml:"exclude,omitempty" json:"exclude,omitempty"`
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

var (
	nameRE        = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)
	placeholderRE = regexp.MustCompile(`\{[^{}]*\}`)
)

// Validate checks that the inventory has a version, that store names are unique, that every
// kind is served by a deleter, and that templates use only known placeholders.
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
		if !contains(Kinds, s.Kind) {
			errs = append(errs, fmt.Errorf("%s: kind %q is served by no deleter (known: %s)", where, s.Kind, strings.Join(Kinds, ", ")))
		}
		for _, tmpl := range s.Locators.templates() {
			for _, p := range placeholderRE.FindAllString(tmpl, -1) {
				if !contains([]string{Tenant, Subject, SubjectHash, Session}, p) {
					errs = append(errs, fmt.Errorf("%s: template %q uses unknown placeholder %s", where, tmpl, p))
				}
			}
		}
		if err := s.Locators.validateKind(s.Kind); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("inventory: %w", err)
	}
	return nil
}

func (l Locators) templates() []string {
	out := append(append(append([]string{}, l.Collections...), l.Keys...), l.Prefixes...)
	if l.Index != "" {
		out = append(out, l.Index)
	}
	return out
}

func (l Locators) validateKind(kind string) error {
	switch kind {
	case KindQdrant:
		if len(l.Collections) == 0 || len(l.SubjectFields)+len(l.HashFields)+len(l.SessionFields) == 0 {
			return errors.New("qdrant needs collections and at least one of subject_fields, hash_fields, session_fields")
		}
		for _, f := range append(append(append([]string{}, l.SubjectFields...), l.HashFields...), l.SessionFields...) {
			if err := qdrantkey.Check(f); err != nil {
				return err
			}
		}
	case KindRedis:
		if len(l.Keys) == 0 {
			return errors.New("redis needs keys")
		}
		if l.IndexOnly && l.Index == "" {
			return errors.New("redis index_only needs an index")
		}
		for _, k := range l.Keys {
			if !strings.Contains(k, Subject) && !strings.Contains(k, SubjectHash) && !strings.Contains(k, Session) {
				return fmt.Errorf("key template %q names no subject, hash or session: it would match other subjects", k)
			}
			if i := strings.IndexAny(k, "*?[\\"); i >= 0 && i != len(k)-1 {
				return fmt.Errorf("key template %q: only a trailing '*' wildcard is allowed", k)
			}
		}
	case KindDataset:
		if len(l.Prefixes) == 0 || len(l.SubjectColumns)+len(l.SessionColumns) == 0 {
			return errors.New("dataset needs prefixes and subject_columns or session_columns")
		}
		for _, p := range l.Exclude {
			if _, err := path.Match(p, ""); err != nil || p == "" {
				return fmt.Errorf("dataset exclude pattern %q is not a valid glob", p)
			}
		}
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

// Store returns the store named name.
func (inv *Inventory) Store(name string) (Store, bool) {
	for _, s := range inv.Stores {
		if s.Name == name {
			return s, true
		}
	}
	return Store{}, false
}

// OfKinds returns the stores whose kind is one of kinds.
func (inv *Inventory) OfKinds(kinds ...string) []Store {
	var out []Store
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
