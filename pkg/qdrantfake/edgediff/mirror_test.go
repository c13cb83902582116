package edgediff_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/qdrant/go-client/qdrant"

	"github.com/lethe-erasure/lethe/pkg/qdrantfake/edgediff"
)

// TestMirrorSeesADivergence writes a point to the emulator behind the mirror's back: the
// next count must be reported as a divergence, and the next scroll must name the point.
func TestMirrorSeesADivergence(t *testing.T) {
	ctx := context.Background()
	c, srv, m := edgediff.Connect(t)
	create(t, c, "probe", qdrant.Distance_Cosine, 4)
	upsert(t, c, "probe", []*qdrant.PointStruct{{Id: qdrant.NewIDNum(1), Vectors: qdrant.NewVectors(1, 0, 0, 0), Payload: qdrant.NewValueMap(map[string]any{"a": "x"})}})
	count(t, c, "probe", nil)
	if d := m.Divergences(); len(d) != 0 {
		t.Fatalf("divergences before the hidden write: %v", d)
	}
	direct, err := qdrant.NewClient(srv.Config())
	if err != nil {
		t.Fatal(err)
	}
	defer direct.Close()
	if _, err := direct.Upsert(ctx, &qdrant.UpsertPoints{CollectionName: "probe", Wait: qdrant.PtrOf(true), Points: []*qdrant.PointStruct{
		{Id: qdrant.NewIDNum(2), Vectors: qdrant.NewVectors(0, 1, 0, 0), Payload: qdrant.NewValueMap(map[string]any{"a": "x"})},
	}}); err != nil {
		t.Fatal(err)
	}
	count(t, c, "probe", &qdrant.Filter{Must: []*qdrant.Condition{qdrant.NewMatchKeyword("a", "x")}})
	scrollAll(t, c, "probe", nil, 10, true)
	d := m.Divergences()
	if len(d) != 2 || d[0].Method != "/qdrant.Points/Count" || d[1].Method != "/qdrant.Points/Scroll" {
		t.Fatalf("divergences: %v", d)
	}
	t.Logf("reported as: %s", d[1])
	m.Truncate(0)
}

// TestRequirementsPinTheOracleVersion: the version make tools installs is the one the
// oracle insists on.
func TestRequirementsPinTheOracleVersion(t *testing.T) {
	b, err := os.ReadFile("requirements.txt")
	if err != nil {
		t.Fatal(err)
	}
	var pins []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			pins = append(pins, line)
		}
	}
	if want := "qdrant-edge-py==" + edgediff.EdgeVersion; len(pins) != 1 || pins[0] != want {
		t.Errorf("requirements.txt pins %q, want [%s]", pins, want)
	}
}
