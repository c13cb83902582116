package intake

import (
	"fmt"
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/lethe-erasure/lethe/pkg/auth"
	"github.com/lethe-erasure/lethe/pkg/metrics"
)

// CheckBind refuses to serve open mode (authn nil or disabled) on an address that is not
// loopback: without credentials any caller that reaches the port may erase.
func CheckBind(addr string, authn *auth.Authenticator) error {
	if authn != nil && !authn.Disabled() || auth.LoopbackAddr(addr) {
		return nil
	}
	return fmt.Errorf("intake: without authentication the intake listens on loopback only, not %q: configure LETHE_TOKENS or JWT settings, or listen on 127.0.0.1", addr)
}

// guard protects the API from browsers: it refuses a Host that is not allowed (DNS
// rebinding), a state-changing request from another origin (cross-site forms and
// fetches) and a body that is not JSON.
//
// Allowed hosts are AllowedHosts; when it is empty, any host with authentication on and
// loopback names only in open mode. An Origin is allowed when its host is the request's
// Host or it is listed in AllowedOrigins.
func (s *Service) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.hostAllowed(r.Host) {
			s.reject(w, http.StatusMisdirectedRequest, metrics.ReasonForbidden, "host not allowed")
			return
		}
		if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions {
			next.ServeHTTP(w, r)
			return
		}
		if !s.originAllowed(r) {
			s.reject(w, http.StatusForbidden, metrics.ReasonForbidden, "forbidden: cross-origin requests are not accepted")
			return
		}
		if r.ContentLength != 0 {
			if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
				s.reject(w, http.StatusUnsupportedMediaType, metrics.ReasonInvalid, "Content-Type must be application/json")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (s *Service) open() bool { return s.Auth == nil || s.Auth.Disabled() }

func (s *Service) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	if len(s.AllowedHosts) > 0 {
		return slices.ContainsFunc(s.AllowedHosts, func(a string) bool { return strings.EqualFold(a, host) || strings.EqualFold(a, hostport) })
	}
	return !s.open() || auth.LoopbackAddr(net.JoinHostPort(host, "0"))
}

func (s *Service) originAllowed(r *http.Request) bool {
	if site := r.Header.Get("Sec-Fetch-Site"); site == "cross-site" || site == "same-site" {
		return slices.Contains(s.AllowedOrigins, r.Header.Get("Origin"))
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return true // not a browser's cross-origin request
	}
	if slices.Contains(s.AllowedOrigins, origin) {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, r.Host)
}

// Operator serves h, guarded like the API, to operators only (auth.Operators): metrics
// carry tenant labels and discovery scans backends, so neither is for a tenant's app.
func (s *Service) Operator(h http.Handler) http.Handler {
	return s.guard(s.Auth.Operators(h))
}
