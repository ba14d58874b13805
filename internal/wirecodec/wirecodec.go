package wirecodec

import (
	"fmt"
	"math/bits"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"

	"bighive/internal/rawalloc"
)

// Name is the codec's name, the content subtype of every gRPC message.
const Name = "proto"

// DialOptions make a connection use the codec and Pool.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(Codec{})),
		experimental.WithBufferPool(Pool),
	}
}

// ServerOptions make a server use the codec and Pool.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(Codec{}),
		experimental.BufferPool(Pool),
	}
}

// Codec marshals and unmarshals protobuf messages with buffers from Pool.
type Codec struct{}

var _ interface {
	Marshal(any) (mem.BufferSlice, error)
	Unmarshal(mem.BufferSlice, any) error
	Name() string
} = Codec{}

// Encoded is a message already in its wire form: sent (a stream's
// SendMsg) in place of a proto.Message, Marshal hands its buffers to gRPC
// as they are, without copying them. gRPC frees them once the message is
// written (a buffer from Pool then goes back to it), so the sender must not
// touch them after SendMsg; an Encoded is sent once.
type Encoded struct {
	Data mem.BufferSlice
}

// Marshal encodes v, which must be a proto.Message, into one buffer; an
// *Encoded is taken as it is.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	if e, ok := v.(*Encoded); ok {
		data := e.Data
		e.Data = nil
		if data == nil {
			return nil, fmt.Errorf("wirecodec: marshal: an Encoded message sent twice")
		}
		return data, nil
	}
	if m, ok := v.(vtMessage); ok {
		return marshalVT(m)
	}
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("wirecodec: marshal: %T is not a proto.Message", v)
	}
	// Size fills the messages' cached sizes, which the append then uses
	// instead of computing every nested size again (as gRPC's codec does;
	// m is not changed meanwhile).
	size := proto.Size(m)
	opts := proto.MarshalOptions{UseCachedSize: true}
	if mem.IsBelowBufferPoolingThreshold(size) {
		b, err := opts.MarshalAppend(make([]byte, 0, size), m)
		if err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := Pool.Get(size)
	b, err := opts.MarshalAppend((*buf)[:0], m)
	if err != nil {
		Pool.Put(buf)
		return nil, err
	}
	*buf = b
	return mem.BufferSlice{mem.NewBuffer(buf, Pool)}, nil
}

// vtMessage is a message with generated marshal, unmarshal and size
// methods (bighivepb's *_vtproto.pb.go): straight-line code per field,
// where protobuf's own walks the message's reflection tables.
type vtMessage interface {
	proto.Message
	Reset()
	SizeVT() int
	MarshalToSizedBufferVT([]byte) (int, error)
	UnmarshalVT([]byte) error
}

// marshalVT is Marshal of a message with generated methods.
func marshalVT(m vtMessage) (mem.BufferSlice, error) {
	size := m.SizeVT()
	if mem.IsBelowBufferPoolingThreshold(size) {
		b := make([]byte, size)
		if err := marshalInto(m, b); err != nil {
			return nil, err
		}
		return mem.BufferSlice{mem.SliceBuffer(b)}, nil
	}
	buf := Pool.Get(size)
	if err := marshalInto(m, *buf); err != nil {
		Pool.Put(buf)
		return nil, err
	}
	return mem.BufferSlice{mem.NewBuffer(buf, Pool)}, nil
}

// marshalInto writes m into b, its exact size: the generated code writes
// backwards from b's end, and must fill every byte (Pool's invariant).
func marshalInto(m vtMessage, b []byte) error {
	n, err := m.MarshalToSizedBufferVT(b)
	if err == nil && n != len(b) {
		err = fmt.Errorf("wirecodec: marshal %T: wrote %d bytes of its size %d", m, n, len(b))
	}
	return err
}

// Size is proto.Size(m), through the generated method when m has one.
func Size(m proto.Message) int {
	if v, ok := m.(vtMessage); ok {
		return v.SizeVT()
	}
	return proto.Size(m)
}

// unmarshal is proto.Unmarshal(b, m), through the generated method when m
// has one: m is reset first, as proto.Unmarshal resets it.
func unmarshal(b []byte, m proto.Message) error {
	if v, ok := m.(vtMessage); ok {
		v.Reset()
		return v.UnmarshalVT(b)
	}
	return proto.Unmarshal(b, m)
}

// Unmarshal decodes data into v, which must be a proto.Message.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("wirecodec: unmarshal: %T is not a proto.Message", v)
	}
	if am, ok := aliasing(v); ok {
		// The message keeps parts of the buffer (Alias), so the buffer
		// is never freed: one received whole is taken as it is; a
		// message in several frames is copied into a buffer of its own,
		// not one of Pool's, and not cleared first (the copy fills it).
		var b []byte
		if len(data) == 1 {
			data[0].Ref()
			b = data[0].ReadOnlyData()
		} else {
			b = rawalloc.Bytes(data.Len())
			data.CopyTo(b)
		}
		am.Reset()
		return am.UnmarshalVTUnsafe(b)
	}
	buf := data.MaterializeToBuffer(Pool)
	defer buf.Free()
	return unmarshal(buf.ReadOnlyData(), m)
}

// Name is "proto".
func (Codec) Name() string { return Name }

// Pool is a gRPC buffer pool of power-of-two size classes that hands out
// buffers without clearing them (see the package invariants).
var Pool mem.BufferPool = &pool{}

// Size classes: 2^minShift to 2^maxShift bytes; larger buffers are not
// pooled.
const (
	minShift = 8
	maxShift = 22
)

type pool struct {
	classes [maxShift - minShift + 1]sync.Pool
}

// class returns the size class of a buffer of n bytes, and false if n
// is over the largest.
func class(n int) (int, bool) {
	if n <= 1<<minShift {
		return 0, true
	}
	c := bits.Len(uint(n-1)) - minShift
	return c, c <= maxShift-minShift
}

func (p *pool) Get(n int) *[]byte {
	c, ok := class(n)
	if !ok {
		b := make([]byte, n)
		return &b
	}
	if b, _ := p.classes[c].Get().(*[]byte); b != nil {
		*b = (*b)[:n]
		return b
	}
	// Not cleared: every buffer from the pool is written before it is
	// read (the package invariants), a new one as much as a reused one.
	b := rawalloc.Bytes(1 << (c + minShift))[:n]
	return &b
}

func (p *pool) Put(b *[]byte) {
	c, ok := class(cap(*b))
	if !ok || cap(*b) != 1<<(c+minShift) {
		return // not one of ours, or too large: let the GC have it
	}
	p.classes[c].Put(b)
}
