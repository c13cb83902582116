package qdrantkey

import "testing"

func TestCheck(t *testing.T) {
	for path, ok := range map[string]bool{
		"customer_id": true, "customer-id": true, "metadata.customer_id": true, "é1": true, "用户": true,
		`"user id"`: true, `meta."user id"`: true, "tags[]": true, "a[0].b": true, "a[0][1]": true, `""`: true,
		"": false, "user id": false, "user:id": false, "$id": false, "a..b": false, "a.": false, ".a": false,
		"a[x]": false, "a[": false, "a[-1]": false, `"a\"`: false, `"a`: false, "a]": false, "a[]b": false,
	} {
		if err := Check(path); (err == nil) != ok {
			t.Errorf("Check(%q) = %v, want ok=%v", path, err, ok)
		}
	}
}

func FuzzCheck(f *testing.F) {
	for _, s := range []string{"a.b[0]", `"x y".z[]`, "a..b", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		items, err := Parse(s)
		if err == nil && (len(items) == 0 || !items[0].IsKey) {
			t.Errorf("Parse(%q) = %v: a valid path starts with a key", s, items)
		}
	})
}
