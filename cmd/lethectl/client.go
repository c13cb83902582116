package main

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/lethe-erasure/lethe/pkg/apiclient"
)

// apiClient returns a client of the intake API for --server and --token.
func (c *cli) apiClient() (*apiclient.Client, error) {
	base := c.env(c.g.server, "LETHE_SERVER", defaultServer)
	cl, err := apiclient.New(base, c.env(c.g.token, "LETHE_TOKEN", ""), "lethectl", 30*time.Second)
	if err != nil {
		return nil, usageErrorf("--server: %v", err)
	}
	return cl, nil
}

// apiExitCode is the exit code of an API answer: 2 for a refused request, 3 for one not
// found, else 1.
func apiExitCode(e *apiclient.APIError) int {
	switch e.Status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return exitUsage
	case http.StatusNotFound:
		return exitNotFound
	}
	return exitError
}

// withHint adds to an unauthenticated answer where lethectl takes its token.
func withHint(err error) error {
	var ae *apiclient.APIError
	if errors.As(err, &ae) && ae.Status == http.StatusUnauthorized {
		return fmt.Errorf("%w: pass --token or set LETHE_TOKEN", err)
	}
	return err
}
