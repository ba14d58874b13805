package meta

import (
	"bufio"
	"encoding/binary"
	"io"
)

// Dump writes the whole logical state, every bucket's keys and values in
// bucket and key order, each as length-prefixed bytes. Two replicas that
// applied the same commands write the same bytes, whatever their bbolt
// page layout (a snapshot file, by contrast, differs between replicas).
func (r *Reader) Dump(w io.Writer) error {
	bw := bufio.NewWriter(w)
	put := func(b []byte) error {
		var n [binary.MaxVarintLen64]byte
		if _, err := bw.Write(n[:binary.PutUvarint(n[:], uint64(len(b)))]); err != nil {
			return err
		}
		_, err := bw.Write(b)
		return err
	}
	for _, name := range allBuckets {
		if err := put(name); err != nil {
			return err
		}
		b := r.tx.Bucket(name)
		if b == nil {
			continue
		}
		if err := b.ForEach(func(k, v []byte) error {
			if err := put(k); err != nil {
				return err
			}
			return put(v)
		}); err != nil {
			return err
		}
	}
	return bw.Flush()
}
