package deletion

import (
	"context"
	"slices"
	"time"

	"github.com/lethe-erasure/lethe/pkg/inventory"
)

// ProbeLimits bound a probe in each location: at most Items items read and Time spent.
type ProbeLimits struct {
	Items int
	Time  time.Duration
}

// DefaultProbeLimits are the bounds a probe uses where none are configured.
var DefaultProbeLimits = ProbeLimits{Items: 10000, Time: 10 * time.Second}

// Defaults returns lim with DefaultProbeLimits' value for each field that is not positive.
func (lim ProbeLimits) Defaults() ProbeLimits {
	if lim.Items <= 0 {
		lim.Items = DefaultProbeLimits.Items
	}
	if lim.Time <= 0 {
		lim.Time = DefaultProbeLimits.Time
	}
	return lim
}

// Probed is what a probe found in one location outside the inventory: the location as
// discovery named it, how many items hold an identifier of the subject, and, when the
// location could not be read whole (unreadable, or a bound reached), why. A location
// with Unexamined set is never clean, whatever Found says. No field holds a value read
// from the backend.
type Probed struct {
	Location   string
	Found      int64
	Unexamined string
}

// Identifiers returns s's id and session ids, without empty or repeated ones.
func (s Subject) Identifiers() []string {
	var ids []string
	for _, id := range append([]string{s.ID}, s.Sessions...) {
		if id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

// EachProbed answers one Probed per location of locs, in order: a location of another kind
// than kind is unexamined, each other one is what probe answers for it. The first error of
// probe ends the call.
func EachProbed(locs []Uncovered, kind string, probe func(Uncovered) (Probed, error)) ([]Probed, error) {
	out := make([]Probed, 0, len(locs))
	for _, loc := range locs {
		if loc.Kind != kind {
			out = append(out, Probed{Location: loc.Location, Unexamined: "not a " + kind + " location"})
			continue
		}
		p, err := probe(loc)
		if err != nil {
			return nil, err
		}
		p.Location = loc.Location
		out = append(out, p)
	}
	return out, nil
}

// Prober is an optional capability of a Store, found by type assertion: Probe looks for
// the identifiers of s (its id and sessions) in locations that discovery reported outside
// inv (Uncovered of the store's kind, as its own Discover writes them), exactly, as Erase
// matches them, within s's tenant where the location allows, and changes nothing. It
// returns one Probed per location, in order, each bounded by lim; for a tenant-scope s it
// returns nil. A location it cannot parse or read is Unexamined, never zero. Errors of the
// whole call are classified as Verify's.
type Prober interface {
	Probe(ctx context.Context, inv *inventory.Inventory, locs []Uncovered, s Subject, lim ProbeLimits) ([]Probed, error)
}
