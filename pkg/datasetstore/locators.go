package datasetstore

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// Kind is the inventory kind this package serves.
const Kind = "dataset"

// Locators are the locators of an inventory store of kind "dataset": object prefixes
// (s3://bucket/prefix/ or a directory path relative to the dataset root; placeholders
// {tenant} and {subject_hash} only, so that no identifier reaches an object name; each
// holding "{tenant}/", so that each tenant's datasets lie under a prefix of their own), the
// columns holding the subject id or a session id (a dotted path such as
// metadata.customer_id names a nested field), and glob patterns (path.Match, case ignored)
// of objects under the prefixes that are no datasets: a pattern without a slash matches an
// object's name, one with a slash its key below the prefix. Excluded objects are never read
// and are listed in the verification. Mentions is what a mention of the subject's
// identifiers outside the named columns does after the erasure: MentionsFail (the
// default), MentionsRedact or MentionsErase.
type Locators struct {
	Prefixes       []string `yaml:"prefixes"`
	SubjectColumns []string `yaml:"subject_columns"`
	SessionColumns []string `yaml:"session_columns"`
	Exclude        []string `yaml:"exclude"`
	Mentions       string   `yaml:"mentions"`
}

var _ deletion.Validator = (*Store)(nil)

// Validate checks the locators of st (see the package function Validate).
func (s *Store) Validate(st inventory.Entry) error { return Validate(st) }

// Validate checks that st's locators are dataset locators: known fields only, at least one
// prefix, each using only {tenant} and {subject_hash} and holding {tenant} followed by
// "/", at least one subject or session column, and exclude patterns that are valid globs.
// It touches no backend.
func Validate(st inventory.Entry) error {
	_, err := LocatorsOf(st)
	return err
}

// LocatorsOf decodes and checks the locators of st; its errors are permanent.
func LocatorsOf(st inventory.Entry) (Locators, error) {
	return inventory.DecodeChecked(st, "dataset store", Locators.check)
}

func (l Locators) check() error {
	var errs []error
	if len(l.Prefixes) == 0 {
		errs = append(errs, errors.New("locators.prefixes is empty"))
	}
	for _, p := range l.Prefixes {
		if err := inventory.CheckTemplate(p, inventory.Tenant, inventory.SubjectHash); err != nil {
			errs = append(errs, fmt.Errorf("locators.prefixes: %w: identifiers must not reach object names", err))
		} else if err := tenantScoped(p); err != nil {
			errs = append(errs, fmt.Errorf("locators.prefixes: prefix %q: %w", p, err))
		}
	}
	if len(l.SubjectColumns)+len(l.SessionColumns) == 0 {
		errs = append(errs, errors.New("locators: needs subject_columns or session_columns"))
	}
	for _, p := range l.Exclude {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			errs = append(errs, fmt.Errorf("locators.exclude: pattern %q is not a valid glob", p))
		}
	}
	switch l.Mentions {
	case "", MentionsFail, MentionsRedact, MentionsErase:
	default:
		errs = append(errs, fmt.Errorf("locators.mentions: %q is none of %s, %s, %s", l.Mentions, MentionsFail, MentionsRedact, MentionsErase))
	}
	return errors.Join(errs...)
}

// tenantScoped reports an error unless every tenant's expansion of prefix p lies apart from
// every other tenant's: p names {tenant}, each time as a whole path part or at the end of
// one ("s3://b/{tenant}/", "s3://data-{tenant}/", "d/t-{tenant}/"), so that tenant "acme"
// never covers "acme-eu/". A prefix without {tenant} is shared: one tenant's erasure would
// rewrite another's datasets, and a tenant erasure would delete them. This kind has no
// tenant column to tell rows of tenants apart inside one dataset.
func tenantScoped(p string) error {
	if !inventory.Uses(p, inventory.Tenant) {
		return errors.New(`it names no {tenant}: tenants would share its datasets, and one tenant's erasure would rewrite or delete another's; put "{tenant}/" in the prefix`)
	}
	for rest := p; ; {
		_, after, ok := strings.Cut(rest, inventory.Tenant)
		if !ok {
			return nil
		}
		if !strings.HasPrefix(after, "/") {
			return errors.New(`{tenant} must be followed by "/", or tenant "acme" would also cover "acme-eu"`)
		}
		rest = after
	}
}
