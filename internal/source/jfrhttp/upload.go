package jfrhttp

import (
	"bytes"
	"errors"
	"io"
	"net/http"

	codec "github.com/tracebridge/tracebridge/internal/codec/jfr"
	"github.com/tracebridge/tracebridge/internal/record"
)

// result counts what became of an upload.
type result struct {
	Chunks int   `json:"chunks"`
	Events int64 `json:"events"`
	// Duplicates are chunks of Chunks that the host had sent before:
	// their events were not handed on again.
	Duplicates int   `json:"duplicates"`
	Skipped    int64 `json:"skipped"` // malformed events left out
}

// decoder reads the chunks of one upload into batches.
type decoder struct {
	stream    *codec.Stream
	batchSize int
	// emit hands a batch on and returns an empty one (ownership moves).
	emit func(*record.Batch) (*record.Batch, error)
	// skipped hears about each malformed event left out (nil: none).
	skipped func(error)
	// seen, when set, has the chunks host sent before; they are read
	// for their constants (a later chunk may refer to them) but their
	// events are not handed on again.
	seen *seenChunks
	host string
}

// decode reads cr's chunks one at a time and hands their records on in
// batches of b's origin. It returns the counts so far and an *Error for
// a recording that is not JFR, truncated or corrupt, a read error, or
// emit's error.
func (d *decoder) decode(cr *chunkReader, b *record.Batch) (result, error) {
	var res result
	origin := b.Origin
	flush := func() error {
		if b.Len() == 0 {
			return nil
		}
		n := int64(b.Len())
		nb, err := d.emit(b)
		if err != nil {
			return err
		}
		res.Events += n
		b = nb
		b.Origin = origin
		return nil
	}
	for {
		h, chunk, err := cr.next()
		if errors.Is(err, io.EOF) {
			return res, flush()
		}
		if err != nil {
			if ferr := flush(); ferr != nil {
				return res, ferr
			}
			return res, err
		}
		claimed := d.seen == nil || d.seen.claim(d.host, h)
		// fail hands on what was decoded before err, and lets a later
		// upload send this chunk again.
		release := func() {
			if claimed && d.seen != nil {
				d.seen.release(d.host, h)
			}
		}
		fail := func(err error) (result, error) {
			release()
			if ferr := flush(); ferr != nil {
				return res, ferr
			}
			return res, err
		}
		c, err := d.stream.Open(bytes.NewReader(chunk), cr.off, h)
		if err != nil {
			return fail(errorf(http.StatusBadRequest, "corrupt recording: %v", err))
		}
		if !claimed { // its constants are read: the next chunk may refer to them
			res.Chunks++
			res.Duplicates++
			cr.off += h.ChunkSize
			continue
		}
		c.Settle() // the upload is all there is: nothing defines missing constants later
		for {
			_, err := c.Next(b, d.batchSize)
			if b.Len() >= d.batchSize {
				if ferr := flush(); ferr != nil {
					release()
					return res, ferr
				}
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err == nil {
				continue
			}
			if c.Broken() {
				return fail(errorf(http.StatusBadRequest, "corrupt recording: %v", err))
			}
			res.Skipped++
			if d.skipped != nil {
				d.skipped(err)
			}
		}
		// The chunk is handed on whole before the next is read: a
		// remembered chunk is one whose events all went on.
		if err := flush(); err != nil {
			release()
			return res, err
		}
		res.Chunks++
		cr.off += h.ChunkSize
	}
}
