package zico

import (
	"bufio"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"slices"
	"strconv"
)

// Type is the type of a frame: a request's kind or a reply's status.
type Type int16

// Frame types (Z ZicoPacket).
const (
	OK            Type = 0
	Data          Type = 1
	CRCError      Type = 3
	Ping          Type = 4
	Pong          Type = 5
	AuthError     Type = 6
	InternalError Type = 7
	BadRequest    Type = 8
	BadReply      Type = 9
	EOD           Type = 10
	Hello         Type = 16
)

var typeNames = map[Type]string{
	OK: "OK", Data: "DATA", CRCError: "CRC_ERROR", Ping: "PING", Pong: "PONG",
	AuthError: "AUTH_ERROR", InternalError: "INTERNAL_ERROR", BadRequest: "BAD_REQUEST",
	BadReply: "BAD_REPLY", EOD: "EOD", Hello: "HELLO",
}

func (t Type) String() string {
	if s, ok := typeNames[t]; ok {
		return s
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// Frame layout.
const (
	// HeaderSize is the size of a frame header: magic (4), type (2),
	// payload length (4), CRC (8).
	HeaderSize = 18
	// DefaultMaxPayload is the payload limit of a FrameReader whose limit
	// is zero or less.
	DefaultMaxPayload = 16 << 20
)

// Magic starts every frame.
var Magic = [4]byte{0x21, 0xC0, 0xBA, 0xBE}

// AppendFrame appends a frame of type t carrying payload: the header with
// the payload's CRC-32 in the low half of the 8-byte CRC field (an empty
// payload has CRC 0), then the payload.
func AppendFrame(dst []byte, t Type, payload []byte) []byte {
	dst = append(dst, Magic[:]...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(t))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.BigEndian.AppendUint64(dst, uint64(crc32.ChecksumIEEE(payload)))
	return append(dst, payload...)
}

// The kinds of frame errors (FrameError.Err). Other errors of a
// FrameReader are the underlying reader's (a timeout, a reset connection).
var (
	// ErrShortMagic: the stream ends inside the magic. (The end of the
	// stream at a frame start is io.EOF.)
	ErrShortMagic = errors.New("stream ends inside the magic")
	// ErrMagic: a byte of the magic is wrong.
	ErrMagic = errors.New("wrong magic")
	// ErrTruncated: the stream ends inside the header after the magic, or
	// inside the payload.
	ErrTruncated = errors.New("stream ends inside a frame")
	// ErrTooLarge: the payload length is over the reader's limit.
	ErrTooLarge = errors.New("payload over the limit")
	// ErrLength: the payload length is negative.
	ErrLength = errors.New("negative payload length")
	// ErrCRC: the CRC field does not match the payload.
	ErrCRC = errors.New("CRC mismatch")
)

// FrameError is an error of a FrameReader: the stream offset and the
// reason; Err is one of the kinds above or the reader's error.
type FrameError struct {
	Offset int64 // stream offset of the offending byte
	Msg    string
	Err    error
}

func (e *FrameError) Error() string {
	return "zico frame: offset " + strconv.FormatInt(e.Offset, 10) + ": " + e.Msg
}

func (e *FrameError) Unwrap() error { return e.Err }

// ReplyTo returns the reply zico's server sends before it closes the
// connection after the frame error err (ZICO.md §2), and false when it
// closes without a reply:
//
//	io.EOF (end at a frame start), ErrShortMagic   EOD
//	ErrMagic                                       BAD_REPLY
//	ErrCRC                                         CRC_ERROR
//	ErrTruncated, ErrTooLarge                      BAD_REQUEST
//	ErrLength, I/O errors                          none
//
// zico answers a length over what Java can allocate by closing without
// a reply; our limit is lower and answered BAD_REQUEST, as an oversize
// frame is a request we refuse.
func ReplyTo(err error) (Type, bool) {
	switch {
	case errors.Is(err, io.EOF), errors.Is(err, ErrShortMagic):
		return EOD, true
	case errors.Is(err, ErrMagic):
		return BadReply, true
	case errors.Is(err, ErrCRC):
		return CRCError, true
	case errors.Is(err, ErrTruncated), errors.Is(err, ErrTooLarge):
		return BadRequest, true
	}
	return 0, false
}

// Frame is one frame read by a FrameReader.
type Frame struct {
	Type Type
	// Payload is valid until the next call of Next.
	Payload []byte
	// Offset is the stream offset of the frame's first byte.
	Offset int64
}

// retainPayload is the largest payload buffer a FrameReader keeps for the
// next frame; a larger one is dropped after use.
const retainPayload = 1 << 20

// FrameReader reads frames from a stream. However the bytes arrive (whole,
// split anywhere, one at a time), it returns the same frames and errors.
// A payload buffer grows as the bytes arrive, never ahead of them: a
// length within the limit but not followed by the bytes costs no more
// than the bytes that came.
//
// A FrameReader is not safe for concurrent use. After an error other
// than a timeout it must not be used again.
type FrameReader struct {
	r   *bufio.Reader
	max int
	buf []byte
	off int64 // stream offset of the next byte
	hdr [HeaderSize - 4]byte
}

// NewFrameReader reads frames from r with payloads of at most maxPayload
// bytes (zero or less: DefaultMaxPayload).
func NewFrameReader(r io.Reader, maxPayload int) *FrameReader {
	if maxPayload <= 0 {
		maxPayload = DefaultMaxPayload
	}
	return &FrameReader{r: bufio.NewReaderSize(r, 64<<10), max: maxPayload}
}

// Offset returns the stream offset of the next byte to be read.
func (fr *FrameReader) Offset() int64 { return fr.off }

// Buffered returns the number of bytes read from the stream but not yet
// returned in frames.
func (fr *FrameReader) Buffered() int { return fr.r.Buffered() }

// Next reads the next frame. It returns io.EOF (unwrapped) when the stream
// ends cleanly at a frame start, and a *FrameError otherwise (see the
// kinds above and ReplyTo). The magic is checked byte by byte as it
// arrives, as Java does: a wrong byte fails at once.
func (fr *FrameReader) Next() (Frame, error) {
	if cap(fr.buf) > retainPayload {
		fr.buf = nil
	}
	start := fr.off
	for i := range Magic {
		c, err := fr.r.ReadByte()
		if err != nil {
			switch {
			case err == io.EOF && i == 0:
				return Frame{}, io.EOF
			case err == io.EOF:
				return Frame{}, fr.fail(ErrShortMagic, "stream ends inside the magic")
			}
			return Frame{}, fr.fail(err, err.Error())
		}
		if c != Magic[i] {
			return Frame{}, fr.fail(ErrMagic, "wrong magic byte 0x"+strconv.FormatUint(uint64(c), 16))
		}
		fr.off++
	}
	h := fr.hdr[:]
	n, err := io.ReadFull(fr.r, h)
	fr.off += int64(n)
	if err != nil {
		return Frame{}, fr.eof(err, "header")
	}
	f := Frame{Type: Type(binary.BigEndian.Uint16(h[0:])), Offset: start}
	length := int32(binary.BigEndian.Uint32(h[2:]))
	crc := binary.BigEndian.Uint64(h[6:])
	switch {
	case length < 0:
		return Frame{}, &FrameError{Offset: start + 6, Msg: "negative payload length " + strconv.Itoa(int(length)), Err: ErrLength}
	case int(length) > fr.max:
		return Frame{}, &FrameError{Offset: start + 6, Msg: "payload length " + strconv.Itoa(int(length)) + " over the limit " + strconv.Itoa(fr.max), Err: ErrTooLarge}
	}
	fr.buf = fr.buf[:0]
	for len(fr.buf) < int(length) {
		if len(fr.buf) == cap(fr.buf) {
			grow := min(int(length), max(2*cap(fr.buf), 64<<10)) - len(fr.buf)
			fr.buf = slices.Grow(fr.buf, grow)
		}
		to := min(int(length), cap(fr.buf))
		n, err := io.ReadFull(fr.r, fr.buf[len(fr.buf):to])
		fr.buf = fr.buf[:len(fr.buf)+n]
		fr.off += int64(n)
		if err != nil {
			return Frame{}, fr.eof(err, "payload")
		}
	}
	f.Payload = fr.buf
	if sum := uint64(crc32.ChecksumIEEE(f.Payload)); sum != crc {
		return Frame{}, &FrameError{Offset: start + 10, Msg: "CRC 0x" + strconv.FormatUint(crc, 16) + " in the header, 0x" + strconv.FormatUint(sum, 16) + " computed", Err: ErrCRC}
	}
	return f, nil
}

func (fr *FrameReader) fail(kind error, msg string) error {
	return &FrameError{Offset: fr.off, Msg: msg, Err: kind}
}

// eof reports an error inside the header or payload: the end of the
// stream is ErrTruncated, anything else the reader's error.
func (fr *FrameReader) eof(err error, where string) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fr.fail(ErrTruncated, "stream ends inside the "+where)
	}
	return fr.fail(err, err.Error())
}
