package testenv

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"

	"github.com/lethe-erasure/lethe/pkg/schemareg"
)

// Registry starts an in-process Schema Registry (franz-go's srfake) and returns a Codec on
// it with Lethe's schemas registered and the framings of setting (LETHE_FRAMING's syntax,
// schemareg.ParseFramings), and the registry's URL. It is stopped when t ends.
func Registry(t testing.TB, setting string) (*schemareg.Codec, string) {
	t.Helper()
	framings, err := schemareg.ParseFramings(setting)
	if err != nil {
		t.Fatal(err)
	}
	reg := srfake.New()
	t.Cleanup(reg.Close)
	cl, err := sr.NewClient(sr.URLs(reg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	c := schemareg.New(cl)
	c.Framings = framings
	if err := c.RegisterAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	return c, reg.URL()
}
