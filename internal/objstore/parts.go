package objstore

import (
	"errors"
	"io"
)

// partsReader reads parts one after the other as one object. It is an
// io.ReaderAt and an io.Seeker as bytes.Reader is: minio-go then reads
// the parts of a multipart upload from it in place, where any other
// reader is copied into buffers of the part size.
type partsReader struct {
	parts [][]byte
	size  int64
	off   int64
}

func newPartsReader(parts [][]byte) *partsReader {
	r := &partsReader{parts: parts}
	for _, p := range parts {
		r.size += int64(len(p))
	}
	return r
}

func (r *partsReader) Read(b []byte) (int, error) {
	n, err := r.ReadAt(b, r.off)
	r.off += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (r *partsReader) ReadAt(b []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("objstore: negative offset")
	}
	if off >= r.size {
		return 0, io.EOF
	}
	n := 0
	for _, p := range r.parts {
		if n == len(b) {
			break
		}
		if off >= int64(len(p)) {
			off -= int64(len(p))
			continue
		}
		c := copy(b[n:], p[off:])
		n += c
		off = 0
	}
	if n < len(b) {
		return n, io.EOF
	}
	return n, nil
}

func (r *partsReader) Seek(offset int64, whence int) (int64, error) {
	switch whence {
	case io.SeekStart:
	case io.SeekCurrent:
		offset += r.off
	case io.SeekEnd:
		offset += r.size
	default:
		return 0, errors.New("objstore: bad whence")
	}
	if offset < 0 {
		return 0, errors.New("objstore: negative position")
	}
	r.off = offset
	return offset, nil
}
