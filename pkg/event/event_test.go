package event

import "testing"

func TestStatusSucceeded(t *testing.T) {
	tests := []struct {
		status Status
		want   bool
	}{
		{StatusDeleted, true},
		{StatusNothingFound, true},
		{StatusNoPII, true},
		{StatusFailed, false},
		{"", false},
	}
	for _, tt := range tests {
		if got := tt.status.Succeeded(); got != tt.want {
			t.Errorf("Status(%q).Succeeded() = %v, want %v", tt.status, got, tt.want)
		}
	}
}

func TestRequestedActs(t *testing.T) {
	tests := []struct {
		name     string
		expected []string
		only     []string
		store    string
		want     bool
	}{
		{"expected, no re-drive", []string{"qdrant", "redis"}, nil, "redis", true},
		{"expected, empty re-drive list", []string{"qdrant", "redis"}, []string{}, "qdrant", true},
		{"not expected", []string{"qdrant", "redis"}, nil, "dataset", false},
		{"no expected stores", nil, nil, "qdrant", false},
		{"re-drive selects it", []string{"qdrant", "redis"}, []string{"redis"}, "redis", true},
		{"re-drive skips it", []string{"qdrant", "redis"}, []string{"redis"}, "qdrant", false},
		{"re-drive names an unexpected store", []string{"qdrant"}, []string{"dataset"}, "dataset", false},
		{"prefix is not a match", []string{"redis"}, nil, "redi", false},
		{"empty store name", []string{"redis"}, nil, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Requested{ExpectedStores: tt.expected, OnlyStores: tt.only}
			if got := r.Acts(tt.store); got != tt.want {
				t.Errorf("Acts(%q) = %v, want %v", tt.store, got, tt.want)
			}
		})
	}
}

func TestStoreDoneDeleted(t *testing.T) {
	tests := []struct {
		name      string
		locations []LocationCount
		want      int64
	}{
		{"no locations", nil, 0},
		{"one location", []LocationCount{{Location: "shopbot_acme", Deleted: 7}}, 7},
		{"several locations", []LocationCount{{"a", 3}, {"b", 0}, {"c", 40}}, 43},
		{"large counts", []LocationCount{{"a", 1 << 40}, {"b", 1 << 40}}, 1 << 41},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &StoreDone{Locations: tt.locations}
			if got := d.Deleted(); got != tt.want {
				t.Errorf("Deleted() = %d, want %d", got, tt.want)
			}
		})
	}
}
