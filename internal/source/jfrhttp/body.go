package jfrhttp

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"

	codec "github.com/tracebridge/tracebridge/internal/codec/jfr"
)

// Error is a client's fault: the HTTP status and the reason answered.
type Error struct {
	Status int
	Reason string
}

func (e *Error) Error() string { return e.Reason }

func errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Reason: fmt.Sprintf(format, args...)}
}

// errTooLarge: the decompressed body passed max_body_size.
var errTooLarge = errors.New("body too large")

// gzipMagic begins every gzip stream.
var gzipMagic = []byte{0x1f, 0x8b}

// limited fails with errTooLarge once more than n bytes were read.
type limited struct {
	r    io.Reader
	n    int64 // bytes still allowed
	read int64
}

func (l *limited) Read(p []byte) (int, error) {
	if l.n < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > l.n+1 {
		p = p[:l.n+1]
	}
	k, err := l.r.Read(p)
	l.n -= int64(k)
	l.read += int64(k)
	if l.n < 0 {
		return k, errTooLarge
	}
	return k, err
}

// openRecording returns the recording in a request's body: the jfr part
// of a multipart form, decompressed when gzip (said by encoding, or by
// its magic bytes). body is the request's body, limited already; ctype
// and encoding are its Content-Type and Content-Encoding.
func openRecording(body io.Reader, ctype, encoding string) (io.Reader, error) {
	switch encoding {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, errorf(http.StatusBadRequest, "gzip: %v", readReason(err))
		}
		body = zr
	default:
		return nil, errorf(http.StatusUnsupportedMediaType, "content encoding %q: want gzip or none", encoding)
	}
	if mt, params, err := mime.ParseMediaType(ctype); err == nil && mt == "multipart/form-data" {
		part, err := jfrPart(multipart.NewReader(body, params["boundary"]))
		if err != nil {
			return nil, err
		}
		body = part
	}
	return sniffGzip(body)
}

// jfrPart finds the part named "jfr" of a multipart form, skipping the
// others.
func jfrPart(mr *multipart.Reader) (io.Reader, error) {
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil, errorf(http.StatusBadRequest, "multipart body has no part named jfr")
		}
		if err != nil {
			if errors.Is(err, errTooLarge) {
				return nil, err
			}
			return nil, errorf(http.StatusBadRequest, "multipart: %v", readReason(err))
		}
		if p.FormName() == "jfr" {
			return p, nil
		}
		if _, err := io.Copy(io.Discard, p); err != nil {
			if errors.Is(err, errTooLarge) {
				return nil, err
			}
			return nil, errorf(http.StatusBadRequest, "multipart part %q: %v", p.FormName(), readReason(err))
		}
	}
}

// sniffGzip decompresses r when it begins with gzip's magic bytes.
func sniffGzip(r io.Reader) (io.Reader, error) {
	br := bufio.NewReaderSize(r, 4096)
	head, err := br.Peek(2)
	if err != nil && !errors.Is(err, io.EOF) {
		if errors.Is(err, errTooLarge) {
			return nil, err
		}
		return nil, errorf(http.StatusBadRequest, "reading the body: %v", readReason(err))
	}
	if !bytes.Equal(head, gzipMagic) {
		return br, nil
	}
	zr, err := gzip.NewReader(br)
	if err != nil {
		return nil, errorf(http.StatusBadRequest, "gzip: %v", readReason(err))
	}
	return zr, nil
}

// readReason words a read error for the answer.
func readReason(err error) string {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return "the body ends early"
	}
	return err.Error()
}

// chunkReader cuts a recording read from r into its chunks, one at a
// time, into a buffer it reuses.
type chunkReader struct {
	r   io.Reader
	off int64 // offset in the recording of the next chunk
	max int64 // max_chunk_size
	buf []byte
}

// next reads the next chunk: its header and bytes (the whole chunk,
// header included; valid until the next call). It returns io.EOF at the
// end of the recording, an *Error for what is not a complete chunk, and
// read errors as they are (errTooLarge, *http.MaxBytesError, gzip's).
func (cr *chunkReader) next() (codec.Header, []byte, error) {
	var head [codec.HeaderSize]byte
	n, err := io.ReadFull(cr.r, head[:])
	switch {
	case n == 0 && errors.Is(err, io.EOF):
		if cr.off == 0 {
			return codec.Header{}, nil, errorf(http.StatusBadRequest, "empty recording: no JFR chunk")
		}
		return codec.Header{}, nil, io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		if cr.off == 0 && !bytes.HasPrefix(codec.Magic[:], head[:min(n, 4)]) {
			return codec.Header{}, nil, errorf(http.StatusBadRequest, "not a JFR recording: it begins with % x", head[:min(n, 8)])
		}
		return codec.Header{}, nil, errorf(http.StatusBadRequest, "truncated recording: offset %d: the chunk header ends after %d of %d bytes", cr.off, n, codec.HeaderSize)
	case err != nil:
		return codec.Header{}, nil, err
	}
	h, err := codec.ParseHeader(head[:])
	if err != nil {
		if !bytes.Equal(head[:4], codec.Magic[:]) {
			if cr.off == 0 {
				return h, nil, errorf(http.StatusBadRequest, "not a JFR recording: it begins with % x", head[:8])
			}
			return h, nil, errorf(http.StatusBadRequest, "corrupt recording: offset %d: no JFR chunk after the previous one (it begins with % x)", cr.off, head[:8])
		}
		return h, nil, errorf(http.StatusBadRequest, "chunk at offset %d: %v", cr.off, err)
	}
	if h.ChunkSize < codec.HeaderSize {
		return h, nil, errorf(http.StatusBadRequest, "corrupt recording: chunk at offset %d: size %d is smaller than its header", cr.off, h.ChunkSize)
	}
	if h.ChunkSize > cr.max {
		return h, nil, errorf(http.StatusRequestEntityTooLarge, "chunk at offset %d: %d bytes exceed max_chunk_size %d", cr.off, h.ChunkSize, cr.max)
	}
	if int64(cap(cr.buf)) < h.ChunkSize {
		cr.buf = make([]byte, h.ChunkSize)
	}
	buf := cr.buf[:h.ChunkSize]
	copy(buf, head[:])
	n, err = io.ReadFull(cr.r, buf[codec.HeaderSize:])
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return h, nil, errorf(http.StatusBadRequest, "truncated recording: chunk at offset %d: its header says %d bytes, the body ends after %d", cr.off, h.ChunkSize, codec.HeaderSize+n)
	}
	if err != nil {
		return h, nil, err
	}
	return h, buf, nil
}
