package block

import (
	"context"
	"fmt"
	"hash/crc32"
)

// RangeGetter reads bytes of a data object (objstore's GetRange).
type RangeGetter interface {
	GetRange(ctx context.Context, key string, off, n int64) ([]byte, error)
}

// Reader reads a data object's parts by range, checking each; it keeps
// the footer only, so the caller decides what to cache.
type Reader struct {
	get    RangeGetter
	key    string
	size   int64
	Footer Footer
	// FooterCRC is the footer's checksum (Meta.FooterCRC).
	FooterCRC uint32
}

// Open reads and checks the footer of the data object key of size bytes.
func Open(ctx context.Context, get RangeGetter, key string, size int64) (*Reader, error) {
	if size < HeaderSize+FooterSizeV2 {
		return nil, fmt.Errorf("block %s: %w", key, corruptf("%d bytes: too short for a block", size))
	}
	// The footer of the newest version is the longest: read that much (a
	// smaller object of an older version: all of it but the header).
	n := min(int64(FooterSize), size-HeaderSize)
	tail, err := get.GetRange(ctx, key, size-n, n)
	if err != nil {
		return nil, fmt.Errorf("block %s: footer: %w", key, err)
	}
	f, err := ParseFooter(tail, size)
	if err != nil {
		return nil, fmt.Errorf("block %s: %w", key, err)
	}
	return &Reader{get: get, key: key, size: size, Footer: f, FooterCRC: crc32.Checksum(tail[len(tail)-footerSize(f.Version):], castagnoli)}, nil
}

// Key returns the data object's key; Size its size.
func (r *Reader) Key() string { return r.key }
func (r *Reader) Size() int64 { return r.size }

func (r *Reader) section(ctx context.Context, s Section, what string) ([]byte, error) {
	p, err := r.get.GetRange(ctx, r.key, int64(s.Off), int64(s.Len))
	if err != nil {
		return nil, fmt.Errorf("block %s: %s: %w", r.key, what, err)
	}
	return p, nil
}

func (r *Reader) wrap(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("block %s: %w", r.key, err)
}

// Dict reads the dictionary.
func (r *Reader) Dict(ctx context.Context) ([]string, error) {
	p, err := r.section(ctx, r.Footer.Dict, "dictionary")
	if err != nil {
		return nil, err
	}
	d, err := r.Footer.ParseDict(p)
	return d, r.wrap(err)
}

// Pages reads the page table.
func (r *Reader) Pages(ctx context.Context) ([]PageRef, error) {
	p, err := r.section(ctx, r.Footer.Pages, "page table")
	if err != nil {
		return nil, err
	}
	pages, err := r.Footer.ParsePages(p)
	return pages, r.wrap(err)
}

// Index reads the index (rows sorted by trace id, then start); the page
// table and the dictionary's length check its positions and symbols.
func (r *Reader) Index(ctx context.Context, dictLen int, pages []PageRef) ([]Summary, error) {
	p, err := r.section(ctx, r.Footer.Index, "index")
	if err != nil {
		return nil, err
	}
	rows, err := r.Footer.ParseIndex(p, dictLen, pages)
	return rows, r.wrap(err)
}

// Attrs reads the attribute filter; IDs the trace-id filter.
func (r *Reader) Attrs(ctx context.Context) (*Bloom, error) {
	p, err := r.section(ctx, r.Footer.Attrs, "attribute filter")
	if err != nil {
		return nil, err
	}
	b, err := ParseFilter(r.Footer.Attrs, p, "attribute filter")
	return b, r.wrap(err)
}

func (r *Reader) IDs(ctx context.Context) (*Bloom, error) {
	p, err := r.section(ctx, r.Footer.IDs, "id filter")
	if err != nil {
		return nil, err
	}
	b, err := ParseFilter(r.Footer.IDs, p, "id filter")
	return b, r.wrap(err)
}

// Terms reads the term index (nil, nil for a block of version 2, which
// has none: every trace may hold any term).
func (r *Reader) Terms(ctx context.Context) (*Terms, error) {
	if r.Footer.Version < 3 {
		return nil, nil
	}
	p, err := r.section(ctx, r.Footer.Terms, "term index")
	if err != nil {
		return nil, err
	}
	t, err := r.Footer.ParseTerms(p)
	return t, r.wrap(err)
}

// Page reads page i's trace bodies.
func (r *Reader) Page(ctx context.Context, pages []PageRef, i int) ([][]byte, error) {
	if i < 0 || i >= len(pages) {
		return nil, fmt.Errorf("block %s: no page %d", r.key, i)
	}
	pg := pages[i]
	p, err := r.get.GetRange(ctx, r.key, int64(pg.Off), int64(pg.Len))
	if err != nil {
		return nil, fmt.Errorf("block %s: page %d: %w", r.key, i, err)
	}
	b, err := ParsePage(pg, p, i)
	return b, r.wrap(err)
}

// Verify reads and checks every part of the block: checksums, the index
// against the page table and dictionary, each page's trace count, the id
// filter holding every indexed trace, the term index's rows. It returns
// the index.
func (r *Reader) Verify(ctx context.Context) ([]Summary, error) {
	dict, err := r.Dict(ctx)
	if err != nil {
		return nil, err
	}
	pages, err := r.Pages(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := r.Index(ctx, len(dict), pages)
	if err != nil {
		return nil, err
	}
	if _, err := r.Attrs(ctx); err != nil {
		return nil, err
	}
	ids, err := r.IDs(ctx)
	if err != nil {
		return nil, err
	}
	if _, err := r.Terms(ctx); err != nil {
		return nil, err
	}
	for i := range rows {
		if !ids.Has(HashID(rows[i].ID)) {
			return nil, fmt.Errorf("block %s: %w", r.key, corruptf("trace %s is indexed but not in the id filter", rows[i].ID))
		}
	}
	for i := range pages {
		if _, err := r.Page(ctx, pages, i); err != nil {
			return nil, err
		}
	}
	return rows, nil
}
