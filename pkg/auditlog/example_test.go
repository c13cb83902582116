package auditlog_test

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/lethe-erasure/lethe/pkg/auditlog"
	"github.com/lethe-erasure/lethe/pkg/subject"
)

// A RAG app records each retrieval with a Writer: the store receives the subject's keyed
// pseudonym and a fingerprint of the query, never the customer id, session id or query
// text. The audit_log store of an erasure is then verified, not erased.
func ExampleWriter() {
	dir, err := os.MkdirTemp("", "auditlog-example-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	store, err := auditlog.OpenDir(dir) // production: the DynamoDB store (auditlog/dynamo)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()
	key, err := subject.NewKey("k1", []byte("a pseudonym key of at least 32 bytes"))
	if err != nil {
		fmt.Println(err)
		return
	}
	w := auditlog.NewWriter(store, key)
	ctx := context.Background()
	err = w.Query(ctx, "acme", "anna@example.com", "sess-42", "what did I order last week?",
		[]string{"chunk-17", "chunk-90"}, "gpt-x", "/chat")
	if err != nil {
		fmt.Println(err)
		return
	}

	events, err := store.Events(ctx, "acme", key.Pseudonym("acme", "anna@example.com"))
	if err != nil {
		fmt.Println(err)
		return
	}
	e := events[0]
	stored := fmt.Sprintf("%+v", e)
	fmt.Println(len(events), "event of type", e.Type, "for chunks", e.ChunkIDs)
	fmt.Println("holds the customer id:", strings.Contains(stored, "anna@example.com"))
	fmt.Println("holds the session id:", strings.Contains(stored, "sess-42"))
	fmt.Println("holds the query text:", strings.Contains(stored, "last week"))
	// Output:
	// 1 event of type query for chunks [chunk-17 chunk-90]
	// holds the customer id: false
	// holds the session id: false
	// holds the query text: false
}
