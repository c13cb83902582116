package auth

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/lethe-erasure/lethe/pkg/envconf"
)

func TestLimiterBurstThenRefill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(2, 3) // 2/s, burst 3
		for i := range 3 {
			if ok, _ := l.Allow("acme"); !ok {
				t.Fatalf("request %d of the burst refused", i+1)
			}
		}
		ok, wait := l.Allow("acme")
		if ok || wait != 500*time.Millisecond {
			t.Fatalf("after the burst: ok %t, retry after %v; want refused for 500ms", ok, wait)
		}
		time.Sleep(499 * time.Millisecond)
		if ok, wait := l.Allow("acme"); ok || wait <= 0 || wait > 2*time.Millisecond {
			t.Fatalf("just before the refill: ok %t wait %v", ok, wait)
		}
		time.Sleep(time.Millisecond)
		if ok, _ := l.Allow("acme"); !ok {
			t.Fatal("a token did not refill after 500ms")
		}
		time.Sleep(time.Hour) // refills to burst, never beyond
		n := 0
		for ok, _ := l.Allow("acme"); ok; ok, _ = l.Allow("acme") {
			n++
		}
		if n != 3 {
			t.Fatalf("after an hour idle: %d requests allowed, want the burst of 3", n)
		}
	})
}

func TestLimiterPerTenant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(1, 1)
		if ok, _ := l.Allow("acme"); !ok {
			t.Fatal("first acme request refused")
		}
		if ok, _ := l.Allow("acme"); ok {
			t.Fatal("second acme request allowed")
		}
		if ok, _ := l.Allow("globex"); !ok {
			t.Fatal("globex limited by acme's traffic")
		}
	})
}

func TestLimiterEvictsIdleTenants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(10, 20) // full again after 2s idle
		for i := range 100 {
			l.Allow(fmt.Sprintf("t%d", i))
		}
		l.Allow("busy")
		l.Allow("busy")
		if len(l.buckets) != 101 {
			t.Fatalf("%d buckets, want 101", len(l.buckets))
		}
		time.Sleep(minSweepInterval - time.Second)
		l.Allow("busy") // too soon for a sweep
		if len(l.buckets) != 101 {
			t.Fatalf("swept early: %d buckets", len(l.buckets))
		}
		time.Sleep(time.Second)
		l.Allow("busy")
		if len(l.buckets) != 1 || l.buckets["busy"] == nil {
			t.Fatalf("after the sweep: %d buckets, want only the busy tenant", len(l.buckets))
		}
	})
}

func TestLimiterCapsTenants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(1, 5)
		l.maxTenants = 3
		for _, tenant := range []string{"a", "b", "c"} {
			l.Allow(tenant)
			time.Sleep(time.Millisecond)
		}
		l.Allow("d") // none idle long enough: the least recently used ("a") goes
		if len(l.buckets) != 3 || l.buckets["a"] != nil || l.buckets["d"] == nil {
			t.Fatalf("buckets after the cap: %v", l.buckets)
		}
	})
}

func TestNilLimiterAllows(t *testing.T) {
	var l *Limiter
	if ok, wait := l.Allow("acme"); !ok || wait != 0 {
		t.Fatal("nil limiter refused")
	}
	slow := NewLimiter(1e-300, 1) // saturates instead of overflowing into "always idle"
	slow.Allow("acme")
	if ok, wait := slow.Allow("acme"); ok || wait <= 0 {
		t.Fatalf("absurdly slow limiter: ok %t wait %v", ok, wait)
	}
	if NewLimiter(0, 10) != nil {
		t.Fatal("rate 0 should mean no limiter")
	}
}

