package s3prefixstore

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lethe-erasure/lethe/pkg/testenv"
)

// The buckets of the tests, both versioned.
const (
	uploadsBucket = "lethe-uploads"
	docsBucket    = "lethe-docs"
)

// fakeS3 is testenv.S3's gofakes3 (in memory, versioning on, over HTTP) behind a shim that adds
// what these tests need and gofakes3 lacks, each as S3 documents it:
//   - ListObjectVersions pages: gofakes3 answers a truncated listing without
//     NextKeyMarker/NextVersionIdMarker; the shim lists everything from gofakes3 and serves
//     pages of max-keys (at most 1000) with S3's markers.
//   - the "null" version: gofakes3 gives an object written before versioning was enabled a
//     generated id; ids registered with asNull are shown as "null" and "null" maps back.
//   - Object Lock: PutObjectLegalHold, PutObjectRetention and their Get calls per version;
//     DeleteObjects and DELETE ?versionId refuse a locked version with AccessDenied.
//
// It records every DeleteObjects batch so tests can check sizes and version ids.
type fakeS3 struct {
	next http.Handler
	mu   sync.Mutex
	null map[string]string    // key -> gofakes3's id of its null version
	hold map[string]bool      // key+"\x00"+real version id -> legal hold on
	keep map[string]lockUntil // key+"\x00"+real version id -> retention
	// batches are the DeleteObjects calls: how many objects, how many without a version id.
	batches    [][2]int
	listPages  int
	nullDelete int // objects deleted by the version id "null"
}

type lockUntil struct {
	mode  string
	until time.Time
}

// newFake serves a fresh fakeS3 (testenv.S3 behind the shim) with both buckets and
// returns it and its server.
func newFake(t testing.TB) (*fakeS3, *testenv.S3Server) {
	t.Helper()
	f := &fakeS3{null: map[string]string{}, hold: map[string]bool{}, keep: map[string]lockUntil{}}
	srv := testenv.S3With(t, testenv.S3Options{Wrap: func(h http.Handler) http.Handler {
		f.next = h
		return f
	}}, uploadsBucket, docsBucket)
	return f, srv
}

// asNull makes gofakes3's version id of key the key's "null" version.
func (f *fakeS3) asNull(key, id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.null[key] = id
}

func (f *fakeS3) realID(key, id string) string {
	if id == "null" && f.null[key] != "" {
		return f.null[key]
	}
	return id
}

func (f *fakeS3) shownID(key, id string) string {
	if id != "" && f.null[key] == id {
		return "null"
	}
	return id
}

func (f *fakeS3) locked(key, id string) bool {
	k := key + "\x00" + id
	return f.hold[k] || f.keep[k].until.After(time.Now())
}

func (f *fakeS3) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	q := r.URL.Query()
	f.mu.Lock()
	defer f.mu.Unlock()
	switch {
	case key == "" && r.Method == http.MethodGet && q.Has("versions"):
		f.listVersions(w, r, bucket)
	case key == "" && r.Method == http.MethodPost && q.Has("delete"):
		f.deleteObjects(w, r, bucket)
	case key != "" && (q.Has("legal-hold") || q.Has("retention")):
		f.lock(w, r, key)
	case key != "" && r.Method == http.MethodDelete && q.Get("versionId") != "":
		id := f.realID(key, q.Get("versionId"))
		if f.locked(key, id) {
			s3Error(w, http.StatusForbidden, "AccessDenied", "Access Denied because object protected by object lock.")
			return
		}
		q.Set("versionId", id)
		r.URL.RawQuery = q.Encode()
		f.forward(w, r, key)
	default:
		if v := q.Get("versionId"); v != "" {
			q.Set("versionId", f.realID(key, v))
			r.URL.RawQuery = q.Encode()
		}
		f.forward(w, r, key)
	}
}

