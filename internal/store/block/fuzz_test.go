package block

import (
	"context"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadBlock: any bytes, read as a block, give a block or an error —
// never a panic or an allocation beyond the limits.
func FuzzReadBlock(f *testing.F) {
	for _, n := range []int{0, 1, 7} {
		data, _, _, _ := sample(f, n, 40)
		f.Add(data)
	}
	f.Add([]byte("TBB2\x00\x00\x00\x02"))
	for _, golden := range []string{"block-v2.golden", "block-v3.golden"} {
		if p, err := os.ReadFile(filepath.Join("testdata", golden)); err == nil {
			f.Add(p)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		ctx := context.Background()
		r, err := Open(ctx, mem{"f": data}, "f", int64(len(data)))
		if err != nil {
			return
		}
		rows, err := r.Verify(ctx)
		if err != nil {
			return
		}
		pages, _ := r.Pages(ctx)
		for _, row := range rows {
			bodies, err := r.Page(ctx, pages, int(row.Page))
			if err != nil || int(row.Index) >= len(bodies) {
				t.Fatalf("a verified block's row %+v has no body: %v", row, err)
			}
		}
	})
}

// FuzzParseMeta: any bytes as a meta object and any key.
func FuzzParseMeta(f *testing.F) {
	f.Add([]byte(`{"version":2,"id":"0192a5b6c7d8aabbccddeeff0011","host":"h","size":200,"traces":1,"min_start":1,"max_end":2}`), "blocks/h/0192a5b6c7d8aabbccddeeff0011/meta.json")
	f.Add([]byte(`{}`), "blocks/%41/x/data")
	f.Fuzz(func(t *testing.T, p []byte, key string) {
		if m, err := ParseMeta(p); err == nil {
			if _, err := MarshalMeta(m); err != nil {
				t.Fatal(err)
			}
		}
		if host, id, _, ok := ParseKey(key); ok {
			if h2, id2, _, ok := ParseKey(Dir(host, id) + DataName); !ok || h2 != host || id2 != id {
				t.Fatalf("key %q does not survive Dir: %q %q", key, h2, id2)
			}
		}
	})
}
