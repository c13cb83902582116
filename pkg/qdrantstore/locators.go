package qdrantstore

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/qdrantstore/qdrantkey"
)

// Kind is the inventory kind this package serves.
const Kind = "qdrant"

// Locators are the locators of an inventory store of kind "qdrant": collection templates
// (placeholders {tenant}, {subject}, {subject_hash}, {session}) and the payload fields that
// hold the subject id, its keyed pseudonym, or (legacy chunks) a session id. A field is a
// payload key in Qdrant's grammar, e.g. metadata.customer_id.
//
// TenantField is the payload field holding the tenant id in collections that tenants
// share: every filter the store sends then requires it to equal the request's tenant, and
// a tenant-scope erasure deletes the points of the tenant instead of dropping collections.
// A store without one must name {tenant} in every collection template.
type Locators struct {
	Collections   []string `yaml:"collections"`
	SubjectFields []string `yaml:"subject_fields"`
	HashFields    []string `yaml:"hash_fields"`
	SessionFields []string `yaml:"session_fields"`
	TenantField   string   `yaml:"tenant_field"`

	// Semantic read-back (see semantic.go). Vectors names the vectors whose values are read
	// before the erasure and searched for after it (empty: every vector of a point).
	// Similar says what a probable untagged copy does: "report" (default) lists it in the
	// verification, "erase" deletes it too, "off" skips the search. Similarity is the
	// score a cosine or dot match must exceed (default DefaultSimilarity); MaxDistance the
	// distance a euclid or manhattan match must stay under (unset: those vectors are not
	// searched). SimilarLimit bounds the points one search returns (default
	// DefaultSimilarLimit; a search that returns that many is reported as truncated).
	// "erase" deletes every point that close to one of the subject's, whoever else it may
	// name (a chunk shared by many customers, such as a stock answer, goes too): choose it
	// only where chunks are per subject, with a high similarity. SimilarSearch is how the
	// collection is searched: "approximate" (default) through Qdrant's HNSW index, whose
	// cost grows with the subject's vectors and the logarithm of the collection, and which
	// may miss a near-duplicate the index does not reach; "exact", a full scan of the
	// collection per vector, which misses nothing and costs O(collection) per erasure.
	Vectors       []string `yaml:"vectors"`
	Similar       string   `yaml:"similar"`
	Similarity    *float64 `yaml:"similarity"`
	MaxDistance   *float64 `yaml:"max_distance"`
	SimilarLimit  int      `yaml:"similar_limit"`
	SimilarSearch string   `yaml:"similar_search"`

	// Residual mentions (see mentions.go). TextFields are payload fields of free text
	// (plain dotted keys, e.g. page_content or metadata.text) searched after the erasure
	// for the subject's raw identifiers; Mentions says what a mention does: "fail"
	// (default: the store is not clean), "redact" (the identifier is replaced by Redaction,
	// default DefaultRedaction, in that field only) or "erase" (the point is deleted).
	TextFields []string `yaml:"text_fields"`
	Mentions   string   `yaml:"mentions"`
	Redaction  string   `yaml:"redaction"`
}

// Values of Locators.Similar and Locators.Mentions, and their defaults.
const (
	SimilarReport = "report"
	SimilarErase  = "erase"
	SimilarOff    = "off"

	SearchApproximate = "approximate"
	SearchExact       = "exact"

	MentionsFail   = "fail"
	MentionsRedact = "redact"
	MentionsErase  = "erase"

	DefaultSimilarity   = 0.97
	DefaultSimilarLimit = 64
	DefaultRedaction    = "[redacted]"
)

// similar is l.Similar with its default.
func (l Locators) similar() string {
	if l.Similar == "" {
		return SimilarReport
	}
	return l.Similar
}

// mentions is l.Mentions with its default.
func (l Locators) mentions() string {
	if l.Mentions == "" {
		return MentionsFail
	}
	return l.Mentions
}

// similarity is l.Similarity with its default.
func (l Locators) similarity() float64 {
	if l.Similarity == nil {
		return DefaultSimilarity
	}
	return *l.Similarity
}

// exactSearch reports whether the semantic read-back scans the whole collection.
func (l Locators) exactSearch() bool { return l.SimilarSearch == SearchExact }

func (l Locators) similarLimit() int {
	if l.SimilarLimit <= 0 {
		return DefaultSimilarLimit
	}
	return l.SimilarLimit
}

func (l Locators) redaction() string {
	if l.Redaction == "" {
		return DefaultRedaction
	}
	return l.Redaction
}

var _ deletion.Validator = (*Store)(nil)

