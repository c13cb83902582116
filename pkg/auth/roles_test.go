package auth

import (
	"testing"

	"go.uber.org/zap"
)

// Roles travel in the tokens file and in the JWT "roles" claim; a principal without them
// holds none.
func TestRoles(t *testing.T) {
	tok, hash := NewToken()
	other, otherHash := NewToken()
	a, err := New(Config{Tokens: []Token{
		{Name: "dpo", SHA256: hash, Tenants: []string{"acme"}, Roles: []string{RoleApprover}},
		{Name: "ops", SHA256: otherHash, Tenants: []string{"acme"}},
	}, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	if p, err := a.AuthenticateToken(tok); err != nil || !p.Has(RoleApprover) {
		t.Errorf("token with the approver role: %+v %v", p, err)
	}
	if p, err := a.AuthenticateToken(other); err != nil || p.Has(RoleApprover) {
		t.Errorf("token without roles: %+v %v", p, err)
	}
	j := jwtAuth(t, JWTConfig{HS256Secret: hsSecret, Issuer: "https://idp.example", Audience: "lethe"})
	for _, tc := range []struct {
		roles any
		want  bool
	}{{[]string{"approver"}, true}, {"approver", true}, {nil, false}, {[]string{"viewer"}, false}} {
		c := claims(map[string]any{"roles": tc.roles})
		p, err := j.AuthenticateToken(signJWT(t, map[string]any{"alg": "HS256", "typ": "JWT"}, c, hsSecret))
		if err != nil || p.Has(RoleApprover) != tc.want {
			t.Errorf("roles %v: %+v %v", tc.roles, p, err)
		}
	}
}
