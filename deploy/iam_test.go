package deploy

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// policyBlock is a "### name" heading of docs/aws-iam.md followed by its JSON policy.
var policyBlock = regexp.MustCompile("(?s)\n### ([a-z0-9-]+)\n.*?```json\n(.*?)```")

// TestIAMPolicies parses the IAM policy of every workload in docs/aws-iam.md: each is
// valid JSON of version 2012-10-17 with Allow statements only; every service has one (the
// deleters of a store without AWS share qdrant-deleter's, as the page says); every deleter
// may read data keys with GetItem and BatchGetItem (package worker reads the keys of the
// requests in hand together); only the tables Job may create tables, only the S3 deleters touch S3, and no policy grants a
// wildcard action or dynamodb:Scan (an operator's rewrap, no workload's).
func TestIAMPolicies(t *testing.T) {
	b, err := os.ReadFile("../docs/aws-iam.md")
	if err != nil {
		t.Fatal(err)
	}
	policies := map[string][]string{} // workload -> actions
	for _, m := range policyBlock.FindAllSubmatch(b, -1) {
		var p struct {
			Version   string
			Statement []struct {
				Effect   string
				Action   []string
				Resource any
			}
		}
		if err := json.Unmarshal(m[2], &p); err != nil {
			t.Errorf("policy %s: %v", m[1], err)
			continue
		}
		if p.Version != "2012-10-17" || len(p.Statement) == 0 {
			t.Errorf("policy %s: version %q, %d statements", m[1], p.Version, len(p.Statement))
		}
		for _, s := range p.Statement {
			if s.Effect != "Allow" || s.Resource == nil || len(s.Action) == 0 {
				t.Errorf("policy %s: statement %+v", m[1], s)
			}
			policies[string(m[1])] = append(policies[string(m[1])], s.Action...)
		}
	}
	shared := map[string]string{"redis-deleter": "qdrant-deleter", "postgres-deleter": "qdrant-deleter", "webhook-deleter": "qdrant-deleter"}
	for _, s := range services {
		name := s.name
		if policies[name] == nil && shared[name] != "" && strings.Contains(string(b), "`"+name+"`") {
			name = shared[name]
		}
		if policies[name] == nil {
			t.Errorf("no IAM policy for %s", s.name)
		}
		deleter := s.name != "intake" && s.name != "aggregator"
		if deleter && !(slices.Contains(policies[name], "dynamodb:GetItem") && slices.Contains(policies[name], "dynamodb:BatchGetItem")) {
			t.Errorf("policy %s: a deleter reads data keys with dynamodb:GetItem and dynamodb:BatchGetItem; it allows %v", name, policies[name])
		}
	}
	if !slices.Contains(policies["lethe-tables"], "dynamodb:CreateTable") {
		t.Error("the tables Job's policy does not allow dynamodb:CreateTable")
	}
	for name, actions := range policies {
		for _, a := range actions {
			switch {
			case strings.Contains(a, "*") || a == "dynamodb:Scan":
				t.Errorf("policy %s grants %s", name, a)
			case a == "dynamodb:CreateTable" && name != "lethe-tables":
				t.Errorf("policy %s grants dynamodb:CreateTable: only the tables Job creates tables", name)
			case strings.HasPrefix(a, "s3:") && name != "dataset-deleter" && name != "s3prefix-deleter":
				t.Errorf("policy %s grants %s: only the S3 deleters touch S3", name, a)
			}
		}
	}
}