func TestLimiterMiddleware429(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := NewLimiter(0.25, 2) // one token every 4s
		h := l.Middleware(func(r *http.Request) string { return r.Header.Get("X-Tenant") })(
			http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusAccepted) }))
		do := func(tenant string) *httptest.ResponseRecorder {
			r := httptest.NewRequest(http.MethodPost, "/v1/erasures", nil)
			r.Header.Set("X-Tenant", tenant)
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			return w
		}
		for range 2 {
			if w := do("acme"); w.Code != http.StatusAccepted {
				t.Fatalf("burst request: %d", w.Code)
			}
		}
		time.Sleep(500 * time.Millisecond)
		w := do("acme")
		if w.Code != http.StatusTooManyRequests {
			t.Fatalf("after the burst: %d, want 429", w.Code)
		}
		secs, err := strconv.Atoi(w.Header().Get("Retry-After"))
		if err != nil || secs != 4 { // 3.5s rounded up
			t.Fatalf("Retry-After %q, want 4", w.Header().Get("Retry-After"))
		}
		var body map[string]string
		if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body["error"] != "rate limit exceeded" {
			t.Fatalf("429 body %q", w.Body)
		}
		if w := do("globex"); w.Code != http.StatusAccepted {
			t.Fatalf("other tenant: %d", w.Code)
		}
		time.Sleep(time.Duration(secs) * time.Second)
		if w := do("acme"); w.Code != http.StatusAccepted {
			t.Fatalf("after Retry-After: %d", w.Code)
		}
	})
}

func TestRetryAfterAtLeastOneSecond(t *testing.T) {
	w := httptest.NewRecorder()
	WriteTooManyRequests(w, time.Millisecond)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("status %d, Retry-After %q; want 429 and 1", w.Code, w.Header().Get("Retry-After"))
	}
}

func TestParseRate(t *testing.T) {
	for _, tc := range []struct {
		in    string
		rate  float64
		burst int
	}{
		{"10/s,burst=20", 10, 20},
		{" 10/s , burst = 5 ", 10, 5},
		{"600/m", 10, 20},
		{"3600/h", 1, 2},
		{"1/h", 1.0 / 3600, 1},
		{"0.5/s", 0.5, 1},
		{"off", 0, 0},
	} {
		rate, burst, err := ParseRate(tc.in)
		if err != nil || rate != tc.rate || burst != tc.burst {
			t.Errorf("%q: %g, %d, %v; want %g, %d", tc.in, rate, burst, err, tc.rate, tc.burst)
		}
	}
	for _, tc := range []struct{ in, want string }{
		{"10", "want N/s"},
		{"ten/s", "not a positive number"},
		{"-1/s", "not a positive number"},
		{"0/s", "not a positive number"},
		{"10/d", "unit must be"},
		{"10/s,bust=3", "burst=B"},
		{"10/s,burst=0", "positive integer"},
		{"10/s,burst=x", "positive integer"},
	} {
		if _, _, err := ParseRate(tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v, want one mentioning %q", tc.in, err, tc.want)
		}
	}
}

// A Rate setting is ParseRate's, printed back as it reads.
func TestRateSetting(t *testing.T) {
	var s struct {
		Rate Rate `env:"R" default:"10/s,burst=20"`
	}
	for v, want := range map[string]string{"": "10/s,burst=20", "5/s,burst=7": "5/s,burst=7", "600/m": "10/s,burst=20", "off": "off"} {
		if err := envconf.Load(&s, func(string) string { return v }); err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if b, _ := s.Rate.MarshalText(); string(b) != want || s.Rate.Limiter().String() != want {
			t.Errorf("%q: %s, limiter %v; want %s", v, b, s.Rate.Limiter(), want)
		}
	}
	if err := envconf.Load(&s, func(string) string { return "fast" }); err == nil || !strings.Contains(err.Error(), "R \"fast\"") {
		t.Fatalf("bad value: %v", err)
	}
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"10/s,burst=20", "600/m", "off", "1e308/s", "NaN/s", "1/h,burst=1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		rate, burst, err := ParseRate(s)
		if err == nil && rate != 0 && (rate < 0 || burst < 1 || NewLimiter(rate, burst) == nil) {
			t.Fatalf("%q parsed to an unusable limit %g/%d", s, rate, burst)
		}
	})
}
