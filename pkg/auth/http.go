package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"

	"go.uber.org/zap"
)

type principalKey struct{}

// WithPrincipal returns a copy of ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal stored by WithPrincipal (or Middleware) and whether
// there was one.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// ParseBearer extracts the credential from an Authorization header value "Bearer <cred>"
// (scheme case-insensitive, RFC 6750). Errors wrap ErrUnauthenticated and never contain
// the value.
func ParseBearer(value string) (string, error) {
	value = strings.TrimSpace(value)
	if value == "" {
		return "", fmt.Errorf("%w: missing bearer token", ErrUnauthenticated)
	}
	scheme, cred, ok := strings.Cut(value, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", fmt.Errorf("%w: authorization scheme must be Bearer", ErrUnauthenticated)
	}
	cred = strings.TrimSpace(cred)
	if cred == "" || strings.ContainsAny(cred, " \t") {
		return "", fmt.Errorf("%w: malformed bearer token", ErrUnauthenticated)
	}
	return cred, nil
}

// Authenticate authenticates r by its "Authorization: Bearer <credential>" header.
// Errors wrap ErrUnauthenticated (answer 401); tenant checks are the caller's (May).
func (a *Authenticator) Authenticate(r *http.Request) (Principal, error) {
	return a.AuthenticateHeader(r.Header.Get("Authorization"))
}

// Middleware authenticates every request before next. On failure it answers 401 with
// "WWW-Authenticate: Bearer …" and a JSON body {"error": "…"} and does not call next;
// otherwise it stores the principal in the request context (PrincipalFrom). Health,
// readiness and metrics endpoints belong outside it.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		if err != nil {
			a.log.Info("authentication failed", zap.String("method", r.Method), zap.Error(err))
			challenge := `Bearer realm="lethe"`
			if r.Header.Get("Authorization") != "" {
				challenge += `, error="invalid_token"`
			}
			w.Header().Set("WWW-Authenticate", challenge)
			w.Header().Set("Cache-Control", "no-store")
			WriteError(w, http.StatusUnauthorized, err.Error())
			return
		}
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

// StatusOf maps an error of this package to an HTTP status: 401 for ErrUnauthenticated,
// 403 for ErrForbidden, 500 otherwise.
func StatusOf(err error) int {
	switch {
	case errors.Is(err, ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, ErrForbidden):
		return http.StatusForbidden
	}
	return http.StatusInternalServerError
}

// WriteError answers status with the JSON body {"error": msg}.
func WriteError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// Operators serves next to operators only: principals that may act for every tenant
// (Wildcard). It answers 401 without a valid credential and 403 for a tenant's
// principal. A nil or disabled a lets every request through.
func (a *Authenticator) Operators(next http.Handler) http.Handler {
	if a == nil || a.Disabled() {
		return next
	}
	return a.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, _ := PrincipalFrom(r.Context()); !slices.Contains(p.Tenants, Wildcard) {
			WriteError(w, http.StatusForbidden, "forbidden: an operator's token (every tenant) is required")
			return
		}
		next.ServeHTTP(w, r)
	}))
}

// LoopbackAddr reports whether the listen address addr (host:port) binds this machine's
// loopback interface only.
func LoopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
