// Package console is the privacy team's web console: static HTML, CSS and vanilla
// JavaScript embedded in the binary and served by the intake at /console/. The pages hold
// no data: the script calls the intake's JSON API with the operator's bearer token, kept
// in sessionStorage, so the console sees exactly what the token may see (its tenants).
// Identifiers the operator types (a subject id, session ids) travel only in POST bodies,
// never in a URL, a page title or a log line; routes name request ids and hold ids only.
package console

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Handler serves the console's files under /console/, with a content security policy
// that allows only the console's own scripts and the API of the same origin.
func Handler() http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix("/console/", http.FileServer(http.FS(sub)))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; form-action 'self'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-store")
		files.ServeHTTP(w, r)
	})
}
