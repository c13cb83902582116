package auditlog

import "testing"

func TestHoldsShortIdentifiers(t *testing.T) {
	for _, tc := range []struct {
		field, id string
		want      bool
	}{
		{"chunk-0", "0", false},
		{"/v1/chat", "/", false},
		{"/orders/0", "0", true},
		{"0", "0", true},
		{"q=42&x=1", "42", true},
		{"gpt-4o-mini", "4o", false},
		{"/customers/cust-1/orders", "cust-1", true},
		{"/customers/cust-10/orders", "cust-1", false},
		{"anna.schmidt@example.de", "anna.schmidt@example.de", true},
	} {
		if got := holds(tc.field, tc.id); got != tc.want {
			t.Errorf("holds(%q, %q) = %v, want %v", tc.field, tc.id, got, tc.want)
		}
	}
}
