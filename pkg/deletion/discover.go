package deletion

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// DiscoverOptions bound and steer a discovery run.
type DiscoverOptions struct {
	Fields  []string // identity-like field names (customer_id, email, …)
	Sample  int      // items sampled per location
	Tenants []string // known tenants, for template matching
}

// Uncovered is a location of a backend that holds subject-shaped data no inventory store
// covers. Reason names field names or patterns, never values.
type Uncovered struct {
	Kind, Location, Reason string
	Count                  int64
}

// Discoverer is an optional capability of a Store, found by type assertion: it enumerates
// its backend and reports the locations that look like they hold subject data but that no
// store of inv covers. It reads samples only, never writes, and its report holds no value
// it read.
type Discoverer interface {
	Discover(ctx context.Context, inv *inventory.Inventory, opts DiscoverOptions) ([]Uncovered, error)
}
