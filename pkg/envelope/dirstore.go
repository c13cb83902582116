package envelope

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"

	"github.com/lethe-erasure/lethe/pkg/deletion"
)

// File tags: the first byte of every key file.
const (
	tagKey       = 'K' // followed by the wrapped key
	tagTombstone = 'T' // the key was destroyed; nothing follows
)

// DirKeyStore is a durable KeyStore in a local directory, for the standalone process: one
// file per id in keys/, named "x" + hex(id) ("h" + hex(sha256(id)) for ids longer than 100
// bytes), holding a tag byte and the wrapped key, or a one-byte tombstone.
//
// Create writes a synced temporary file and hard-links it to its name, so a create is
// exclusive and never leaves a partial file. Destroy atomically renames a synced tombstone
// over the key file, then overwrites the old file's bytes with zeros through a descriptor
// opened before the rename and fsyncs it; Replace does the same with the new wrapped key.
// The directory is fsynced after every change, so an acknowledged call survives a crash.
//
// Overwriting is best effort: a journaling or copy-on-write filesystem, a snapshot, a
// backup or an SSD's wear levelling may keep the old bytes. What remains is a data key
// wrapped by the KEK, useless without it; keep the KEK away from this directory and its
// backups. Tombstones are kept forever so that a shredded id cannot get a new key.
//
// DirKeyStore is safe for concurrent use within one process. Two processes must not open
// the same directory: changes are serialised by an in-process mutex only.
type DirKeyStore struct {
	root string
	mu   sync.RWMutex
}

var (
	_ KeyStore = (*DirKeyStore)(nil)
	_ Replacer = (*DirKeyStore)(nil)
)

// NewDirKeyStore opens (creating it if needed, mode 0700) the store in dir. Temporary files
// left by a crash are removed.
func NewDirKeyStore(dir string) (*DirKeyStore, error) {
	s := &DirKeyStore{root: dir}
	if err := os.RemoveAll(s.tmpDir()); err != nil {
		return nil, fmt.Errorf("envelope: open key store: %w", err)
	}
	for _, d := range []string{dir, s.keyDir(), s.tmpDir()} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("envelope: open key store: %w", err)
		}
	}
	if err := syncDir(dir); err != nil {
		return nil, fmt.Errorf("envelope: open key store: %w", err)
	}
	return s, nil
}

// Create stores wrapped for id (KeyStore).
func (s *DirKeyStore) Create(ctx context.Context, id string, wrapped []byte) error {
	if err := check(ctx, id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.path(id)
	err := s.link(p, append([]byte{tagKey}, wrapped...))
	if !errors.Is(err, fs.ErrExist) {
		return wrapDir("create", err)
	}
	b, err := readKeyFile(p)
	switch {
	case err != nil:
		return wrapDir("create", err)
	case b[0] == tagTombstone:
		return ErrShredded
	default:
		return ErrExists
	}
}

// Get returns the wrapped key of id (KeyStore).
func (s *DirKeyStore) Get(ctx context.Context, id string) ([]byte, error) {
	if err := check(ctx, id); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	b, err := readKeyFile(s.path(id))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, ErrShredded
	case err != nil:
		return nil, wrapDir("get", err)
	case b[0] == tagTombstone:
		return nil, ErrShredded
	default:
		return b[1:], nil
	}
}

// Destroy tombstones id and overwrites its key file (KeyStore).
func (s *DirKeyStore) Destroy(ctx context.Context, id string) error {
	if err := check(ctx, id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.path(id)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return wrapDir("destroy", s.link(p, []byte{tagTombstone}))
	}
	if err != nil {
		return wrapDir("destroy", err)
	}
	defer f.Close()
	return wrapDir("destroy", s.replaceFile(p, f, []byte{tagTombstone}, nil))
}

// Replace stores wrapped for id if the stored key equals old (Replacer).
func (s *DirKeyStore) Replace(ctx context.Context, id string, old, wrapped []byte) error {
	if err := check(ctx, id); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.path(id)
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return ErrShredded
	}
	if err != nil {
		return wrapDir("replace", err)
	}
	defer f.Close()
	return wrapDir("replace", s.replaceFile(p, f, append([]byte{tagKey}, wrapped...), old))
}

// replaceFile renames a synced file holding content over p, whose open descriptor is f,
// then zeroes and syncs f's old bytes. With want non-nil it first requires f to hold the
// key want (ErrShredded for a tombstone, ErrConflict for another key). A tombstone is
// never replaced.
func (s *DirKeyStore) replaceFile(p string, f *os.File, content, want []byte) error {
	b, err := io.ReadAll(f)
	if err != nil {
		return err
	}
	if err := validKeyFile(b); err != nil {
		return err
	}
	switch {
	case b[0] == tagTombstone && want == nil:
		return nil // destroyed already
	case b[0] == tagTombstone:
		return ErrShredded
	case want != nil && !bytes.Equal(b[1:], want):
		return ErrConflict
	}
	tmp, err := s.writeTemp(content)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, p); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := syncDir(s.keyDir()); err != nil {
		return err
	}
	if _, err := f.WriteAt(make([]byte, len(b)), 0); err != nil {
		return fmt.Errorf("overwrite old key: %w", err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("overwrite old key: %w", err)
	}
	return nil
}

// link writes content to a synced temporary file and hard-links it to p (fs.ErrExist if p
// exists), then syncs the key directory.
func (s *DirKeyStore) link(p string, content []byte) error {
	tmp, err := s.writeTemp(content)
	if err != nil {
		return err
	}
	err = os.Link(tmp, p)
	os.Remove(tmp)
	if err != nil {
		return err
	}
	return syncDir(s.keyDir())
}

// writeTemp writes content to a new synced file in the temporary directory.
func (s *DirKeyStore) writeTemp(content []byte) (string, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return "", err
	}
	tmp := filepath.Join(s.tmpDir(), hex.EncodeToString(rnd[:]))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	_, err = f.Write(content)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

func (s *DirKeyStore) keyDir() string { return filepath.Join(s.root, "keys") }
func (s *DirKeyStore) tmpDir() string { return filepath.Join(s.root, ".tmp") }

// path is the key file of id.
func (s *DirKeyStore) path(id string) string {
	if len(id) > 100 {
		sum := sha256.Sum256([]byte(id))
		return filepath.Join(s.keyDir(), "h"+hex.EncodeToString(sum[:]))
	}
	return filepath.Join(s.keyDir(), "x"+hex.EncodeToString([]byte(id)))
}

// readKeyFile returns the content of a valid key file.
func readKeyFile(p string) ([]byte, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	return b, validKeyFile(b)
}

func validKeyFile(b []byte) error {
	if len(b) == 0 || b[0] != tagKey && b[0] != tagTombstone || b[0] == tagKey && len(b) == 1 {
		return deletion.Permanent(fmt.Errorf("%w: key file has an unknown format", ErrCorrupt))
	}
	return nil
}

func check(ctx context.Context, id string) error {
	if id == "" {
		return deletion.Permanent(errors.New("envelope: empty id"))
	}
	return ctx.Err()
}

// wrapDir wraps err unless it is nil or one of the KeyStore sentinels.
func wrapDir(op string, err error) error {
	if err == nil || err == ErrExists || err == ErrShredded || err == ErrConflict {
		return err
	}
	return fmt.Errorf("envelope: dir key store: %s: %w", op, err)
}

func syncDir(d string) error {
	f, err := os.Open(d)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}
