package blockstore

import (
	"testing"
)

// FuzzMetadataReplay feeds arbitrary bytes to the metadata replay: it never
// panics, every finding names the file and an offset inside it, and bytes
// that are not a whole valid file are reported (malformed, corrupt or partial).
func FuzzMetadataReplay(f *testing.F) {
	valid := encodeMetaHeader()
	for i := range 3 {
		off, n := int64(i*4096), int64(100)
		valid = appendRecord(valid, createRecord(BlockID(i+1), off, n))
	}
	valid = appendRecord(valid, deleteRecord(2))
	f.Add(valid, int64(1<<20))
	f.Add(valid[:len(valid)-2], int64(1<<20))
	f.Add(valid, int64(50))
	f.Add(encodeMetaHeader(), int64(0))
	f.Add([]byte("garbage"), int64(10))
	dup := appendRecord(append([]byte(nil), valid...), createRecord(1, 0, 1))
	f.Add(dup, int64(1<<20))
	d := &dataDir{path: "/d", blockSize: 4096}
	m := &logManager{opts: Options{MaxContainerSize: 1 << 30, CompactLiveRatio: 0.5}}
	f.Fuzz(func(t *testing.T, data []byte, dataSize int64) {
		if dataSize < 0 {
			dataSize = -dataSize
		}
		lc := &loadedContainer{c: &container{m: m, dir: d, name: "/d/c"}, partialAt: -1}
		rep := &Report{}
		lc.replay(data, dataSize, rep)
		for _, fd := range rep.Findings {
			if fd.File == "" || fd.Offset < 0 || fd.Offset > int64(len(data)) {
				t.Fatalf("finding without a file or with a bad offset: %v", fd)
			}
		}
		if lc.partialAt > int64(len(data)) {
			t.Fatalf("truncation point %d past %d bytes", lc.partialAt, len(data))
		}
		for _, b := range lc.live {
			if b.off < 0 || b.n < 0 || b.off+b.n > dataSize {
				t.Fatalf("live block outside the data file: %+v", b)
			}
		}
		if len(data) < metaHeaderSize && len(rep.Findings) == 0 {
			t.Fatal("short file not reported")
		}
	})
}
