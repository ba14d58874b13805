package tserver

import (
	"math"
	"testing"
	"time"

	"bighive/internal/limits"
	pb "bighive/proto/bighivepb"
)

// TestSchemaMaxAgeNoOverflow: a max age past what time.Duration holds (in
// metadata written before the master refused it) does not wrap to a
// negative or short age, which would make every cell look expired.
func TestSchemaMaxAgeNoOverflow(t *testing.T) {
	tests := []struct {
		micros int64
		want   time.Duration
	}{
		{0, 0},
		{1e6, time.Second},
		{limits.MaxFamilyMaxAge.Microseconds(), limits.MaxFamilyMaxAge},
		{300 * 365 * 86400e6, limits.MaxFamilyMaxAge},
		{math.MaxInt64, limits.MaxFamilyMaxAge},
	}
	for _, tc := range tests {
		s := schemaOf(&pb.TableSchema{Families: []*pb.FamilySpec{{Name: "cf", MaxAgeMicros: tc.micros}}})
		if got := s.Families["cf"].MaxAge; got != tc.want {
			t.Errorf("max_age_micros %d → %v, want %v", tc.micros, got, tc.want)
		}
	}
}
