// Command configdoc writes docs/configuration.md from the services' declared settings
// (catalog.Markdown): to the file named by -o, or to stdout.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/lethe-erasure/lethe/pkg/catalog"
)

func main() {
	out := flag.String("o", "", "file to write (default stdout)")
	flag.Parse()
	var b bytes.Buffer
	if err := catalog.Markdown(&b); err != nil {
		fmt.Fprintf(os.Stderr, "configdoc: %v\n", err)
		os.Exit(1)
	}
	var err error
	if *out == "" {
		_, err = os.Stdout.Write(b.Bytes())
	} else {
		err = os.WriteFile(*out, b.Bytes(), 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "configdoc: %v\n", err)
		os.Exit(1)
	}
}
