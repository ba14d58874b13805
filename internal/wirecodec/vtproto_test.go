package wirecodec

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	pb "bighive/proto/bighivepb"
)

// wireMessages returns a new message of every type of bighivepb, each
// with generated methods (the codec's fast path).
func wireMessages(t *testing.T) []proto.Message {
	var out []proto.Message
	var walk func(protoreflect.MessageDescriptors)
	walk = func(ms protoreflect.MessageDescriptors) {
		for i := range ms.Len() {
			md := ms.Get(i)
			if md.IsMapEntry() {
				continue
			}
			mt, err := protoregistry.GlobalTypes.FindMessageByName(md.FullName())
			if err != nil {
				t.Fatalf("%s: %v", md.FullName(), err)
			}
			m := mt.New().Interface()
			if _, ok := m.(vtMessage); !ok {
				t.Fatalf("%s has no generated methods: run go generate ./proto/...", md.FullName())
			}
			out = append(out, m)
			walk(md.Messages())
		}
	}
	for _, fd := range []protoreflect.FileDescriptor{pb.File_bighivepb_common_proto, pb.File_bighivepb_tserver_proto, pb.File_bighivepb_master_proto} {
		walk(fd.Messages())
	}
	return out
}

// seededRand returns a generator seeded from the clock, the seed logged.
func seededRand(t *testing.T) *rand.Rand {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	return rand.New(rand.NewPCG(seed, 0))
}

// fill sets every field of m to random values (nested messages to depth
// levels), sometimes leaving a field unset or a list empty.
func fill(r *rand.Rand, m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if r.IntN(4) == 0 {
			continue // unset
		}
		if od := fd.ContainingOneof(); od != nil && !od.IsSynthetic() && m.WhichOneof(od) != nil {
			continue // one member of a oneof
		}
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for range r.IntN(4) {
				mp.Set(scalar(r, fd.MapKey()).MapKey(), value(r, m, fd.MapValue(), mp.NewValue, depth))
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range r.IntN(4) {
				l.Append(value(r, m, fd, l.NewElement, depth))
			}
		default:
			if fd.Kind() == protoreflect.MessageKind && depth == 0 {
				continue
			}
			m.Set(fd, value(r, m, fd, func() protoreflect.Value { return m.NewField(fd) }, depth))
		}
	}
}

// value returns a random value of fd's kind; newMsg makes an empty message
// of its type.
func value(r *rand.Rand, m protoreflect.Message, fd protoreflect.FieldDescriptor, newMsg func() protoreflect.Value, depth int) protoreflect.Value {
	if fd.Kind() == protoreflect.MessageKind || fd.Kind() == protoreflect.GroupKind {
		v := newMsg()
		if depth > 0 {
			fill(r, v.Message(), depth-1)
		}
		return v
	}
	return scalar(r, fd)
}

func scalar(r *rand.Rand, fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(r.IntN(2) == 1)
	case protoreflect.EnumKind:
		vals := fd.Enum().Values()
		return protoreflect.ValueOfEnum(vals.Get(r.IntN(vals.Len())).Number())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(r.Uint32()))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(r.Uint64()) >> r.IntN(64))
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(r.Uint32() >> r.IntN(32))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(r.Uint64() >> r.IntN(64))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(r.Float32())
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(r.NormFloat64())
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(fmt.Sprintf("s%d", r.IntN(1<<20)))
	case protoreflect.BytesKind:
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return protoreflect.ValueOfBytes(b)
	}
	panic(fmt.Sprintf("no random value for %v", fd.Kind()))
}

// TestGeneratedMatchesProto checks, for every bighivepb message filled at
// random, that the codec (the generated methods) and protobuf agree: the
// same size, the codec's bytes decode with proto.Unmarshal to the message,
// and proto.Marshal's bytes decode with the codec to it, over a reused
// message too (Unmarshal resets it, as proto.Unmarshal does).
func TestGeneratedMatchesProto(t *testing.T) {
	r := seededRand(t)
	var c Codec
	for _, empty := range wireMessages(t) {
		name := empty.ProtoReflect().Descriptor().FullName()
		reused := empty.ProtoReflect().New().Interface()
		for round := range 20 {
			m := empty.ProtoReflect().New().Interface()
			fill(r, m.ProtoReflect(), 3)
			want, err := proto.Marshal(m)
			if err != nil {
				t.Fatalf("%s round %d: proto.Marshal: %v", name, round, err)
			}
			if got := Size(m); got != len(want) {
				t.Fatalf("%s round %d: Size %d, proto.Marshal wrote %d", name, round, got, len(want))
			}
			enc, err := c.Marshal(m)
			if err != nil {
				t.Fatalf("%s round %d: Marshal: %v", name, round, err)
			}
			back := empty.ProtoReflect().New().Interface()
			if err := proto.Unmarshal(enc.Materialize(), back); err != nil || !proto.Equal(back, m) {
				t.Fatalf("%s round %d: the codec's bytes decode (err %v) to another message:\n%v\nnot\n%v", name, round, err, back, m)
			}
			enc.Free()
			if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(want)}, reused); err != nil || !proto.Equal(reused, m) {
				t.Fatalf("%s round %d: proto.Marshal's bytes decode with the codec (err %v) to another message:\n%v\nnot\n%v", name, round, err, reused, m)
			}
		}
	}
}

// TestGeneratedRefusesGarbage decodes every prefix of a filled message
// and copies of it with a byte changed: the generated code must return an
// error or a message, never panic or read past the input.
func TestGeneratedRefusesGarbage(t *testing.T) {
	r := seededRand(t)
	var c Codec
	for _, empty := range wireMessages(t) {
		m := empty.ProtoReflect().New().Interface()
		fill(r, m.ProtoReflect(), 3)
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		try := func(in []byte) {
			defer func() {
				if p := recover(); p != nil {
					t.Fatalf("%s: decoding %x panicked: %v", empty.ProtoReflect().Descriptor().FullName(), in, p)
				}
			}()
			_ = c.Unmarshal(mem.BufferSlice{mem.SliceBuffer(in)}, empty.ProtoReflect().New().Interface())
		}
		for n := range len(b) {
			try(b[:n:n])
		}
		for range 50 {
			if len(b) == 0 {
				break
			}
			x := append([]byte(nil), b...)
			x[r.IntN(len(x))] = byte(r.Uint32())
			try(x)
		}
	}
	// A length that runs past the end is an error, not a short field.
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0x0a, 0x05, 'a'})}, &pb.MutateRowRequest{}); err == nil {
		t.Fatal("a string field whose length runs past the message: no error")
	}
}
