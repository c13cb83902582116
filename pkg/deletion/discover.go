package deletion

import (
	"context"
	"strings"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/pii"
)

// DiscoverOptions bound and steer a discovery run: Fields are the identity-like field,
// column and key-segment names (DefaultFields when empty), Sample bounds the items read per
// location (keys scanned, rows read), and Tenants are the known tenants, so that a location
// named after one can be matched against the inventory's {tenant} templates.
type DiscoverOptions struct {
	Fields  []string
	Sample  int
	Tenants []string
}

// Uncovered is one location of a backend that holds subject-shaped data but that no
// inventory store covers: its kind, the location (a key family, an object, a table, with
// identifiers replaced by placeholders), why it looks like personal data (field names or
// the kinds of pattern found, never a value) and how many items were seen there. Fields
// are the field names, key paths or columns found holding identity-like names or values
// (never a value); a probe (Prober) matches the subject there. Suggest is the inventory
// entry, in the inventory's YAML, that would cover the location (a new entry, or an
// existing one with the missing field added); empty when the kind cannot express one.
type Uncovered struct {
	Kind, Location, Reason string
	Count                  int64
	Fields                 []string
	Suggest                string
}

// Discoverer is an optional capability of a Store, found by type assertion like Validator:
// it enumerates the backend the store's kind reaches and reports the locations that hold
// subject-shaped data but that no inventory store of inv covers. Reports hold locations,
// reasons and counts, never a value read. Discover reads a bounded sample (opts.Sample per
// location), deletes nothing, honours ctx and is safe for concurrent use; errors are
// transient unless marked permanent.
type Discoverer interface {
	Discover(ctx context.Context, inv *inventory.Inventory, opts DiscoverOptions) ([]Uncovered, error)
}

// DefaultFields are the identity-like names discovery looks for when none are configured.
var DefaultFields = []string{
	"customer_id", "user_id", "userid", "customer", "subject_id", "account_id", "member_id",
	"email", "email_address", "phone", "phone_number", "session_id", "thread_id", "conversation_id",
	"owner_id", "person_id", "patient_id", "client_id",
}

// DefaultSample is the sample size per location when DiscoverOptions.Sample is not positive.
const DefaultSample = 200

// Defaults returns o with DefaultFields and DefaultSample filled in where o leaves them empty.
func (o DiscoverOptions) Defaults() DiscoverOptions {
	if len(o.Fields) == 0 {
		o.Fields = DefaultFields
	}
	if o.Sample <= 0 {
		o.Sample = DefaultSample
	}
	return o
}

// IdentityField reports whether name (a column, a field path such as metadata.customer_id,
// a key segment) names an identity-like field of o: its last dotted element equals one of
// o.Fields, ignoring case and the separators '-' and ' '.
func (o DiscoverOptions) IdentityField(name string) bool {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	name = normField(name)
	for _, f := range o.Defaults().Fields {
		if normField(f) == name {
			return true
		}
	}
	return false
}

func normField(s string) string {
	return strings.NewReplacer("-", "_", " ", "_").Replace(strings.ToLower(strings.TrimSpace(s)))
}

// PersonalValue reports whether a sampled value holds personal data by the patterns of
// package pii (an email address, a phone or card number, ...). The value is never kept.
func PersonalValue(v string) bool { return pii.Contains(v) }

// Walk collects the field paths (dotted: metadata.customer_id) and the string values of a
// decoded JSON document (as encoding/json decodes into any), for sampling: arrays are
// transparent, their elements have the path of the array.
func Walk(doc any) (fields, values []string) {
	var walk func(v any, at string)
	walk = func(v any, at string) {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				p := k
				if at != "" {
					p = at + "." + k
				}
				fields = append(fields, p)
				walk(e, p)
			}
		case []any:
			for _, e := range t {
				walk(e, at)
			}
		case string:
			values = append(values, t)
		}
	}
	walk(doc, "")
	return fields, values
}
