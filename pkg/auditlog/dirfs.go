package auditlog

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/lethe-erasure/lethe/pkg/deletion"
)

// create writes v as JSON to p unless p exists (ErrExists).
func (s *DirStore) create(p string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return deletion.Permanent(err)
	}
	if err := s.mkdirs(filepath.Dir(p)); err != nil {
		return err
	}
	return s.writeFile(p, b, true)
}

// replace writes v as JSON to p, replacing it atomically.
func (s *DirStore) replace(p string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return deletion.Permanent(err)
	}
	return s.writeFile(p, b, false)
}

// writeFile writes b to a synced temporary file and links (exclusive) or renames it to p,
// then syncs p's directory.
func (s *DirStore) writeFile(p string, b []byte, exclusive bool) error {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	tmp := filepath.Join(s.tmpDir(), hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	if exclusive {
		err = os.Link(tmp, p)
		os.Remove(tmp)
		if errors.Is(err, fs.ErrExist) {
			return ErrExists
		}
	} else {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return err
	}
	return syncDir(filepath.Dir(p))
}

// mkdirs creates d and its missing parents, syncing each parent that gained an entry.
func (s *DirStore) mkdirs(d string) error {
	if _, err := os.Stat(d); err == nil {
		return nil
	}
	parent := filepath.Dir(d)
	if parent != d {
		if err := s.mkdirs(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(d, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(parent)
}

func syncDir(d string) error {
	f, err := os.Open(d)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// readJSON decodes the file at p into v: ErrNotFound when it does not exist, Permanent when
// it does not decode.
func readJSON(p string, v any) error {
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNotFound
	}
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return deletion.Permanent(fmt.Errorf("malformed item %s: %w", filepath.Base(p), err))
	}
	return nil
}

// listDir returns the names of the regular files in d, none when d does not exist.
func listDir(d string) ([]string, error) {
	ents, err := os.ReadDir(d)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// name is the file name component of an id.
func name(id string) string {
	if len(id) > 100 {
		sum := sha256.Sum256([]byte(id))
		return "h" + hex.EncodeToString(sum[:])
	}
	return "x" + hex.EncodeToString([]byte(id))
}
