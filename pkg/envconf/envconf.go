// Package envconf loads declared configuration from environment variables. A declaration is
// a struct whose fields carry tags:
//
//	env:"LETHE_X"      the variable; a field without it is not read (a nested struct
//	                   without it is walked)
//	default:"10s"      the value when the variable is unset or empty
//	doc:"…"            one sentence for docs and --print-config
//	secret:"true"      the value is masked when printed and never quoted in errors
//	min:"1" max:"64"   bounds of an integer, a number or a duration
//
// Fields are strings, bools (strconv.ParseBool), integers, float64s, time.Durations,
// []string (comma separated, blanks dropped) and types implementing
// encoding.TextUnmarshaler. After every field is parsed, Load calls Validate on each
// struct that has the method, innermost first. Every error names its variable.
//
// Load is the one reader of the environment for declared settings: packages declare what
// they read and turn the loaded struct into clients, keys and options.
package envconf

import (
	"encoding"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Validator is a declaration that checks its loaded values; its errors name the variables.
type Validator interface {
	Validate() error
}

// FromEnv is Load from the process environment.
func FromEnv(dst any) error { return Load(dst, os.Getenv) }

// Defaults is Load from an empty environment: every field at its default.
func Defaults(dst any) error { return Load(dst, func(string) string { return "" }) }

// Load sets every declared field of the struct dst points to from getenv, or from its
// default when the variable is unset or empty, then validates. It reports every bad
// variable, joined.
func Load(dst any, getenv func(string) string) error {
	v := reflect.ValueOf(dst)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("envconf: Load wants a pointer to a struct, not %T", dst)
	}
	var errs []error
	load(v.Elem(), getenv, &errs)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	validate(v.Elem(), &errs)
	return errors.Join(errs...)
}

func load(v reflect.Value, getenv func(string) string, errs *[]error) {
	eachVar(v, "", func(fv reflect.Value, f reflect.StructField, name, _ string, _ reflect.Type) {
		raw := getenv(name)
		if raw == "" {
			raw = f.Tag.Get("default")
		}
		if err := set(fv, f, raw); err != nil {
			if f.Tag.Get("secret") == "true" || raw == "" {
				*errs = append(*errs, fmt.Errorf("%s: %w", name, err))
			} else {
				*errs = append(*errs, fmt.Errorf("%s %q: %w", name, raw, err))
			}
		}
	})
}

// eachVar calls fn for every exported field of the struct v that declares a variable (an
// env tag), in declaration order, walking untagged struct fields; in is the struct type
// holding the field and path its dotted path within the root.
func eachVar(v reflect.Value, path string, fn func(fv reflect.Value, f reflect.StructField, name, path string, in reflect.Type)) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if name, ok := f.Tag.Lookup("env"); ok {
			fn(v.Field(i), f, name, path, t)
		} else if walkable(f.Type) {
			eachVar(v.Field(i), path+f.Name+".", fn)
		}
	}
}

func validate(v reflect.Value, errs *[]error) {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		if _, tagged := f.Tag.Lookup("env"); f.IsExported() && !tagged && walkable(f.Type) {
			validate(v.Field(i), errs)
		}
	}
	if val, ok := v.Addr().Interface().(Validator); ok {
		if err := val.Validate(); err != nil {
			*errs = append(*errs, err)
		}
	}
}

var (
	durationType  = reflect.TypeFor[time.Duration]()
	unmarshalType = reflect.TypeFor[encoding.TextUnmarshaler]()
	marshalType   = reflect.TypeFor[encoding.TextMarshaler]()
	stringerType  = reflect.TypeFor[fmt.Stringer]()
)

// walkable reports whether an untagged field of type t holds declarations.
func walkable(t reflect.Type) bool {
	return t.Kind() == reflect.Struct && !reflect.PointerTo(t).Implements(unmarshalType)
}

