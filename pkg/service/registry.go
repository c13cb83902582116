package service

import (
	"context"
	"fmt"
	"os"

	"github.com/lethe-erasure/lethe/pkg/schemareg"
)

// registryFromEnv returns the Schema Registry codec of $LETHE_SCHEMA_REGISTRY_URL with
// Lethe's schemas registered and $LETHE_FRAMING's framings, or nil when no registry is
// configured (then every framing must be single-object, and registry-framed records are
// dead-lettered as of unknown schema).
func registryFromEnv(ctx context.Context) (*schemareg.Codec, error) {
	framings, err := schemareg.ParseFramings(os.Getenv("LETHE_FRAMING"))
	if err != nil {
		return nil, err
	}
	url := os.Getenv("LETHE_SCHEMA_REGISTRY_URL")
	if url == "" {
		if framings.UsesRegistry() {
			return nil, fmt.Errorf("service: LETHE_FRAMING frames records for a registry, and LETHE_SCHEMA_REGISTRY_URL is not set")
		}
		return nil, nil
	}
	c, err := schemareg.Dial(url)
	if err != nil {
		return nil, err
	}
	c.Framings = framings
	if err := c.RegisterAll(ctx); err != nil {
		return nil, fmt.Errorf("service: schema registry: %w", err)
	}
	return c, nil
}
