package wirecodec

import (
	"fmt"
	"reflect"
	"sync"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// aliased maps a message type to the number of the bytes field that
// Unmarshal leaves in the received buffer instead of copying (AliasField).
var aliased sync.Map // reflect.Type -> protowire.Number

// AliasField makes Unmarshal of messages of m's type leave the named
// bytes field (a singular bytes field, "chunk" of a scan's responses) in
// the buffer the message was received in, rather than copy it: the buffer
// is then the message's, never reused. A scan's messages are 1 MiB
// chunks, and that copy was a third of the copying in a scanning client.
// It panics if the field is not a singular bytes field of m.
func AliasField(m proto.Message, field protoreflect.Name) {
	fd := m.ProtoReflect().Descriptor().Fields().ByName(field)
	if fd == nil || fd.Kind() != protoreflect.BytesKind || fd.Cardinality() == protoreflect.Repeated {
		panic(fmt.Sprintf("wirecodec: %s has no singular bytes field %s", m.ProtoReflect().Descriptor().FullName(), field))
	}
	aliased.Store(reflect.TypeOf(m), fd.Number())
}

// aliasedField returns the field of v's type that AliasField named.
func aliasedField(v any) (protowire.Number, bool) {
	n, ok := aliased.Load(reflect.TypeOf(v))
	if !ok {
		return 0, false
	}
	return n.(protowire.Number), true
}

// unmarshalAliasing decodes b into m, setting field to a subslice of b and
// decoding every other field with proto.Unmarshal. The last occurrence of
// field wins, as in proto.Unmarshal.
func unmarshalAliasing(b []byte, m proto.Message, field protowire.Number) error {
	var value []byte
	var cuts [][2]int // where the field's occurrences are in b
	for off := 0; off < len(b); {
		num, typ, n := protowire.ConsumeTag(b[off:])
		if n < 0 {
			return fmt.Errorf("wirecodec: unmarshal %T: bad tag at byte %d: %w", m, off, protowire.ParseError(n))
		}
		fieldLen := protowire.ConsumeFieldValue(num, typ, b[off+n:])
		if fieldLen < 0 {
			return fmt.Errorf("wirecodec: unmarshal %T: bad field %d at byte %d: %w", m, num, off, protowire.ParseError(fieldLen))
		}
		if num == field && typ == protowire.BytesType {
			value, _ = protowire.ConsumeBytes(b[off+n:])
			cuts = append(cuts, [2]int{off, off + n + fieldLen})
		}
		off += n + fieldLen
	}
	// The other fields: b without the field's occurrences, a subslice of
	// b when the field is first or last (one occurrence, as a sender
	// writes it), else a copy of the rest.
	rest := b
	switch {
	case len(cuts) == 0:
	case len(cuts) == 1 && cuts[0][0] == 0:
		rest = b[cuts[0][1]:]
	case len(cuts) == 1 && cuts[0][1] == len(b):
		rest = b[:cuts[0][0]]
	default:
		rest = nil
		prev := 0
		for _, c := range cuts {
			rest = append(rest, b[prev:c[0]]...)
			prev = c[1]
		}
		rest = append(rest, b[prev:]...)
	}
	if err := unmarshal(rest, m); err != nil {
		return err
	}
	if len(value) > 0 {
		mr := m.ProtoReflect()
		mr.Set(mr.Descriptor().Fields().ByNumber(field), protoreflect.ValueOfBytes(value))
	}
	return nil
}
