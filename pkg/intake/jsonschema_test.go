package intake_test

import (
	"bytes"
	"io/fs"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/lethe-erasure/lethe/pkg/event"
	"github.com/lethe-erasure/lethe/pkg/intake"
	"github.com/lethe-erasure/lethe/schemas"
)

// The published JSON Schema of JSON intake records and the Go validation agree: every
// example is accepted by both or refused by both.
func TestJSONRecordSchemaAgreesWithValidation(t *testing.T) {
	raw, err := fs.ReadFile(schemas.FS, "intake.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("intake.schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("intake.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	svc := &intake.Service{Policy: intake.DefaultPolicy()}
	long := strings.Repeat("x", 257)
	examples := []struct {
		json  string
		valid bool
	}{
		{`{"tenant_id":"acme","subject_id":"cust-1","regulation":"GDPR"}`, true},
		{`{"tenant_id":"acme","subject_id":"cust-1","session_ids":["s1","s2"],"regulation":"LGPD","scope":"SUBJECT","idempotency_key":"k-1","submitted_at":"2026-12-01T09:00:00Z"}`, true},
		{`{"tenant_id":"acme","regulation":"PDPA","scope":"TENANT"}`, true},
		{`{"tenant_id":"acme","subject_id":"","regulation":"GDPR","scope":"TENANT"}`, true},
		{`{"tenant_id":"acme","subject_id":"Renée Ø","regulation":"CCPA"}`, true},
		{`{"tenant_id":"acme","regulation":"GDPR"}`, false},                                      // no subject
		{`{"tenant_id":"acme","subject_id":"","regulation":"GDPR"}`, false},                      // empty subject
		{`{"tenant_id":"acme","subject_id":"   ","regulation":"GDPR"}`, false},                   // blank subject
		{`{"tenant_id":"acme","subject_id":"a\u0007b","regulation":"GDPR"}`, false},              // control character
		{`{"tenant_id":"acme","subject_id":"` + long + `","regulation":"GDPR"}`, false},          // too long
		{`{"tenant_id":"Acme","subject_id":"c","regulation":"GDPR"}`, false},                     // upper-case tenant
		{`{"tenant_id":"-acme","subject_id":"c","regulation":"GDPR"}`, false},                    // tenant starts with '-'
		{`{"subject_id":"c","regulation":"GDPR"}`, false},                                        // no tenant
		{`{"tenant_id":"acme","subject_id":"c","regulation":"HIPAA"}`, false},                    // unknown regulation
		{`{"tenant_id":"acme","subject_id":"c"}`, false},                                         // no regulation
		{`{"tenant_id":"acme","subject_id":"c","regulation":"GDPR","scope":"ALL"}`, false},       // unknown scope
		{`{"tenant_id":"acme","subject_id":"c","regulation":"GDPR","scope":"TENANT"}`, false},    // tenant scope with subject
		{`{"tenant_id":"acme","session_ids":["s"],"regulation":"GDPR","scope":"TENANT"}`, false}, // tenant scope with sessions
		{`{"tenant_id":"acme","subject_id":"c","session_ids":[""],"regulation":"GDPR"}`, false},  // empty session id
		{`{"tenant_id":"acme","subject_id":"c","regulation":"GDPR","source":"me"}`, false},       // unknown field
		{`{"tenant_id":"acme","subject_id":"c","regulation":"GDPR","idempotency_key":"` + long + `"}`, false},
		{`{"tenant_id":"acme","subject_id":"c","regulation":"GDPR","submitted_at":"yesterday"}`, false},
		{`{"tenant_id":"acme","subject_id":1,"regulation":"GDPR"}`, false}, // wrong type
	}
	for _, ex := range examples {
		inst, err := jsonschema.UnmarshalJSON(strings.NewReader(ex.json))
		if err != nil {
			t.Fatalf("%s: %v", ex.json, err)
		}
		schemaErr := sch.Validate(inst)
		goErr := goValidate(svc, ex.json)
		if (schemaErr == nil) != ex.valid || (goErr == nil) != ex.valid {
			t.Errorf("%.90s: want valid=%v; JSON Schema says %v, Go says %v", ex.json, ex.valid, schemaErr, goErr)
		}
	}
}

func goValidate(svc *intake.Service, text string) error {
	j, err := intake.DecodeJSONRecord([]byte(text))
	if err != nil {
		return err
	}
	in := event.IntakeRequest{TenantID: j.TenantID, SubjectID: j.SubjectID, SessionIDs: j.SessionIDs, Regulation: j.Regulation, Scope: j.Scope, IdempotencyKey: j.IdempotencyKey}
	return svc.Validate(&in)
}
