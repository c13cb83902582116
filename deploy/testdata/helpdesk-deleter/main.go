// Command helpdesk-deleter serves inventory kind "helpdesk", which no Lethe package defines:
// support tickets kept as one JSON file per tenant. It is built only by the acceptance test,
// to show that a new kind is one deleter and inventory entries, with nothing else rebuilt.
package main

import (
	"context"

	"github.com/lethe-erasure/lethe/pkg/deletion"
	"github.com/lethe-erasure/lethe/pkg/metrics"
	"github.com/lethe-erasure/lethe/pkg/service"
)

func main() {
	service.Deleter("helpdesk-deleter", "helpdesk", func(ctx context.Context, env service.Env, _ struct{}) (deletion.Store, []metrics.Check, error) {
		return &ticketStore{}, nil, nil
	})
}
