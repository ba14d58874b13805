package client

import (
	"strings"
	"testing"

	btpb "cloud.google.com/go/bigtable/apiv2/bigtablepb"
	"google.golang.org/protobuf/proto"
)

// TestProtoFilter: a RowFilter message becomes a Filter that sends that
// very message, composes with the constructors, and describes itself; nil
// is no filter.
func TestProtoFilter(t *testing.T) {
	if f := ProtoFilter(nil); f != nil {
		t.Errorf("ProtoFilter(nil) = %v; want nil", f)
	}
	p := &btpb.RowFilter{Filter: &btpb.RowFilter_FamilyNameRegexFilter{FamilyNameRegexFilter: "fa"}}
	f := ProtoFilter(p)
	if !proto.Equal(f.proto(), p) || !strings.Contains(f.String(), "fa") {
		t.Errorf("ProtoFilter = %v (%v); want the message itself", f, f.proto())
	}
	c := ChainFilters(f, LatestNFilter(1))
	if got := c.proto().GetChain().GetFilters(); len(got) != 2 || !proto.Equal(got[0], p) {
		t.Errorf("ChainFilters(ProtoFilter, LatestN) = %v", c.proto())
	}
	b, err := marshalFilter(f)
	if err != nil || len(b) == 0 {
		t.Errorf("marshalFilter(ProtoFilter) = %x, %v", b, err)
	}
}
