package deploy

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// storeClients are the store SDKs a service may link, each with the services that use it.
// Every other service must not link it: configuration is split by client, so a deleter
// links (and documents) only its own backend's client. A new kind's client is added here
// with its deleter.
var storeClients = map[string][]string{
	"github.com/aws/aws-sdk-go-v2/service/s3": {"dataset-deleter"},
	"github.com/qdrant/go-client/qdrant":      {"qdrant-deleter"},
	"github.com/redis/go-redis/v9":            {"redis-deleter"},
}

// TestServicesLinkOnlyTheirOwnStoreClient lists each service's dependencies (go list -deps)
// and checks them against storeClients.
func TestServicesLinkOnlyTheirOwnStoreClient(t *testing.T) {
	for _, sv := range services {
		t.Run(sv.name, func(t *testing.T) {
			cmd := exec.Command("go", "list", "-deps", "./services/"+sv.name)
			cmd.Dir = ".."
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps: %v", err)
			}
			deps := strings.Fields(string(out))
			if !slices.Contains(deps, "github.com/lethe-erasure/lethe/pkg/service") {
				t.Fatalf("%d dependencies without pkg/service: the listing is wrong", len(deps))
			}
			for client, users := range storeClients {
				linked := slices.Contains(deps, client)
				if want := slices.Contains(users, sv.name); linked != want {
					t.Errorf("links %s: %v, want %v", client, linked, want)
				}
			}
		})
	}
}
