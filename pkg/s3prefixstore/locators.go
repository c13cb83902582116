package s3prefixstore

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Kind is the inventory kind this package serves.
const Kind = "s3prefix"

// Locators are the locators of an inventory store of kind "s3prefix": prefix templates
// s3://bucket/key-template. Each template
//   - names a literal bucket (no placeholder in it);
//   - uses {tenant} and at least one identifier placeholder ({subject}, {session} or
//     {subject_hash}), and nothing else;
//   - follows every placeholder with "/", so that an expanded identifier ends at a path
//     delimiter and "a" never reaches "ab/…";
//   - puts {tenant} in the key before the first identifier placeholder: the part before
//     that placeholder is the template's tenant prefix, erased whole by a tenant-scope
//     request, and since it holds "{tenant}/" it is never the bucket root.
//
// A template using {session} expands once per session of the request; one using {subject}
// is skipped when the request has no subject id.
type Locators struct {
	Prefixes []string `yaml:"prefixes"`
}

// template is one parsed prefix template.
type template struct {
	raw    string // as written: the location reports use
	bucket string
	key    string // key template
	tenant string // the tenant prefix's template: key up to the first identifier placeholder
}

var identifiers = []string{inventory.Subject, inventory.Session, inventory.SubjectHash}

// bucketRE is S3's rule for bucket names (general purpose buckets).
var bucketRE = regexp.MustCompile(`^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$`)

func parseTemplate(raw string) (template, error) {
	rest, ok := strings.CutPrefix(raw, "s3://")
	if !ok {
		return template{}, fmt.Errorf("prefix %q: want s3://bucket/key-template", raw)
	}
	if err := inventory.CheckTemplate(rest, inventory.Tenant, inventory.Subject, inventory.Session, inventory.SubjectHash); err != nil {
		return template{}, err
	}
	bucket, key, _ := strings.Cut(rest, "/")
	t := template{raw: raw, bucket: bucket, key: key}
	if !bucketRE.MatchString(bucket) {
		return template{}, fmt.Errorf("prefix %q: bucket %q is no literal S3 bucket name", raw, bucket)
	}
	first := -1
	for _, p := range identifiers {
		if i := strings.Index(key, p); i >= 0 && (first < 0 || i < first) {
			first = i
		}
	}
	if first < 0 {
		return template{}, fmt.Errorf("prefix %q uses none of {subject}, {session}, {subject_hash}: it would name the whole tenant", raw)
	}
	for _, p := range append([]string{inventory.Tenant}, identifiers...) {
		for i := strings.Index(key, p); i >= 0; {
			if !strings.HasPrefix(key[i+len(p):], "/") {
				return template{}, fmt.Errorf("prefix %q: %s must be followed by \"/\" so that it ends at a path delimiter", raw, p)
			}
			next := strings.Index(key[i+len(p):], p)
			if next < 0 {
				break
			}
			i += len(p) + next
		}
	}
	t.tenant = key[:first]
	if !strings.Contains(t.tenant, inventory.Tenant+"/") {
		return template{}, fmt.Errorf("prefix %q: {tenant} must come before the first identifier placeholder (the tenant prefix %q names no tenant)", raw, "s3://"+bucket+"/"+t.tenant)
	}
	return t, nil
}

// templates decodes and parses the locators of st; its errors are permanent and name the
// store and the field.
func templates(st inventory.Entry) ([]template, error) {
	var l Locators
	err := st.Locators.Decode(&l)
	var ts []template
	if err == nil {
		var errs []error
		if len(l.Prefixes) == 0 {
			errs = append(errs, errors.New("locators.prefixes is empty"))
		}
		for i, p := range l.Prefixes {
			t, err := parseTemplate(p)
			if err != nil {
				errs = append(errs, fmt.Errorf("locators.prefixes[%d]: %w", i, err))
			}
			ts = append(ts, t)
		}
		err = errors.Join(errs...)
	}
	if err != nil {
		return nil, retry.Permanent(fmt.Errorf("s3prefix store %q: %w", st.Name, err))
	}
	return ts, nil
}

var _ deletion.Validator = (*Store)(nil)

// Validate checks the locators of st (see Locators); it touches no backend.
func (s *Store) Validate(st inventory.Entry) error {
	_, err := templates(st)
	return err
}

// Encode is how an identifier (tenant, subject id, session id, subject hash) is written
// into an object key; applications that write keys under a prefix template must write them
// the same way. Every byte of the identifier's UTF-8 (taken as given: no Unicode
// normalisation, so NFC and NFD spellings stay distinct) other than A–Z, a–z, 0–9, "-",
// "_", "~" and "." is written as "%" and two upper-case hex digits; an identifier that
// would then be "." or ".." is written "%2E" or "%2E%2E". So "/" becomes "%2F" and "%"
// "%25": no identifier can leave its path segment or alias another (Encode is injective),
// and none is a relative path step. In Python: quote(id, safe="") with "." and ".." mapped
// to "%2E" and "%2E%2E"; in JavaScript, encodeURIComponent also keeps !'()* and differs.
func Encode(id string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		if 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '~' || c == '.' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	if s := b.String(); s != "." && s != ".." {
		return s
	}
	return strings.Repeat("%2E", len(id))
}
