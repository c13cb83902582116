package objectstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/lethe-erasure/lethe/pkg/retry"
	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// TestBucketPut checks the seam's rewrite contract on both backends: a conditional Put
// loses to a concurrent writer without changing anything, a failing write leaves the object
// (and no temporary file) behind, and a successful Put replaces the content.
func TestBucketPut(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T) (Bucket, world, func() []string)
	}{
		{"s3", func(t *testing.T) (Bucket, world, func() []string) {
			c := testenv.S3(t, testBucket).Client
			return NewS3(c, testBucket), s3World{c}, func() []string { return nil }
		}},
		{"dir", func(t *testing.T) (Bucket, world, func() []string) {
			w := dirWorld{t.TempDir()}
			return NewDir(w.root), w, func() []string {
				m, _ := filepath.Glob(filepath.Join(w.root, "acme", tmpPrefix+"*"))
				return m
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, w, temps := tc.setup(t)
			const key = "acme/x.csv"
			w.put(t, key, []byte("v1"))
			read := func() *Object {
				obj, err := b.Get(ctx, key)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { obj.Body.Close() })
				return obj
			}
			current := func() string { return w.current(t, key) }

			stale := read()
			w.put(t, key, []byte("v2 written meanwhile"))
			err := b.Put(ctx, key, stale, func(w io.Writer) error { _, err := io.WriteString(w, "lost"); return err })
			if !errors.Is(err, ErrConflict) || !retry.IsContended(err) || current() != "v2 written meanwhile" {
				t.Errorf("stale Put: %v, content %q; want ErrConflict marked contended, and v2", err, current())
			}

			boom := errors.New("boom")
			err = b.Put(ctx, key, read(), func(w io.Writer) error { _, _ = io.WriteString(w, "partial"); return boom })
			if !errors.Is(err, boom) || current() != "v2 written meanwhile" {
				t.Errorf("failing Put: %v, content %q", err, current())
			}
			if left := temps(); len(left) != 0 {
				t.Errorf("temporary files left: %v", left)
			}

			if err := b.Put(ctx, key, read(), func(w io.Writer) error { _, err := io.WriteString(w, "v3"); return err }); err != nil {
				t.Fatal(err)
			}
			if current() != "v3" {
				t.Errorf("content %q, want v3", current())
			}

			if _, err := b.Get(ctx, "acme/missing.csv"); !errors.Is(err, ErrNotFound) {
				t.Errorf("Get of a missing key: %v, want ErrNotFound", err)
			}
			var keys []string
			if err := b.List(ctx, "acme/", func(k string) error { keys = append(keys, k); return nil }); err != nil {
				t.Fatal(err)
			}
			if strings.Join(keys, ",") != key {
				t.Errorf("List = %v", keys)
			}
			if err := b.Delete(ctx, key); err != nil {
				t.Fatal(err)
			}
			if err := b.Delete(ctx, key); err != nil {
				t.Errorf("second Delete: %v", err)
			}
		})
	}
}

func TestDirPutKeepsMode(t *testing.T) {
	ctx := context.Background()
	w := dirWorld{t.TempDir()}
	w.put(t, "a/x.csv", []byte("old"))
	p := filepath.Join(w.root, "a", "x.csv")
	if err := os.Chmod(p, 0o600); err != nil {
		t.Fatal(err)
	}
	b := NewDir(w.root)
	obj, err := b.Get(ctx, "a/x.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	if err := b.Put(ctx, "a/x.csv", obj, func(w io.Writer) error { _, err := w.Write([]byte("new")); return err }); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(p); fi.Mode().Perm() != 0o600 || !bytes.Equal(got, []byte("new")) {
		t.Errorf("mode %v content %q, want 0600 and new", fi.Mode().Perm(), got)
	}
}

const testBucket = "lethe-objects"

// world is a backend as the tests see it, through its own read and write path.
type world interface {
	put(t *testing.T, key string, data []byte)
	current(t *testing.T, key string) string // the current object's content
}

// s3World reads and writes the bucket through the client, never through S3.
type s3World struct{ c *s3.Client }

func (w s3World) put(t *testing.T, key string, data []byte) {
	t.Helper()
	if _, err := w.c.PutObject(context.Background(), &s3.PutObjectInput{Bucket: aws.String(testBucket), Key: &key, Body: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
}

func (w s3World) current(t *testing.T, key string) string {
	t.Helper()
	obj, err := w.c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(testBucket), Key: &key})
	if err != nil {
		t.Fatal(err)
	}
	defer obj.Body.Close()
	b, err := io.ReadAll(obj.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dirWorld reads and writes the directory through the os package.
type dirWorld struct{ root string }

func (w dirWorld) put(t *testing.T, key string, data []byte) {
	t.Helper()
	p := filepath.Join(w.root, filepath.FromSlash(key))
	if err := errors.Join(os.MkdirAll(filepath.Dir(p), 0o755), os.WriteFile(p, data, 0o640)); err != nil {
		t.Fatal(err)
	}
}

func (w dirWorld) current(t *testing.T, key string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(w.root, filepath.FromSlash(key)))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
