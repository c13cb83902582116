package datasetstore

import "strings"

// A find hands the listing it took of a location to the erase that follows it
// (objectstore.Handoff), so that an erasure lists each location twice (erase, verify)
// instead of three times.
//
// An erase working from a listing a few milliseconds old leaves nothing behind for good
// that its own listing would have caught: a version that became current in between makes
// the erase's conditional rewrite fail or list the key again (dropHeldVersions), and an
// object written after the listing that holds the subject is reported by the
// verification, which always lists anew, so the erasure is retried.

// listingKey names what a listing of l depends on: its expanded prefix (bucket and key
// prefix) and the objects it excludes.
func listingKey(l location) string {
	return l.name + "\x00" + strings.Join(l.exclude, "\x00")
}
