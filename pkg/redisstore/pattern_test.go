package redisstore

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/lethe-erasure/lethe/pkg/inventory"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

func TestKeyPart(t *testing.T) {
	for in, want := range map[string]string{
		"":       "",
		"abc":    "abc",
		"x:y":    "x%3Ay",
		"%":      "%25",
		"%3A":    "%253A",
		"a*[]\\": "a*[]\\",
		"é:é":    "é%3Aé",
	} {
		if got := KeyPart(in); got != want {
			t.Errorf("KeyPart(%q) = %q, want %q", in, got, want)
		}
	}
	if KeyPart(":") == KeyPart("%3A") {
		t.Error("KeyPart is not injective")
	}
}

// globCases are patterns and keys whose matching this package's glob matcher must decide
// exactly as Redis does.
var globCases = struct{ patterns, keys []string }{
	patterns: []string{
		"session:acme:a:*", `session:acme:a\*:*`, `session:acme:\*:*`, `session:acme:a\\:*`,
		`session:acme:\[ab\]:*`, `session:acme:a\]:*`, `session:acme:a\?:*`, "session:acme:x%3Ay:*",
		"a?c", "a[bc]d", "a[^b]d", "a[a-c]d", "a[c-a]d", `a[\]]d`, "a[b", "*", "**x", "a*b*c",
		`a\`, "[]", "a[", "ab*", "x:*:y",
	},
	keys: []string{
		"session:acme:a:1", "session:acme:ab:1", "session:acme:a*:1", "session:acme:*:1",
		"session:acme:x:1", `session:acme:a\:1`, `session:acme:a\b:1`, "session:acme:[ab]:1",
		"session:acme:a]:1", "session:acme:a?:1", "session:acme:x%3Ay:1", "session:acme:x:y:1",
		"abc", "abd", "acd", "aed", "a]d", "ab", "a[b", "x", "axbxc", `a\`, "a", "x:1:y", "x:y",
	},
}

func TestGlobMatchAgreesWithRedis(t *testing.T) {
	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: testenv.Redis(t)})
	t.Cleanup(func() { c.Close() })
	for _, k := range globCases.keys {
		if err := c.Set(ctx, k, "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range globCases.patterns {
		redisSays := map[string]bool{}
		keys, cursor, err := c.Scan(ctx, 0, p, 10000).Result()
		if err != nil || cursor != 0 {
			t.Fatalf("scan %q: cursor %d, %v", p, cursor, err)
		}
		for _, k := range keys {
			redisSays[k] = true
		}
		for _, k := range globCases.keys {
			if got := globMatch(p, k); got != redisSays[k] {
				t.Errorf("globMatch(%q, %q) = %v, redis says %v", p, k, got, redisSays[k])
			}
		}
	}
}

func TestTenantPattern(t *testing.T) {
	got := tenantPattern("session:{tenant}:{subject}:*", "a*:b")
	if want := `session:a\*%3Ab:*:*`; got != want {
		t.Errorf("tenantPattern = %q, want %q", got, want)
	}
	if globMatch(got, "session:a*:x:1") || !globMatch(got, "session:a*%3Ab:x:1") {
		t.Error("tenant pattern matches the wrong tenant")
	}
}

// fuzzTemplates are key templates whose patterns FuzzPattern checks: the reference ones and
// one with two identifier placeholders.
var fuzzTemplates = []string{
	"session:{tenant}:{subject}:*", "cache:{tenant}:{subject}:*", "graph:{tenant}:{subject}:*",
	"turn:{tenant}:{session}:{subject}:*", "exact:{tenant}:{subject}",
}

// FuzzPattern checks that the pattern built for one (tenant, subject, session) matches every
// key built for it and never a key built for any other.
func FuzzPattern(f *testing.F) {
	f.Add("acme", "a", "s", "acme", "ab", "s", "1")
	f.Add("acme", "x", "s", "acme", "x:y", "s", "1")
	f.Add("acme", "x:y", "s", "acme", "x", "s", "y:1")
	f.Add("acme", "*", "s", "acme", "anyone", "s", "")
	f.Add("acme", `a\`, "s", "acme", `a\b`, "s", ":")
	f.Add("ac", "me:a", "s", "ac:me", "a", "s", "1")
	f.Fuzz(func(t *testing.T, ta, a, sa, tb, b, sb, suffix string) {
		va := inventory.Vars{Tenant: ta, Subject: a, Session: sa}
		vb := inventory.Vars{Tenant: tb, Subject: b, Session: sb}
		for _, tmpl := range fuzzTemplates {
			pat := patternOf(tmpl, va)
			if !globMatch(pat, Key(tmpl, va, suffix)) {
				t.Fatalf("pattern %q misses its own key %q", pat, Key(tmpl, va, suffix))
			}
			kb := Key(tmpl, vb, suffix)
			same := ta == tb && a == b && (sa == sb || !inventory.Uses(tmpl, inventory.Session))
			if globMatch(pat, kb) != same {
				t.Fatalf("pattern %q vs key %q of another subject: match = %v", pat, kb, !same)
			}
			tp := tenantPattern(tmpl, ta)
			if !globMatch(tp, Key(tmpl, va, suffix)) {
				t.Fatalf("tenant pattern %q misses key %q", tp, Key(tmpl, va, suffix))
			}
			if globMatch(tp, kb) != (ta == tb) {
				t.Fatalf("tenant pattern %q vs key %q: match = %v", tp, kb, ta != tb)
			}
		}
	})
}

func TestInTenant(t *testing.T) {
	for _, tc := range []struct {
		tmpl, key string
		want      bool
	}{
		{"s:{tenant}:{subject}:*", "s:acme:x:1", true},
		{"s:{tenant}:{subject}:*", "s:acme:x:", true},
		{"s:{tenant}:{subject}:*", "s:acme:x", false},
		{"s:{tenant}:{subject}:*", "s:globex:x:1", false},
		{"s:{tenant}:{subject}:*", "s:acme-eu:x:1", false},
		{"s:{session}:{tenant}:*", "s:x:acme:1:2", true},
		{"s:{session}:{tenant}:*", "s:x:globex:acme:1", false},
		{"s:{session}:{tenant}:q*", "s:x:acme:q1", true},
		{"s:{session}:{tenant}:q*", "s:x:acme:r1", false},
		{"fp:{subject_hash}:{tenant}", "fp:h:acme", true},
		{"fp:{subject_hash}:{tenant}", "fp:h:acme:x", false},
		{"fp:{subject_hash}:{tenant}", "fp:h:x:acme", false},
		{"t{tenant}:{subject}", "tacme:x", true},
		{"t{tenant}:{subject}", "acme:x", false},
		{"a:{tenant}:{subject}:b", "a:acme:x:b", true},
		{"a:{tenant}:{subject}:b", "a:acme:x:c", false},
		{"{tenant}:{session}", "acme:x", true},
	} {
		if got := inTenant(tc.tmpl, "acme", tc.key); got != tc.want {
			t.Errorf("inTenant(%q, acme, %q) = %v, want %v", tc.tmpl, tc.key, got, tc.want)
		}
	}
}
