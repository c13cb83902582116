package deletion_test

import (
	"testing"

	"github.com/lethe-erasure/lethe/pkg/deletion"
)

func TestIdentityField(t *testing.T) {
	def := deletion.DiscoverOptions{}
	for name, want := range map[string]bool{
		"customer_id": true, "Customer-ID": true, "metadata.customer_id": true, "EMAIL": true, "thread_id": true,
		"customer_idx": false, "label": false, "email.verified": false, "": false,
	} {
		if got := def.IdentityField(name); got != want {
			t.Errorf("IdentityField(%q) = %v, want %v", name, got, want)
		}
	}
	own := deletion.DiscoverOptions{Fields: []string{"kundennummer"}}
	if !own.IdentityField("kundennummer") || own.IdentityField("customer_id") {
		t.Error("configured fields do not replace the defaults")
	}
	if d := (deletion.DiscoverOptions{}).Defaults(); d.Sample != deletion.DefaultSample || len(d.Fields) != len(deletion.DefaultFields) {
		t.Errorf("Defaults() = %+v", d)
	}
	if !deletion.PersonalValue("write to jane.doe@example.com") || deletion.PersonalValue("order 17 shipped") {
		t.Error("PersonalValue does not follow the pii patterns")
	}
}
