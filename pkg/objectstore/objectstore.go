// Package objectstore is the object layer of the dataset store: S3 buckets and directory
// trees behind one Bucket interface, with conditional rewrites staged before upload, and
// the one classification of S3 errors that the S3 stores share.
package objectstore

import (
	"bufio"
	"context"
	"errors"
	"io"
	"sync"
)

// Bucket is the object namespace a dataset location lives in: an S3 bucket (NewS3) or a
// directory (NewDir). Keys are slash-separated paths relative to the bucket. Implementations
// are safe for concurrent use and return errors that wrap ErrNotFound for a missing object
// and ErrConflict for a conditional write that lost a race; errors retrying cannot fix are
// already marked retry.Permanent.
type Bucket interface {
	// List calls fn with the key of every current object whose key starts with prefix,
	// in no particular order, and stops at fn's first error.
	List(ctx context.Context, prefix string, fn func(key string) error) error
	// Get opens the current object of key. The caller closes Body.
	Get(ctx context.Context, key string) (*Object, error)
	// Put replaces key with what write writes, only if key is still in the state prev was
	// read in (prev.Token); otherwise it returns ErrConflict and changes nothing. If write
	// fails, nothing is written and Put returns write's error. The replacement is atomic:
	// readers see the old or the new object, never a part.
	Put(ctx context.Context, key string, prev *Object, write func(w io.Writer) error) error
	// Delete removes the current object of key; a missing key is no error.
	Delete(ctx context.Context, key string) error
}

// Versioned is a Bucket that keeps older versions of its objects (an S3 bucket with
// versioning enabled or suspended). A rewrite through Put leaves the previous content as a
// non-current version, so an erasure must also delete the versions that hold the subject.
type Versioned interface {
	Bucket
	// ListVersions returns every version and delete marker of every key starting with
	// prefix, following pagination to the end.
	ListVersions(ctx context.Context, prefix string) ([]Version, error)
	// GetVersion opens one version of key. The caller closes Body.
	GetVersion(ctx context.Context, key, id string) (*Object, error)
	// DeleteVersion removes one version of key for good, always naming it (the version
	// written before versioning was enabled is named "null"), so that it never adds a
	// delete marker; a missing version is no error.
	DeleteVersion(ctx context.Context, key, id string) error
}

// Object is an object's content and what a rewrite keeps of it.
type Object struct {
	Body io.ReadCloser
	// Token identifies the state the object was read in (S3: the ETag; directory: size and
	// modification time), for Put's conditional replace.
	Token string
	// VersionID is the version read (S3 with versioning), "" otherwise.
	VersionID string
	// The object's headers and user metadata, carried over to the rewritten object (S3
	// only).
	ContentType        string
	ContentEncoding    string
	CacheControl       string
	ContentDisposition string
	ContentLanguage    string
	Metadata           map[string]string
}

// Version is one version of an object in a Versioned bucket.
type Version struct {
	Key          string
	ID           string
	Latest       bool   // the current version (or the current delete marker)
	DeleteMarker bool   // holds no data
	Token        string // the version's ETag as the listing gives it ("" when unknown)
}

// Written identifies what a Put wrote: the Token and VersionID a Get of it would return.
type Written struct {
	Token     string
	VersionID string
}

var (
	// ErrNotFound reports a missing object or version.
	ErrNotFound = errors.New("object not found")
	// ErrConflict reports that an object changed between read and conditional write. The
	// buckets return it marked retry.Contended: a retry at once reads the new content.
	ErrConflict = errors.New("object changed during rewrite")
	// ErrNoVersions reports a bucket whose server cannot list versions (no versioning).
	ErrNoVersions = errors.New("bucket does not list versions")
)

// bufferSize is the size of the write buffers of rewrites.
const bufferSize = 64 << 10

// writers are reused: a batch rewrites many objects a second.
var writers = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, bufferSize) }}

// newWriter returns a buffered writer to w; releaseWriter gives it back once flushed (or
// abandoned: what it holds is dropped).
func newWriter(w io.Writer) *bufio.Writer {
	bw := writers.Get().(*bufio.Writer)
	bw.Reset(w)
	return bw
}

func releaseWriter(bw *bufio.Writer) {
	bw.Reset(nil)
	writers.Put(bw)
}
