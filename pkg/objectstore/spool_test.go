package objectstore

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// A spool gives back exactly what was written, in memory while small and from a temporary
// file once past spoolMemory, and close leaves no file behind.
func TestSpool(t *testing.T) {
	for _, size := range []int{0, 10, spoolMemory, spoolMemory + 1, 3*spoolMemory + 7} {
		want := make([]byte, size)
		for i := range want {
			want[i] = byte(i * 7)
		}
		sp := newSpool()
		for rest := want; len(rest) > 0; {
			n := min(len(rest), 100_000)
			if _, err := sp.Write(rest[:n]); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if onDisk := sp.file != nil; onDisk != (size > spoolMemory) {
			t.Errorf("%d bytes: on disk %v", size, onDisk)
		}
		var name string
		if sp.file != nil {
			name = sp.file.Name()
		}
		body, err := sp.body()
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(body)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%d bytes: read back %d bytes, equal %v, %v", size, len(got), bytes.Equal(got, want), err)
		}
		sp.close()
		if name != "" {
			if _, err := os.Stat(name); !os.IsNotExist(err) {
				t.Errorf("%d bytes: the temporary file is still there (%v)", size, err)
			}
		}
	}
}
