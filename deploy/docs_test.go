package deploy

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// repoRoot is the repository root, seen from this module's directory.
const repoRoot = ".."

// skipDir reports whether a directory is left out of the package walk: tools installed
// into the tree, test data, vendored and npm code, and hidden directories.
func skipDir(name string) bool {
	switch name {
	case ".tools", "testdata", "vendor", "node_modules":
		return true
	}
	return strings.HasPrefix(name, ".")
}

// packageDirs returns every directory under root that holds a non-test .go file, as a
// slash-separated path relative to root.
func packageDirs(t *testing.T, root string) []string {
	t.Helper()
	seen := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() || !strings.HasSuffix(d.Name(), ".go") || strings.HasSuffix(d.Name(), "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		seen[filepath.ToSlash(rel)] = true
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var dirs []string
	for d := range seen {
		dirs = append(dirs, d)
	}
	slices.Sort(dirs)
	return dirs
}

// layoutRows returns the directories named by the rows of the README's layout table: the
// first cell of each row under "## Layout", in backquotes.
func layoutRows(t *testing.T, readme string) []string {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n## Layout\n")
	if !ok {
		t.Fatal(`README.md has no section "## Layout"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	row := regexp.MustCompile("^\\| `([^`]+)` \\|")
	var dirs []string
	for _, line := range strings.Split(section, "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			dirs = append(dirs, strings.TrimSuffix(m[1], "/"))
		}
	}
	if len(dirs) == 0 {
		t.Fatal("the README's layout table has no rows")
	}
	return dirs
}

// TestReadmeLayout keeps the README's layout table honest: every directory of the
// repository that holds a non-test .go file has a row, and every row names a directory
// that exists, once.
func TestReadmeLayout(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := layoutRows(t, string(b))
	listed := map[string]bool{}
	for _, d := range rows {
		if listed[d] {
			t.Errorf("the README's layout table lists %s twice", d)
		}
		listed[d] = true
		if fi, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(d))); err != nil || !fi.IsDir() {
			t.Errorf("the README's layout table lists %s, which is not a directory of the repository", d)
		}
	}
	for _, d := range packageDirs(t, repoRoot) {
		if !listed[d] {
			t.Errorf("the README's layout table has no row for %s, a Go package directory", d)
		}
	}
}

// markdownFiles returns README.md and every .md file under docs/, relative to root.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".md") {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var (
	inlineCode = regexp.MustCompile("`[^`]*`")
	mdLink     = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	heading    = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// proseLine is a line of a markdown text outside fenced code blocks, and its number.
type proseLine struct {
	n    int
	text string
}

// prose returns the lines of a markdown text outside fenced code blocks.
func prose(text string) []proseLine {
	var out []proseLine
	fenced := false
	for i, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, proseLine{i + 1, line})
		}
	}
	return out
}

// anchors returns the anchors GitHub gives the headings of a markdown text: lower case,
// letters, digits, '-' and '_' kept, spaces turned into '-', everything else dropped, and
// "-1", "-2" … after a repeated one.
func anchors(text string) map[string]bool {
	got := map[string]bool{}
	count := map[string]int{}
	for _, line := range prose(text) {
		m := heading.FindStringSubmatch(line.text)
		if m == nil {
			continue
		}
		var b strings.Builder
		for _, r := range strings.ToLower(m[1]) {
			switch {
			case unicode.IsLetter(r), unicode.IsDigit(r), r == '-', r == '_':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		a := b.String()
		if n := count[a]; n > 0 {
			count[a]++
			a += "-" + strconv.Itoa(n)
		} else {
			count[a] = 1
		}
		got[a] = true
	}
	return got
}

// TestDocsLinks checks every relative link of README.md and of the pages under docs/: the
// file or directory it names exists, and an anchor into a markdown page names one of its
// headings. Links in code are not links and are skipped.
func TestDocsLinks(t *testing.T) {
	files := markdownFiles(t, repoRoot)
	if len(files) < 2 {
		t.Fatalf("found %v, want README.md and the pages under docs/", files)
	}
	texts := map[string]string{}
	read := func(rel string) (string, error) {
		if s, ok := texts[rel]; ok {
			return s, nil
		}
		b, err := os.ReadFile(filepath.Join(repoRoot, filepath.FromSlash(rel)))
		texts[rel] = string(b)
		return string(b), err
	}
	for _, file := range files {
		text, err := read(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range prose(text) {
			n := line.n
			for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(line.text, ""), -1) {
				target := m[1]
				if scheme.MatchString(target) {
					continue
				}
				p, anchor, _ := strings.Cut(target, "#")
				rel := file
				if p != "" {
					rel = path.Clean(path.Join(path.Dir(file), p))
					if strings.HasPrefix(rel, "../") || rel == ".." {
						t.Errorf("%s (line %d): %s leaves the repository", file, n, target)
						continue
					}
					if _, err := os.Stat(filepath.Join(repoRoot, filepath.FromSlash(rel))); err != nil {
						t.Errorf("%s (line %d): %s names %s, which does not exist", file, n, target, rel)
						continue
					}
				}
				if anchor == "" || !strings.HasSuffix(rel, ".md") {
					continue
				}
				dest, err := read(rel)
				if err != nil {
					t.Errorf("%s: %s: %v", file, target, err)
					continue
				}
				if !anchors(dest)[anchor] {
					t.Errorf("%s (line %d): %s: %s has no heading with the anchor #%s", file, n, target, rel, anchor)
				}
			}
		}
	}
}