// forward passes r to gofakes3, showing null version ids as "null".
func (f *fakeS3) forward(w http.ResponseWriter, r *http.Request, key string) {
	rec := httptest.NewRecorder()
	f.next.ServeHTTP(rec, r)
	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	if id := rec.Header().Get("x-amz-version-id"); id != "" {
		w.Header().Set("x-amz-version-id", f.shownID(key, id))
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// xmlEntry is a <Version> or a <DeleteMarker> of a listing.
type xmlEntry struct {
	XMLName      xml.Name
	Key          string `xml:"Key"`
	VersionID    string `xml:"VersionId"`
	IsLatest     bool   `xml:"IsLatest"`
	LastModified string `xml:"LastModified"`
	ETag         string `xml:"ETag,omitempty"`
	Size         *int64 `xml:"Size,omitempty"`
}

type xmlListing struct {
	XMLName             xml.Name
	Name                string     `xml:"Name"`
	Prefix              string     `xml:"Prefix"`
	KeyMarker           string     `xml:"KeyMarker"`
	VersionIDMarker     string     `xml:"VersionIdMarker"`
	MaxKeys             int        `xml:"MaxKeys"`
	IsTruncated         bool       `xml:"IsTruncated"`
	NextKeyMarker       string     `xml:"NextKeyMarker,omitempty"`
	NextVersionIDMarker string     `xml:"NextVersionIdMarker,omitempty"`
	Entries             []xmlEntry `xml:",any"`
}

func (f *fakeS3) listVersions(w http.ResponseWriter, r *http.Request, bucket string) {
	q := r.URL.Query()
	all := httptest.NewRequest(http.MethodGet, "/"+bucket+"?versions&max-keys=1000000&prefix="+url.QueryEscape(q.Get("prefix")), nil)
	rec := httptest.NewRecorder()
	f.next.ServeHTTP(rec, all)
	if rec.Code != http.StatusOK {
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
		return
	}
	var in xmlListing
	if err := xml.Unmarshal(rec.Body.Bytes(), &in); err != nil {
		s3Error(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	var es []xmlEntry
	for _, e := range in.Entries {
		if n := e.XMLName.Local; n == "Version" || n == "DeleteMarker" {
			e.XMLName = xml.Name{Local: n}
			e.VersionID = f.shownID(e.Key, e.VersionID)
			es = append(es, e)
		}
	}
	start := 0
	if km := q.Get("key-marker"); km != "" {
		vm := q.Get("version-id-marker")
		start = len(es)
		for i, e := range es {
			if vm != "" && e.Key == km && e.VersionID == vm {
				start = i + 1
				break
			}
			if e.Key > km {
				start = i
				break
			}
		}
	}
	maxKeys := 1000
	if v, err := strconv.Atoi(q.Get("max-keys")); err == nil && v > 0 && v < maxKeys {
		maxKeys = v
	}
	out := xmlListing{XMLName: xml.Name{Space: "http://s3.amazonaws.com/doc/2006-03-01/", Local: "ListVersionsResult"}, Name: bucket, Prefix: q.Get("prefix"), KeyMarker: q.Get("key-marker"), VersionIDMarker: q.Get("version-id-marker"), MaxKeys: maxKeys}
	end := min(len(es), start+maxKeys)
	out.Entries = es[start:end]
	if end < len(es) {
		last := es[end-1]
		out.IsTruncated, out.NextKeyMarker, out.NextVersionIDMarker = true, last.Key, last.VersionID
	}
	f.listPages++
	w.Header().Set("Content-Type", "application/xml")
	_ = xml.NewEncoder(w).Encode(out)
}

type xmlObject struct {
	Key       string `xml:"Key"`
	VersionID string `xml:"VersionId,omitempty"`
}

type xmlError struct {
	Key       string `xml:"Key"`
	VersionID string `xml:"VersionId,omitempty"`
	Code      string `xml:"Code"`
	Message   string `xml:"Message"`
}

type xmlDeleteResult struct {
	XMLName xml.Name    `xml:"DeleteResult"`
	Deleted []xmlObject `xml:"Deleted"`
	Errors  []xmlError  `xml:"Error"`
}

// deleteObjects refuses locked versions and passes the rest to gofakes3 by their real ids.
func (f *fakeS3) deleteObjects(w http.ResponseWriter, r *http.Request, bucket string) {
	var in struct {
		Objects []xmlObject `xml:"Object"`
		Quiet   bool        `xml:"Quiet"`
	}
	if err := xml.NewDecoder(r.Body).Decode(&in); err != nil {
		s3Error(w, http.StatusBadRequest, "MalformedXML", err.Error())
		return
	}
	var res xmlDeleteResult
	var pass []xmlObject
	unversioned := 0
	for _, o := range in.Objects {
		if o.VersionID == "" {
			unversioned++
		}
		real := f.realID(o.Key, o.VersionID)
		if o.VersionID != "" && f.locked(o.Key, real) {
			res.Errors = append(res.Errors, xmlError{o.Key, o.VersionID, "AccessDenied", "Access Denied because object protected by object lock."})
			continue
		}
		if o.VersionID == "null" {
			f.nullDelete++
		}
		pass = append(pass, xmlObject{o.Key, real})
	}
	f.batches = append(f.batches, [2]int{len(in.Objects), unversioned})
	if len(pass) > 0 {
		var body bytes.Buffer
		body.WriteString("<Delete>")
		for _, o := range pass {
			_ = xml.NewEncoder(&body).Encode(struct {
				XMLName xml.Name `xml:"Object"`
				xmlObject
			}{xmlObject: o})
		}
		body.WriteString("</Delete>")
		fwd := httptest.NewRequest(http.MethodPost, "/"+bucket+"?delete", &body)
		rec := httptest.NewRecorder()
		f.next.ServeHTTP(rec, fwd)
		var got xmlDeleteResult
		if err := xml.Unmarshal(rec.Body.Bytes(), &got); rec.Code != http.StatusOK || err != nil {
			w.WriteHeader(rec.Code)
			_, _ = w.Write(rec.Body.Bytes())
			return
		}
		for _, d := range got.Deleted {
			d.VersionID = f.shownID(d.Key, d.VersionID)
			res.Deleted = append(res.Deleted, d)
		}
		res.Errors = append(res.Errors, got.Errors...)
	}
	if in.Quiet {
		res.Deleted = nil
	}
	w.Header().Set("Content-Type", "application/xml")
	_ = xml.NewEncoder(w).Encode(res)
}

// lock serves Put/GetObjectLegalHold and Put/GetObjectRetention of one version.
func (f *fakeS3) lock(w http.ResponseWriter, r *http.Request, key string) {
	q := r.URL.Query()
	k := key + "\x00" + f.realID(key, q.Get("versionId"))
	body, _ := io.ReadAll(r.Body)
	switch {
	case r.Method == http.MethodPut && q.Has("legal-hold"):
		var in struct{ Status string }
		_ = xml.Unmarshal(body, &in)
		f.hold[k] = in.Status == "ON"
	case r.Method == http.MethodPut:
		var in struct {
			Mode            string
			RetainUntilDate time.Time
		}
		_ = xml.Unmarshal(body, &in)
		f.keep[k] = lockUntil{in.Mode, in.RetainUntilDate}
	case q.Has("legal-hold"):
		if on, ok := f.hold[k]; ok {
			fmt.Fprintf(w, "<LegalHold><Status>%s</Status></LegalHold>", map[bool]string{true: "ON", false: "OFF"}[on])
			return
		}
		s3Error(w, http.StatusNotFound, "NoSuchObjectLockConfiguration", "The specified object does not have a ObjectLock configuration")
		return
	default:
		if l, ok := f.keep[k]; ok {
			fmt.Fprintf(w, "<Retention><Mode>%s</Mode><RetainUntilDate>%s</RetainUntilDate></Retention>", l.mode, l.until.UTC().Format(time.RFC3339))
			return
		}
		s3Error(w, http.StatusNotFound, "NoSuchObjectLockConfiguration", "The specified object does not have a ObjectLock configuration")
		return
	}
	w.WriteHeader(http.StatusOK)
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<Error><Code>%s</Code><Message>%s</Message></Error>", code, msg)
}
