package deletion

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"path"
	"strings"

	"github.com/lethe-erasure/lethe/pkg/subject"
)

// ItemNames names stored objects in reports (unexamined, excluded and mention items)
// without their names, which may hold identifiers ("uploads/anna@example.de.png"). An
// object below a location template is reported as the template, its path below it with
// every part masked to "*" (the last keeping a known extension, such as ".csv.gz"), and a
// keyed reference: "s3://bucket/{tenant}/*/*.png [ref 1f0c9a7d3b5e2a64]". The reference
// is the first 16 hex digits of HMAC-SHA-256 of the object's full name ("s3://bucket/key",
// "file://path") under a key derived from the pseudonym key (label "lethe-item-ref-v1"):
// stable across reports, telling objects apart, and found again only by whoever holds the
// key, by computing Ref over a listing. The zero ItemNames gives no reference. It is safe
// for concurrent use.
type ItemNames struct {
	key []byte
}

// itemRefLabel derives the reference key from the pseudonym key.
const itemRefLabel = "lethe-item-ref-v1"

// NewItemNames returns the ItemNames whose references are keyed by k.
func NewItemNames(k subject.Key) ItemNames { return ItemNames{key: k.Derive(itemRefLabel)} }

// Name names the object full (its full name), at rel below the location template, for a
// report.
func (n ItemNames) Name(template, rel, full string) string {
	name := template + Shape(rel)
	if ref := n.Ref(full); ref != "" {
		name += " [ref " + ref + "]"
	}
	return name
}

// Ref is the keyed reference of the object named full, "" without a key.
func (n ItemNames) Ref(full string) string {
	if n.key == nil {
		return ""
	}
	m := hmac.New(sha256.New, n.key)
	m.Write([]byte(full))
	return hex.EncodeToString(m.Sum(nil)[:8])
}

// Shape is the slash-separated path p with every part replaced by "*", the last keeping
// its known extension (KnownExtension); empty parts stay empty.
func Shape(p string) string {
	parts := strings.Split(p, "/")
	for i, part := range parts {
		if part == "" {
			continue
		}
		parts[i] = "*"
		if i == len(parts)-1 {
			parts[i] += KnownExtension(part)
		}
	}
	return strings.Join(parts, "/")
}

// KnownExtension is the extension of the file name: the last one when it is a known
// document, data, image, media or archive extension, with the one before it when the last
// is a compression suffix (".csv.gz"); "" otherwise, and for a name that is only an
// extension. Case is kept. Any other dot-separated part of a name may be part of an
// identifier ("anna.schmidt", "example.de") and is never kept.
func KnownExtension(name string) string {
	ext := path.Ext(name)
	if len(ext) < 2 || len(ext) == len(name) || !knownExtensions[strings.ToLower(ext[1:])] {
		return ""
	}
	if !compressionSuffixes[strings.ToLower(ext[1:])] {
		return ext
	}
	stem := name[:len(name)-len(ext)]
	if inner := path.Ext(stem); len(inner) >= 2 && len(inner) < len(stem) && knownExtensions[strings.ToLower(inner[1:])] && !compressionSuffixes[strings.ToLower(inner[1:])] {
		return inner + ext
	}
	return ext
}

var knownExtensions = setOf(
	// data
	"csv", "tsv", "tab", "txt", "json", "jsonl", "ndjson", "parquet", "pq", "avro", "orc",
	"arrow", "feather", "xml", "yaml", "yml", "toml", "ini", "log", "sql", "db", "sqlite",
	"pkl", "pickle", "npy", "npz", "pt", "h5", "safetensors", "bin", "dat", "md", "rst",
	// documents and mail
	"pdf", "doc", "docx", "xls", "xlsx", "ppt", "pptx", "odt", "ods", "odp", "rtf", "html",
	"htm", "eml", "msg", "vcf", "ics", "epub",
	// images, audio, video
	"png", "jpg", "jpeg", "gif", "webp", "svg", "bmp", "tif", "tiff", "heic", "ico",
	"mp3", "m4a", "wav", "ogg", "flac", "mp4", "mov", "avi", "mkv", "webm",
	// archives and compression
	"zip", "tar", "tgz", "7z", "rar", "gz", "bz2", "xz", "zst", "lz4", "br", "snappy",
)

var compressionSuffixes = setOf("gz", "bz2", "xz", "zst", "lz4", "br", "snappy")

func setOf(s ...string) map[string]bool {
	m := make(map[string]bool, len(s))
	for _, v := range s {
		m[v] = true
	}
	return m
}
