package intake

import (
	"net/http"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/metrics"
)

// authenticate wraps h: without an Auth every caller is let through (authentication
// disabled); otherwise a caller without a valid bearer credential gets 401 and a known
// caller's principal is put in the request context for authorize.
func (s *Service) authenticate(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.Auth == nil {
			h(w, r)
			return
		}
		p, err := s.Auth.Authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="lethe"`)
			s.reject(w, http.StatusUnauthorized, metrics.ReasonUnauthenticated, "unauthenticated: a valid bearer token is required")
			return
		}
		h(w, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	}
}

// authorize answers 403 and returns false unless the caller may act for tenant.
func (s *Service) authorize(w http.ResponseWriter, r *http.Request, tenant string) bool {
	if s.Auth == nil {
		return true
	}
	p, ok := auth.PrincipalFrom(r.Context())
	if !ok {
		s.reject(w, http.StatusUnauthorized, metrics.ReasonUnauthenticated, "unauthenticated")
		return false
	}
	if err := p.Authorize(tenant); err != nil {
		s.reject(w, http.StatusForbidden, metrics.ReasonForbidden, "forbidden: the token may not act for this tenant")
		return false
	}
	return true
}

// limit answers 429 with Retry-After and returns false when tenant is over its rate.
func (s *Service) limit(w http.ResponseWriter, tenant string) bool {
	if ok, wait := s.Limiter.Allow(tenant); !ok {
		metrics.Or(s.Metrics).Rejected.WithLabelValues(metrics.ReasonRateLimited).Inc()
		auth.WriteTooManyRequests(w, wait)
		return false
	}
	return true
}

// listTenant is the tenant a list request is about: the one asked for, or, when none is,
// the caller's only tenant; "" (every tenant) only for a wildcard caller or without auth.
func (s *Service) listTenant(w http.ResponseWriter, r *http.Request, asked string) (string, bool) {
	if s.Auth == nil {
		return asked, true
	}
	p, _ := auth.PrincipalFrom(r.Context())
	if asked == "" && !p.May(auth.Wildcard) {
		if len(p.Tenants) != 1 {
			writeError(w, http.StatusBadRequest, "tenant is required")
			return "", false
		}
		asked = p.Tenants[0]
	}
	if asked == "" {
		return "", true
	}
	return asked, s.authorize(w, r, asked)
}
