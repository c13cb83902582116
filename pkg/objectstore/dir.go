package objectstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/lethe-erasure/lethe/pkg/retry"
)

// dirBucket is a directory tree: keys are slash-separated paths below root. Every access
// goes through os.Root, so no key, symbolic link or ".." can reach outside the root.
type dirBucket struct {
	root string
}

// tmpPrefix starts the names of the temporary files of rewrites in progress; List skips them.
const tmpPrefix = ".lethe-rewrite-"

// NewDir returns the bucket of the directory tree at root. Rewrites are atomic (a temporary
// file in the same directory, fsync, rename, fsync of the directory); there are no
// versions. It is safe for concurrent use; the conditional replace compares size and
// modification time, which narrows but cannot close the race with a writer that bypasses
// Lethe.
func NewDir(root string) Bucket {
	return &dirBucket{root: root}
}

func (d *dirBucket) open() (*os.Root, error) {
	r, err := os.OpenRoot(d.root)
	if err != nil {
		return nil, fmt.Errorf("dataset root: %w", err)
	}
	return r, nil
}

// List walks the directory the prefix names (its part up to the last slash) and reports the
// regular files whose key starts with prefix. Symbolic links are not followed.
func (d *dirBucket) List(ctx context.Context, prefix string, fn func(string) error) error {
	r, err := d.open()
	if err != nil {
		return err
	}
	defer r.Close()
	dir := "."
	if i := strings.LastIndexByte(prefix, '/'); i > 0 {
		dir = prefix[:i]
	}
	err = fs.WalkDir(r.FS(), dir, func(key string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && key == dir {
				return fs.SkipAll // nothing stored under the prefix yet
			}
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), tmpPrefix) || !strings.HasPrefix(key, prefix) {
			return nil
		}
		return fn(key)
	})
	if err != nil {
		return fmt.Errorf("list: %w", pathless(err))
	}
	return nil
}

func token(fi fs.FileInfo) string {
	return fmt.Sprintf("%d-%d", fi.Size(), fi.ModTime().UnixNano())
}

func (d *dirBucket) Get(ctx context.Context, key string) (*Object, error) {
	r, err := d.open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	f, err := r.Open(key)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, ErrNotFound
		}
		return nil, fmt.Errorf("open: %w", pathless(err))
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("stat: %w", pathless(err))
	}
	return &Object{Body: f, Token: token(fi)}, nil
}

func (d *dirBucket) Put(ctx context.Context, key string, prev *Object, write func(io.Writer) error) (err error) {
	r, err := d.open()
	if err != nil {
		return err
	}
	defer r.Close()
	mode := fs.FileMode(0o644)
	if fi, err := r.Stat(key); err == nil {
		mode = fi.Mode().Perm()
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	dir := path.Dir(key)
	tmp := path.Join(dir, tmpPrefix+hex.EncodeToString(rnd[:]))
	f, err := r.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return fmt.Errorf("stage rewrite: %w", pathless(err))
	}
	defer func() {
		if err != nil {
			f.Close()
			_ = r.Remove(tmp)
		}
	}()
	bw := newWriter(f)
	defer releaseWriter(bw)
	if err := write(bw); err != nil {
		return err
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("stage rewrite: %w", pathless(err))
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync rewrite: %w", pathless(err))
	}
	if prev != nil && prev.Token != "" {
		fi, err := r.Stat(key)
		if err != nil || token(fi) != prev.Token {
			return retry.Contended(ErrConflict)
		}
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close rewrite: %w", pathless(err))
	}
	if err := r.Rename(tmp, key); err != nil {
		return fmt.Errorf("replace: %w", pathless(err))
	}
	return syncDir(r, dir)
}

func (d *dirBucket) Delete(ctx context.Context, key string) error {
	r, err := d.open()
	if err != nil {
		return err
	}
	defer r.Close()
	if err := r.Remove(key); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete: %w", pathless(err))
	}
	return syncDir(r, path.Dir(key))
}

// pathless is err without the paths a file system error quotes (keys may hold
// identifiers): the operation and its cause.
func pathless(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	case errors.As(err, &le):
		return fmt.Errorf("%s: %w", le.Op, le.Err)
	}
	return err
}

// syncDir makes a rename or removal in dir durable.
func syncDir(r *os.Root, dir string) error {
	f, err := r.Open(dir)
	if err != nil {
		return fmt.Errorf("sync directory: %w", pathless(err))
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync directory: %w", pathless(err))
	}
	return nil
}

// ContextReader returns a reader of r that fails with ctx's error once ctx is done (a
// directory's files do not watch ctx).
func ContextReader(ctx context.Context, r io.Reader) io.Reader { return ctxReader{ctx, r} }

type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
