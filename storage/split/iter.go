package split

import (
	"bytes"

	"bighive/storage/memstore"
)

// clipped yields the entries of src whose rows lie in [start, end) (end
// nil: unbounded); First seeks to start.
type clipped struct {
	src        memstore.Iterator
	start, end []byte
}

func (c *clipped) First() { c.src.SeekGE(memstore.RowStart(c.start)) }

func (c *clipped) SeekGE(key *memstore.Entry) {
	if bytes.Compare(key.Row, c.start) < 0 {
		c.First()
		return
	}
	c.src.SeekGE(key)
}

func (c *clipped) Valid() bool {
	return c.src.Valid() && (c.end == nil || bytes.Compare(c.src.Entry().Row, c.end) < 0)
}

func (c *clipped) Entry() *memstore.Entry { return c.src.Entry() }
func (c *clipped) Next()                  { c.src.Next() }
func (c *clipped) Err() error             { return c.src.Err() }
func (c *clipped) Close() error           { return nil } // the caller closes src
