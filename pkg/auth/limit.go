package auth

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Default rate limit: 10 requests per second per tenant, bursts of 20.
const (
	DefaultRate  = 10.0
	DefaultBurst = 20
)

// DefaultMaxTenants bounds the buckets a Limiter keeps.
const DefaultMaxTenants = 10_000

// minSweepInterval bounds how often a Limiter scans for idle buckets.
const minSweepInterval = time.Minute

// Limiter is a token bucket per tenant (golang.org/x/time/rate): each tenant may make
// burst requests at once and rate requests per second on average. Memory is bounded: a bucket idle long enough to
// have refilled completely is indistinguishable from a new one and is dropped by a sweep
// that runs at most once a minute, and at most DefaultMaxTenants buckets are kept (at the
// cap the least recently used bucket is dropped first). A nil *Limiter allows everything.
// It is safe for concurrent use.
type Limiter struct {
	rate  float64 // tokens per second
	burst float64

	mu         sync.Mutex
	buckets    map[string]*bucket
	maxTenants int
	refill     time.Duration // from empty to full; a bucket idle this long is full
	lastSweep  time.Time
}

type bucket struct {
	lim  *rate.Limiter
	last time.Time // of the last request, for the sweep and the eviction
}

// NewLimiter returns a limiter allowing rate requests per second per tenant with bursts
// of burst. A rate <= 0 returns nil (no limit); a burst < 1 is taken as 1.
func NewLimiter(perSecond float64, burst int) *Limiter {
	if perSecond <= 0 || math.IsNaN(perSecond) || math.IsInf(perSecond, 0) {
		return nil
	}
	burst = max(burst, 1)
	return &Limiter{
		rate:       perSecond,
		burst:      float64(burst),
		buckets:    map[string]*bucket{},
		maxTenants: DefaultMaxTenants,
		refill:     seconds(float64(burst) / perSecond),
		lastSweep:  time.Now(),
	}
}

// Allow takes one token from tenant's bucket. When the bucket is empty it returns false
// and how long until a token is available.
func (l *Limiter) Allow(tenant string) (ok bool, retryAfter time.Duration) {
	if l == nil {
		return true, 0
	}
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if now.Sub(l.lastSweep) >= max(l.refill, minSweepInterval) {
		l.sweep(now)
	}
	b := l.buckets[tenant]
	if b == nil {
		if len(l.buckets) >= l.maxTenants {
			l.sweep(now)
			l.evictOldest()
		}
		b = &bucket{lim: rate.NewLimiter(rate.Limit(l.rate), int(l.burst))}
		l.buckets[tenant] = b
	}
	b.last = now
	r := b.lim.ReserveN(now, 1)
	if wait := r.DelayFrom(now); wait > 0 {
		r.CancelAt(now) // refused: give the token back
		return false, wait
	}
	return true, 0
}

// seconds converts s to a Duration rounded up to the nanosecond, saturating instead of
// overflowing for absurdly slow rates.
func seconds(s float64) time.Duration {
	ns := math.Ceil(s * float64(time.Second))
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}

// sweep drops buckets idle long enough to be full again. Callers hold l.mu.
func (l *Limiter) sweep(now time.Time) {
	for k, b := range l.buckets {
		if now.Sub(b.last) >= l.refill {
			delete(l.buckets, k)
		}
	}
	l.lastSweep = now
}

// evictOldest drops the least recently used bucket if the limiter is at its cap.
// Callers hold l.mu.
func (l *Limiter) evictOldest() {
	if len(l.buckets) < l.maxTenants {
		return
	}
	var oldest string
	var at time.Time
	for k, b := range l.buckets {
		if at.IsZero() || b.last.Before(at) {
			oldest, at = k, b.last
		}
	}
	delete(l.buckets, oldest)
}

// String describes l's configuration.
func (l *Limiter) String() string {
	if l == nil {
		return "off"
	}
	return fmt.Sprintf("%g/s,burst=%d", l.rate, int(l.burst))
}

// Check takes a token for tenant. When the bucket is empty it answers 429 with
// Retry-After (whole seconds, rounded up, at least 1) and a JSON error, and returns false;
// the handler must then return without writing.
func (l *Limiter) Check(w http.ResponseWriter, tenant string) bool {
	ok, wait := l.Allow(tenant)
	if !ok {
		WriteTooManyRequests(w, wait)
	}
	return ok
}

// Middleware returns middleware limiting requests by key(r), e.g. the tenant of the
// authenticated principal or a path value.
func (l *Limiter) Middleware(key func(*http.Request) string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if l.Check(w, key(r)) {
				next.ServeHTTP(w, r)
			}
		})
	}
}

// WriteTooManyRequests answers 429 with Retry-After in whole seconds (rounded up, at
// least 1) and the JSON body {"error": "rate limit exceeded"}.
func WriteTooManyRequests(w http.ResponseWriter, retryAfter time.Duration) {
	secs := max(int64(math.Ceil(retryAfter.Seconds())), 1)
	w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	WriteError(w, http.StatusTooManyRequests, "rate limit exceeded")
}

// ParseRate parses a rate limit: "N/s", "N/m" or "N/h", optionally followed by
// ",burst=B" (default: twice the per-second rate, rounded up, at least 1). "off" disables
// limiting and returns rate 0.
func ParseRate(s string) (rate float64, burst int, err error) {
	s = strings.TrimSpace(s)
	if strings.EqualFold(s, "off") {
		return 0, 0, nil
	}
	spec, rest, hasBurst := strings.Cut(s, ",")
	num, unit, ok := strings.Cut(strings.TrimSpace(spec), "/")
	if !ok {
		return 0, 0, fmt.Errorf("rate %q: want N/s, N/m or N/h, e.g. 10/s,burst=20", s)
	}
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || n <= 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		return 0, 0, fmt.Errorf("rate %q: %q is not a positive number", s, num)
	}
	switch strings.TrimSpace(unit) {
	case "s":
		rate = n
	case "m":
		rate = n / 60
	case "h":
		rate = n / 3600
	default:
		return 0, 0, fmt.Errorf("rate %q: unit must be s, m or h", s)
	}
	burst = max(int(math.Ceil(2*rate)), 1)
	if hasBurst {
		k, v, ok := strings.Cut(strings.TrimSpace(rest), "=")
		if !ok || strings.TrimSpace(k) != "burst" {
			return 0, 0, fmt.Errorf("rate %q: want burst=B after the comma", s)
		}
		burst, err = strconv.Atoi(strings.TrimSpace(v))
		if err != nil || burst < 1 {
			return 0, 0, fmt.Errorf("rate %q: burst must be a positive integer", s)
		}
	}
	return rate, burst, nil
}

// Rate is a per-tenant rate limit setting as ParseRate reads it; zero is off.
type Rate struct {
	PerSecond float64
	Burst     int
}

// UnmarshalText parses a rate limit (ParseRate).
func (r *Rate) UnmarshalText(b []byte) error {
	rate, burst, err := ParseRate(string(b))
	if err != nil {
		return err
	}
	*r = Rate{PerSecond: rate, Burst: burst}
	return nil
}

// MarshalText writes r as ParseRate reads it.
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.Limiter().String()), nil }

// Limiter returns the limiter of r; nil (allowing everything) when r is off.
func (r Rate) Limiter() *Limiter { return NewLimiter(r.PerSecond, r.Burst) }
