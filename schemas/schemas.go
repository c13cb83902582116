// Package schemas holds the Avro schemas of Lethe's events, the source of truth for their
// wire format. The current schemas sit at the root; every version ever released is kept
// under released/<name>/vN.avsc so that readers can decode old records and tests can prove
// each change backward compatible.
package schemas

import "embed"

// FS holds the current schemas (<name>.avsc), the released ones (released/<name>/vN.avsc)
// and the JSON Schema of JSON intake records (intake.schema.json).
//
//go:embed *.avsc *.json released
var FS embed.FS
