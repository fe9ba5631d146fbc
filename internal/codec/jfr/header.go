package jfr

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// HeaderSize is the size of a chunk header.
const HeaderSize = 68

// Magic opens every chunk.
var Magic = [4]byte{'F', 'L', 'R', 0}

// Header states (byte 64): 0 is a finished chunk, 255 a header being
// rewritten, anything else the generation of a live chunk's header.
const (
	StateFinished = 0
	StateUpdating = 255
)

// Header flag bits (bytes 66–67).
const (
	FlagCompressedInts = 1 << 0
	FlagFinal          = 1 << 1
)

var (
	// ErrHeaderBusy means the writer was rewriting the header while it was
	// read (the live protocol's state 255, or two reads that disagree).
	// Read it again a millisecond later.
	ErrHeaderBusy = errors.New("jfr: chunk header is being updated")
	// ErrNotReady means the header of a live chunk is valid but points to
	// no metadata yet: the JVM has not flushed the chunk's first segment.
	ErrNotReady = errors.New("jfr: chunk has no metadata yet")
	// ErrUnsupportedVersion is wrapped by errors for chunk versions this
	// reader does not read (anything but 2.x), and for chunks whose
	// integers are not compressed.
	ErrUnsupportedVersion = errors.New("jfr: unsupported chunk format")
)

// Header is a chunk header. Offsets are relative to the chunk's start; sizes
// include the header.
type Header struct {
	Major, Minor uint16
	// ChunkSize is the size of the chunk; in a live chunk the end of the
	// data that is complete.
	ChunkSize int64
	// CheckpointOffset is the offset of the newest checkpoint event.
	CheckpointOffset int64
	// MetadataOffset is the offset of the newest metadata event; 0 in a
	// live chunk that has none yet.
	MetadataOffset int64
	StartNanos     int64 // epoch nanoseconds, UTC
	DurationNanos  int64
	StartTicks     int64
	TicksPerSecond int64
	State          uint8
	Flags          uint16
}

// Finished reports whether the chunk is complete and will not change.
func (h Header) Finished() bool { return h.State == StateFinished }

// Final reports whether the chunk is the last of a stopped recording.
func (h Header) Final() bool { return h.Flags&FlagFinal != 0 }

// ParseHeader decodes and checks a header from the first HeaderSize bytes
// of b. It returns ErrNotReady (with the header filled in) for a live chunk
// without metadata.
func ParseHeader(b []byte) (Header, error) {
	var h Header
	if len(b) < HeaderSize {
		return h, &FormatError{Offset: int64(len(b)), Reason: fmt.Sprintf("chunk header needs %d bytes, have %d", HeaderSize, len(b))}
	}
	if !bytes.Equal(b[:4], Magic[:]) {
		return h, &FormatError{Reason: fmt.Sprintf("not a JFR chunk (magic % x)", b[:4])}
	}
	be := binary.BigEndian
	h.Major = be.Uint16(b[4:])
	h.Minor = be.Uint16(b[6:])
	h.ChunkSize = int64(be.Uint64(b[8:]))
	h.CheckpointOffset = int64(be.Uint64(b[16:]))
	h.MetadataOffset = int64(be.Uint64(b[24:]))
	h.StartNanos = int64(be.Uint64(b[32:]))
	h.DurationNanos = int64(be.Uint64(b[40:]))
	h.StartTicks = int64(be.Uint64(b[48:]))
	h.TicksPerSecond = int64(be.Uint64(b[56:]))
	h.State = b[64]
	h.Flags = be.Uint16(b[66:])
	return h, h.check()
}

func (h Header) check() error {
	if h.Major != 2 {
		return &FormatError{Offset: 4, Reason: fmt.Sprintf("format version %d.%d", h.Major, h.Minor), Err: ErrUnsupportedVersion}
	}
	if h.Flags&FlagCompressedInts == 0 {
		return &FormatError{Offset: 66, Reason: "integers are not compressed", Err: ErrUnsupportedVersion}
	}
	if h.State == StateUpdating {
		return ErrHeaderBusy
	}
	if h.ChunkSize < HeaderSize {
		return &FormatError{Offset: 8, Reason: fmt.Sprintf("chunk size %d is smaller than the header", h.ChunkSize)}
	}
	if h.TicksPerSecond <= 0 {
		return &FormatError{Offset: 56, Reason: fmt.Sprintf("ticks per second %d", h.TicksPerSecond)}
	}
	if h.MetadataOffset == 0 {
		if h.Finished() {
			return &FormatError{Offset: 24, Reason: "finished chunk without metadata"}
		}
		return ErrNotReady
	}
	if h.MetadataOffset < HeaderSize || h.MetadataOffset >= h.ChunkSize {
		return &FormatError{Offset: 24, Reason: fmt.Sprintf("metadata offset %d outside the chunk of %d bytes", h.MetadataOffset, h.ChunkSize)}
	}
	if h.CheckpointOffset != 0 && (h.CheckpointOffset < HeaderSize || h.CheckpointOffset >= h.ChunkSize) {
		return &FormatError{Offset: 16, Reason: fmt.Sprintf("checkpoint offset %d outside the chunk of %d bytes", h.CheckpointOffset, h.ChunkSize)}
	}
	return nil
}

// ReadHeader reads the header of the chunk that starts at offset 0 of r,
// following the live protocol (a sequence lock): the header is read twice,
// each read ending with the state byte, and accepted only when both reads
// agree and the writer was not rewriting it (state 255). The JVM sets state
// 255, rewrites the fields, then sets the new state, so a torn first read
// differs from the second. It returns
// ErrHeaderBusy when the writer was (try again a millisecond later),
// ErrNotReady when a live chunk has no metadata yet, io.ErrUnexpectedEOF
// when fewer than HeaderSize bytes exist, and a *FormatError for anything
// that is not a readable chunk header.
//
// Once a header is accepted, bytes [HeaderSize, ChunkSize) of the chunk are
// complete and do not change.
func ReadHeader(r io.ReaderAt) (Header, error) {
	var a, b [HeaderSize]byte
	if _, err := r.ReadAt(a[:], 0); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Header{}, err
	}
	if a[64] == StateUpdating {
		return Header{}, ErrHeaderBusy
	}
	if _, err := r.ReadAt(b[:], 0); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Header{}, err
	}
	if a != b {
		return Header{}, ErrHeaderBusy
	}
	return ParseHeader(a[:])
}

// AppendHeader appends the encoding of h to dst (tests and tools use it to
// write chunks).
func AppendHeader(dst []byte, h Header) []byte {
	be := binary.BigEndian
	dst = append(dst, Magic[:]...)
	dst = be.AppendUint16(dst, h.Major)
	dst = be.AppendUint16(dst, h.Minor)
	for _, v := range []int64{h.ChunkSize, h.CheckpointOffset, h.MetadataOffset, h.StartNanos, h.DurationNanos, h.StartTicks, h.TicksPerSecond} {
		dst = be.AppendUint64(dst, uint64(v))
	}
	dst = append(dst, h.State, 0)
	return be.AppendUint16(dst, h.Flags)
}
