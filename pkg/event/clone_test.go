package event

import (
	"reflect"
	"testing"
	"time"
)

// fill sets every field reachable from v to a non-zero value: one element in each slice, a
// pointer to a filled value in each pointer.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Unix(1700000000, 0)))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(1)
	}
}

// shared reports the path of a slice, pointer or map of a that b shares.
func shared(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Struct:
		for i := range a.NumField() {
			if a.Type().Field(i).IsExported() {
				if p := shared(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); p != "" {
					return p
				}
			}
		}
	case reflect.Slice, reflect.Pointer, reflect.Map:
		if !a.IsNil() && a.UnsafePointer() == b.UnsafePointer() {
			return path
		}
		if a.Kind() == reflect.Slice {
			for i := range a.Len() {
				if p := shared(a.Index(i), b.Index(i), path+"[i]"); p != "" {
					return p
				}
			}
		}
		if a.Kind() == reflect.Pointer && !a.IsNil() {
			return shared(a.Elem(), b.Elem(), path+"*")
		}
	}
	return ""
}

// TestCloneSharesNothing: every slice and pointer of a StoreDone, fields added later
// included, is copied by Clone, and the copy is equal to the original.
func TestCloneSharesNothing(t *testing.T) {
	var d StoreDone
	fill(reflect.ValueOf(&d).Elem())
	c := d.Clone()
	if !reflect.DeepEqual(c, d) {
		t.Fatalf("clone %+v differs from %+v", c, d)
	}
	if p := shared(reflect.ValueOf(d), reflect.ValueOf(c), "StoreDone"); p != "" {
		t.Fatalf("Clone shares %s with the original", p)
	}
}