// set parses raw into the field; an empty raw leaves the zero value.
func set(fv reflect.Value, f reflect.StructField, raw string) error {
	if u, ok := fv.Addr().Interface().(encoding.TextUnmarshaler); ok {
		if raw == "" {
			fv.SetZero()
			return nil
		}
		return u.UnmarshalText([]byte(raw))
	}
	if raw == "" {
		fv.SetZero()
		return nil
	}
	switch {
	case f.Type == durationType:
		d, err := time.ParseDuration(strings.TrimSpace(raw))
		if err != nil {
			return errors.New("want a duration such as 10s or 2m")
		}
		if err := bounds(f, "a duration", float64(d), parseDuration); err != nil {
			return err
		}
		fv.SetInt(int64(d))
	case f.Type.Kind() == reflect.String:
		fv.SetString(raw)
	case f.Type.Kind() == reflect.Bool:
		b, err := strconv.ParseBool(strings.TrimSpace(raw))
		if err != nil {
			return errors.New("want true or false")
		}
		fv.SetBool(b)
	case f.Type.Kind() >= reflect.Int && f.Type.Kind() <= reflect.Int64:
		n, err := strconv.ParseInt(strings.TrimSpace(raw), 10, f.Type.Bits())
		if err != nil {
			return errors.New("want a whole number" + rangeText(f))
		}
		if err := bounds(f, "a whole number", float64(n), parseFloat); err != nil {
			return err
		}
		fv.SetInt(n)
	case f.Type.Kind() == reflect.Float64:
		n, err := strconv.ParseFloat(strings.TrimSpace(raw), 64)
		if err != nil {
			return errors.New("want a number" + rangeText(f))
		}
		if err := bounds(f, "a number", n, parseFloat); err != nil {
			return err
		}
		fv.SetFloat(n)
	case f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.String:
		var list []string
		for _, s := range strings.Split(raw, ",") {
			if s = strings.TrimSpace(s); s != "" {
				list = append(list, s)
			}
		}
		fv.Set(reflect.ValueOf(list).Convert(f.Type))
	default:
		return fmt.Errorf("envconf: field %s has type %s, which no variable can set", f.Name, f.Type)
	}
	return nil
}

func parseFloat(s string) (float64, error) { return strconv.ParseFloat(s, 64) }

func parseDuration(s string) (float64, error) {
	d, err := time.ParseDuration(s)
	return float64(d), err
}

// bounds checks n, a value of what, against the field's min and max tags.
func bounds(f reflect.StructField, what string, n float64, parse func(string) (float64, error)) error {
	for _, b := range []struct {
		tag  string
		fail func(lim float64) bool
	}{{"min", func(lim float64) bool { return n < lim }}, {"max", func(lim float64) bool { return n > lim }}} {
		s, ok := f.Tag.Lookup(b.tag)
		if !ok {
			continue
		}
		lim, err := parse(s)
		if err != nil {
			return fmt.Errorf("envconf: field %s: bad %s tag %q", f.Name, b.tag, s)
		}
		if b.fail(lim) {
			return errors.New("want " + what + rangeText(f))
		}
	}
	return nil
}

// rangeText says the field's bounds: " from 1 to 64", " of at least 1", " of at most 1s".
func rangeText(f reflect.StructField) string {
	lo, hasLo := f.Tag.Lookup("min")
	hi, hasHi := f.Tag.Lookup("max")
	switch {
	case hasLo && hasHi:
		return " from " + lo + " to " + hi
	case hasLo:
		return " of at least " + lo
	case hasHi:
		return " of at most " + hi
	}
	return ""
}

// Var is one declared variable with its value.
type Var struct {
	Name    string
	Default string
	Doc     string
	Secret  bool
	Type    string // string, bool, integer, number, duration, list or text (a syntax of its own, see Doc), with the bounds
	Value   string // formatted; a secret's is Masked when set
	Field   string // the Go field path, such as Kafka.Brokers
	Owner   string // the struct type declaring it, such as broker.Settings
}

// Masked stands for a secret that is set.
const Masked = "****"

