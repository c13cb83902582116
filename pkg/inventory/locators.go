package inventory

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"

	"github.com/lethe-erasure/lethe/pkg/retry"
)

// Locators are one store's locators as the inventory file writes them; only the package that
// serves the store's kind knows their fields. Values are what YAML decoding gives (strings,
// numbers, booleans, []any, map[string]any) or, in code, any value that encodes as YAML.
//
// A Locators map is read-only once it was decoded: Decode caches by map, so change a store's
// locators by replacing the map (With), never by writing into it.
type Locators map[string]any

// With returns a copy of l with field set to v; l itself is unchanged.
func (l Locators) With(field string, v any) Locators {
	out := make(Locators, len(l)+1)
	maps.Copy(out, l)
	out[field] = v
	return out
}

// decodeKey identifies one decoding: the map (by identity) and the struct type.
type decodeKey struct {
	m reflect.Value // the map itself: holding it keeps its address from being reused
	t reflect.Type
}

type decoded struct {
	v   reflect.Value // the decoded struct
	err error
}

// maxCached bounds the decode cache; an inventory has tens of stores, tests load many.
const maxCached = 4096

var cache struct {
	sync.Mutex
	m map[uintptr][]entry
}

type entry struct {
	key decodeKey
	val decoded
}

// DecodeChecked decodes st's locators into a T (Locators.Decode) and checks them with check.
// Its error names the store after what (for example "qdrant: store") and is permanent: an
// inventory that does not decode or check does not get better by retrying.
func DecodeChecked[T any](st Entry, what string, check func(T) error) (T, error) {
	var l T
	err := st.Locators.Decode(&l)
	if err == nil {
		err = check(l)
	}
	if err != nil {
		var zero T
		return zero, retry.Permanent(fmt.Errorf("%s %q: %w", what, st.Name, err))
	}
	return l, nil
}

// Decode fills v (a pointer to a struct with yaml tags) from l strictly: a field v does not
// declare is an error naming it, and so is a value that does not decode into its field's
// type. Fields l does not hold keep their zero value. Results are cached per Locators map
// and type, so calling it on every request is cheap; callers must not modify what it returns
// (slices and maps in v are shared between calls). It is safe for concurrent use.
func (l Locators) Decode(v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("locators: decode into %T: want a non-nil pointer to a struct", v)
	}
	t := rv.Elem().Type()
	if len(l) == 0 {
		rv.Elem().SetZero()
		return nil
	}
	m := reflect.ValueOf(l)
	addr := m.Pointer()
	cache.Lock()
	for _, e := range cache.m[addr] {
		if e.key.t == t && e.key.m.Pointer() == addr {
			cache.Unlock()
			rv.Elem().Set(e.val.v)
			return e.val.err
		}
	}
	cache.Unlock()

	out := reflect.New(t).Elem()
	err := decodeInto(l, out)
	cache.Lock()
	if cache.m == nil || len(cache.m) >= maxCached {
		cache.m = map[uintptr][]entry{}
	}
	cache.m[addr] = append(cache.m[addr], entry{decodeKey{m, t}, decoded{out, err}})
	cache.Unlock()
	rv.Elem().Set(out)
	return err
}

func decodeInto(l Locators, out reflect.Value) error {
	fields := yamlFields(out.Type())
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(l)) {
		i, ok := fields[k]
		if !ok {
			errs = append(errs, fmt.Errorf("unknown field %q (known: %s)", k, strings.Join(slices.Sorted(maps.Keys(fields)), ", ")))
			continue
		}
		var n yaml.Node
		if err := n.Encode(l[k]); err != nil {
			errs = append(errs, fmt.Errorf("field %q: %w", k, err))
			continue
		}
		if err := n.Decode(out.Field(i).Addr().Interface()); err != nil {
			errs = append(errs, fmt.Errorf("field %q: %s", k, yamlReason(err)))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("locators: %w", err)
	}
	return nil
}

// yamlFields maps the YAML names of t's exported fields to their index.
func yamlFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = i
	}
	return out
}

var yamlLine = regexp.MustCompile(`^yaml: (unmarshal errors:\s*)?(line \d+: )?`)

// yamlReason drops the line numbers of a re-encoded value, which point nowhere in the file.
func yamlReason(err error) string {
	return yamlLine.ReplaceAllString(strings.TrimSpace(err.Error()), "")
}

var placeholderRE = regexp.MustCompile(`\{[^{}]*\}`)

// CheckTemplate reports an error when tmpl holds a placeholder other than allowed ones
// (Tenant, Subject, SubjectHash, Session): a misspelt "{tennant}" would otherwise stay in
// every expanded name and match nothing.
func CheckTemplate(tmpl string, allowed ...string) error {
	for _, p := range placeholderRE.FindAllString(tmpl, -1) {
		if !slices.Contains(allowed, p) {
			if len(allowed) == 0 {
				return fmt.Errorf("template %q uses placeholder %s; it may use none", tmpl, p)
			}
			return fmt.Errorf("template %q uses placeholder %s, not one of %s", tmpl, p, strings.Join(allowed, " "))
		}
	}
	return nil
}