// Validate checks the locators of inv: known fields only, at least one collection, at
// least one payload field, every field within Qdrant's key grammar, only known
// placeholders in collection templates, and either a tenant field or {tenant} in every
// collection template. It touches no backend.
func (st *Store) Validate(inv inventory.Entry) error { return Validate(inv) }

// Validate is Store.Validate without a Store, for tools that check an inventory offline.
func Validate(inv inventory.Entry) error {
	_, err := LocatorsOf(inv)
	return err
}

// LocatorsOf decodes and checks the locators of inv; its errors are permanent.
func LocatorsOf(inv inventory.Entry) (Locators, error) {
	return inventory.DecodeChecked(inv, "qdrant: store", Locators.check)
}

func (l Locators) check() error {
	var errs []error
	if len(l.Collections) == 0 {
		errs = append(errs, errors.New("locators.collections is empty"))
	}
	for _, c := range l.Collections {
		if err := inventory.CheckTemplate(c, inventory.Tenant, inventory.Subject, inventory.SubjectHash, inventory.Session); err != nil {
			errs = append(errs, fmt.Errorf("locators.collections: %w", err))
		} else if l.TenantField == "" && !inventory.Uses(c, inventory.Tenant) {
			errs = append(errs, fmt.Errorf("locators.collections: collection %q names no {tenant} and the store has no tenant_field: tenants sharing it would erase each other's points; put {tenant} in the name or name the payload field holding the tenant in tenant_field", c))
		}
	}
	if len(l.SubjectFields)+len(l.HashFields)+len(l.SessionFields) == 0 {
		errs = append(errs, errors.New("locators: needs at least one of subject_fields, hash_fields, session_fields"))
	}
	for name, fields := range map[string][]string{"subject_fields": l.SubjectFields, "hash_fields": l.HashFields, "session_fields": l.SessionFields} {
		for _, f := range fields {
			if err := qdrantkey.Check(f); err != nil {
				errs = append(errs, fmt.Errorf("locators.%s: %w", name, err))
			}
			if f == l.TenantField {
				errs = append(errs, fmt.Errorf("locators.tenant_field: %q is also one of %s", f, name))
			}
		}
	}
	if l.TenantField != "" {
		if err := qdrantkey.Check(l.TenantField); err != nil {
			errs = append(errs, fmt.Errorf("locators.tenant_field: %w", err))
		}
	}
	errs = append(errs, l.checkReadBack()...)
	return errors.Join(errs...)
}

// plainKey is a payload key of object keys only, which set_payload can address.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$`)

func (l Locators) checkReadBack() []error {
	var errs []error
	switch l.Similar {
	case "", SimilarReport, SimilarErase, SimilarOff:
	default:
		errs = append(errs, fmt.Errorf("locators.similar: %q is not one of report, erase, off", l.Similar))
	}
	switch l.SimilarSearch {
	case "", SearchApproximate, SearchExact:
	default:
		errs = append(errs, fmt.Errorf("locators.similar_search: %q is not one of approximate, exact", l.SimilarSearch))
	}
	if s := l.Similarity; s != nil && (math.IsNaN(*s) || math.IsInf(*s, 0) || *s <= 0) {
		errs = append(errs, fmt.Errorf("locators.similarity: %v is not a positive score", *s))
	}
	if d := l.MaxDistance; d != nil && (math.IsNaN(*d) || math.IsInf(*d, 0) || *d <= 0) {
		errs = append(errs, fmt.Errorf("locators.max_distance: %v is not a positive distance", *d))
	}
	if l.SimilarLimit < 0 {
		errs = append(errs, fmt.Errorf("locators.similar_limit: %d is negative", l.SimilarLimit))
	}
	for _, v := range l.Vectors {
		if v == "" {
			errs = append(errs, errors.New("locators.vectors: an empty vector name"))
		}
	}
	switch l.Mentions {
	case "", MentionsFail, MentionsRedact, MentionsErase:
	default:
		errs = append(errs, fmt.Errorf("locators.mentions: %q is not one of fail, redact, erase", l.Mentions))
	}
	if l.Mentions != "" && len(l.TextFields) == 0 {
		errs = append(errs, errors.New("locators.mentions: needs text_fields"))
	}
	for _, f := range l.TextFields {
		if !plainKey.MatchString(f) {
			errs = append(errs, fmt.Errorf("locators.text_fields: %q is not a dotted key of object keys", f))
		}
	}
	if strings.TrimSpace(l.Redaction) != l.Redaction {
		errs = append(errs, errors.New("locators.redaction: leading or trailing space"))
	}
	return errs
}