// Vars lists the variables the struct v (or a pointer to one) declares, in declaration
// order, with its values. A variable declared twice (by two services' settings in one
// process) is listed twice.
func Vars(v any) []Var {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		rv = rv.Elem()
	}
	var out []Var
	vars(rv, &out)
	return out
}

func vars(v reflect.Value, out *[]Var) {
	eachVar(v, "", func(fv reflect.Value, f reflect.StructField, name, path string, in reflect.Type) {
		secret := f.Tag.Get("secret") == "true"
		val := format(fv)
		if secret && val != "" {
			val = Masked
		}
		*out = append(*out, Var{Name: name, Default: f.Tag.Get("default"), Doc: f.Tag.Get("doc"), Secret: secret,
			Type: typeName(f), Value: val, Field: path + f.Name, Owner: owner(in)})
	})
}

// owner names the struct type t as its package's code does: pkg.Type.
func owner(t reflect.Type) string {
	if t.Name() == "" {
		return ""
	}
	return t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:] + "." + t.Name()
}

func typeName(f reflect.StructField) string {
	var t string
	switch {
	case reflect.PointerTo(f.Type).Implements(unmarshalType):
		return "text"
	case f.Type == durationType:
		t = "duration"
	case f.Type.Kind() == reflect.String:
		return "string"
	case f.Type.Kind() == reflect.Bool:
		return "bool"
	case f.Type.Kind() >= reflect.Int && f.Type.Kind() <= reflect.Int64:
		t = "integer"
	case f.Type.Kind() == reflect.Float64:
		t = "number"
	case f.Type.Kind() == reflect.Slice:
		return "list"
	}
	return t + rangeText(f)
}

// format writes a field's value as a variable would set it.
func format(v reflect.Value) string {
	if v.Type().Implements(marshalType) {
		b, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return "(" + err.Error() + ")"
		}
		return string(b)
	}
	if v.Type().Implements(stringerType) && v.Type() != durationType {
		return v.Interface().(fmt.Stringer).String()
	}
	switch {
	case v.Type() == durationType:
		return FormatDuration(time.Duration(v.Int()))
	case v.Kind() == reflect.String:
		return v.String()
	case v.Kind() == reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case v.Kind() >= reflect.Int && v.Kind() <= reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	case v.Kind() == reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case v.Kind() == reflect.Slice:
		parts := make([]string, v.Len())
		for i := range parts {
			parts[i] = v.Index(i).String()
		}
		return strings.Join(parts, ",")
	}
	return fmt.Sprint(v.Interface())
}

// FormatDuration writes d as time.Duration.String without its zero trailing units (1m,
// 1h30m, 2ms); zero is "0s".
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// Print writes the variables v declares as NAME=value lines, each variable once, secrets
// masked.
func Print(w io.Writer, v any) error {
	seen := map[string]bool{}
	for _, x := range Vars(v) {
		if seen[x.Name] {
			continue
		}
		seen[x.Name] = true
		if _, err := fmt.Fprintf(w, "%s=%s\n", x.Name, x.Value); err != nil {
			return err
		}
	}
	return nil
}

// Conflicts reports the variables v declares more than once with a different default, doc,
// type or secrecy: one variable must mean one thing wherever it is read.
func Conflicts(v any) error {
	first := map[string]Var{}
	var errs []error
	for _, x := range Vars(v) {
		p, ok := first[x.Name]
		if !ok {
			first[x.Name] = x
			continue
		}
		if p.Default != x.Default || p.Doc != x.Doc || p.Type != x.Type || p.Secret != x.Secret {
			errs = append(errs, fmt.Errorf("envconf: %s is declared by %s and %s differently", x.Name, p.Field, x.Field))
		}
	}
	return errors.Join(errs...)
}

// ListenError is err, a failure to listen on an address the variable sets, naming the
// variable when the address is taken (EADDRINUSE), so that its message says how to move
// the listener.
func ListenError(err error, variable string) error {
	if err != nil && errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("%w: another process listens there; set %s to a free host:port", err, variable)
	}
	return err
}
