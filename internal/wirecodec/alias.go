package wirecodec

import (
	"fmt"
	"reflect"
	"sync"

	"google.golang.org/protobuf/proto"
)

// aliased holds the message types whose Unmarshal leaves their bytes and
// strings in the received buffer (Alias).
var aliased sync.Map // reflect.Type -> struct{}

// unsafeMessage is a message with the generated unmarshal that aliases
// its input (bighivepb's UnmarshalVTUnsafe): every bytes and string field
// is a part of the input, not a copy.
type unsafeMessage interface {
	proto.Message
	Reset()
	UnmarshalVTUnsafe([]byte) error
}

// Alias makes Unmarshal of messages of m's type leave every bytes and
// string field in the buffer the message was received in, rather than copy
// it: the buffer is then the message's, never reused, and lives as long as
// any of those fields does. For messages whose bytes are copied once more
// by their receiver (a Put's value into the memstore) or are large (a
// scan's chunk), the copy out of the message was a copy of every byte and
// an allocation per field. It panics if m has no generated unmarshal.
func Alias(m proto.Message) {
	if _, ok := m.(unsafeMessage); !ok {
		panic(fmt.Sprintf("wirecodec: %T has no generated UnmarshalVTUnsafe", m))
	}
	aliased.Store(reflect.TypeOf(m), struct{}{})
}

// aliasing returns v as a message that Alias named.
func aliasing(v any) (unsafeMessage, bool) {
	if _, ok := aliased.Load(reflect.TypeOf(v)); !ok {
		return nil, false
	}
	return v.(unsafeMessage), true
}
