package version

import (
	"runtime"
	"strings"
	"testing"
)

func TestGetStampsAndDescribes(t *testing.T) {
	defer func(v, r string) { Version, Revision = v, r }(Version, Revision)
	Version, Revision = "v1.2.3", "0123abc"
	i := Get()
	if i.Version != "v1.2.3" || i.Revision != "0123abc" || i.GoVersion != runtime.Version() {
		t.Fatalf("Get() = %+v", i)
	}
	if s := i.String(); !strings.HasPrefix(s, "lethe v1.2.3 (0123abc") || !strings.HasSuffix(s, runtime.Version()+")") {
		t.Errorf("String() = %q", s)
	}
	Revision = ""
	if got := Get().Revision; got == "" {
		t.Error("an unstamped build has no revision, not even unknown")
	}
}
