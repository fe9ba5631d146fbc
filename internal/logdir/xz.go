package logdir

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"time"

	"github.com/ulikunitz/xz/lzma"
)

// The xz container (https://tukaani.org/xz/xz-file-format.txt) is read and
// written here around ulikunitz/xz's LZMA2 coder, for two reasons the
// package's own xz.Reader and xz.Writer cannot serve: the reader must not
// allocate whatever dictionary a file declares (Limits.XZDict bounds it),
// and the writer must flush (lzma.Writer2.Flush ends the current LZMA2
// chunk, so everything written so far becomes decodable from the file).

var (
	xzMagic     = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
	xzFooter    = []byte("YZ")
	crc64Table  = crc64.MakeTable(crc64.ECMA)
	xzFilterLZ2 = uint64(0x21)
)

const (
	xzCheckNone   = 0x00
	xzCheckCRC32  = 0x01
	xzCheckCRC64  = 0x04
	xzCheckSHA256 = 0x0a
)

// xzCheckSize returns the size of a block's check field for a check id.
func xzCheckSize(id byte) int {
	if id == 0 {
		return 0
	}
	return 4 << ((id - 1) / 3)
}

// xzDictSize decodes the LZMA2 dictionary size byte.
func xzDictSize(b byte) (int64, error) {
	if b > 40 {
		return 0, corrupt("xz: LZMA2 dictionary size byte %d over 40", b)
	}
	if b == 40 {
		return 0xffffffff, nil
	}
	return int64(2|b&1) << (b/2 + 11), nil
}

type xzState uint8

const (
	xzStreamHeader xzState = iota
	xzBlockOrIndex
	xzBlockData
	xzPadding
)

// xzReader decodes concatenated xz streams with their stream padding,
// checking headers, check fields, index and footer.
type xzReader struct {
	src     *source
	maxDict int64
	state   xzState
	flags   [2]byte
	check   byte
	hash    hash.Hash
	sum     []byte
	lz      *lzma.Reader2
	hdr     [1024]byte
	streams int

	// the current block
	blockStart, dataStart int64
	hdrCompressed         int64 // -1: not in the header
	hdrUncompressed       int64
	uncompressed          int64
	// the stream's blocks, to compare with its index
	blocks, unpaddedSum, uncompressedSum uint64
}

func newXZReader(src *source, maxDict int64) *xzReader {
	return &xzReader{src: src, maxDict: maxDict}
}

func (x *xzReader) Read(p []byte) (int, error) {
	for {
		switch x.state {
		case xzStreamHeader:
			if err := x.readStreamHeader(); err != nil {
				return 0, err
			}
			x.state = xzBlockOrIndex
		case xzBlockOrIndex:
			c, err := x.src.ReadByte()
			if err != nil {
				return 0, noEOF(err)
			}
			if c == 0 {
				if err := x.readIndexAndFooter(); err != nil {
					return 0, err
				}
				x.state = xzPadding
				continue
			}
			if err := x.readBlockHeader(c); err != nil {
				return 0, err
			}
			x.state = xzBlockData
		case xzBlockData:
			if len(p) == 0 {
				return 0, nil
			}
			n, err := x.lz.Read(p)
			if n > 0 {
				if x.hash != nil {
					x.hash.Write(p[:n])
				}
				x.uncompressed += int64(n)
			}
			if err == io.EOF {
				if err := x.endBlock(); err != nil {
					return n, err
				}
				x.state = xzBlockOrIndex
				if n > 0 {
					return n, nil
				}
				continue
			}
			if err != nil {
				return n, err
			}
			if n > 0 {
				return n, nil
			}
		case xzPadding:
			done, err := x.readStreamPadding()
			if err != nil {
				return 0, err
			}
			if done {
				return 0, io.EOF
			}
			x.state = xzStreamHeader
		}
	}
}

func (x *xzReader) readStreamHeader() error {
	h := x.hdr[:12]
	if _, err := io.ReadFull(x.src, h); err != nil {
		return noEOF(err)
	}
	if !bytes.Equal(h[:6], xzMagic) {
		return corrupt("xz: no stream header magic")
	}
	if crc32.ChecksumIEEE(h[6:8]) != binary.LittleEndian.Uint32(h[8:]) {
		return corrupt("xz: stream header CRC-32 mismatch")
	}
	if h[6] != 0 || h[7] > 0x0f {
		return fmt.Errorf("xz: stream flags %02x%02x: %w", h[6], h[7], ErrUnsupported)
	}
	x.flags = [2]byte{h[6], h[7]}
	x.check = h[7]
	switch x.check {
	case xzCheckCRC32:
		x.hash = crc32.NewIEEE()
	case xzCheckCRC64:
		x.hash = crc64.New(crc64Table)
	case xzCheckSHA256:
		x.hash = sha256.New()
	default:
		x.hash = nil // none, or a check this package does not verify (the format allows skipping it)
	}
	x.blocks, x.unpaddedSum, x.uncompressedSum = 0, 0, 0
	x.streams++
	return nil
}

// readBlockHeader reads a block header whose first byte (the size) is c.
func (x *xzReader) readBlockHeader(c byte) error {
	x.blockStart = x.src.n - 1
	size := (int(c) + 1) * 4
	h := x.hdr[:size]
	h[0] = c
	if _, err := io.ReadFull(x.src, h[1:]); err != nil {
		return noEOF(err)
	}
	if crc32.ChecksumIEEE(h[:size-4]) != binary.LittleEndian.Uint32(h[size-4:]) {
		return corrupt("xz: block header CRC-32 mismatch")
	}
	flags := h[1]
	if flags&0x3c != 0 {
		return fmt.Errorf("xz: block flags %02x: %w", flags, ErrUnsupported)
	}
	r := bytes.NewReader(h[2 : size-4])
	x.hdrCompressed, x.hdrUncompressed = -1, -1
	if flags&0x40 != 0 {
		v, err := readUvarint(r)
		if err != nil || v == 0 || v > 1<<62 {
			return corrupt("xz: bad compressed size in block header")
		}
		x.hdrCompressed = int64(v)
	}
	if flags&0x80 != 0 {
		v, err := readUvarint(r)
		if err != nil || v > 1<<62 {
			return corrupt("xz: bad uncompressed size in block header")
		}
		x.hdrUncompressed = int64(v)
	}
	var dictByte byte
	for i := range int(flags&3) + 1 {
		id, err := readUvarint(r)
		if err != nil {
			return corrupt("xz: bad filter flags")
		}
		propsLen, err := readUvarint(r)
		if err != nil || propsLen > uint64(r.Len()) {
			return corrupt("xz: bad filter properties")
		}
		if id != xzFilterLZ2 || i != int(flags&3) {
			return fmt.Errorf("xz: filter %#x: %w (only a single LZMA2 filter is)", id, ErrUnsupported)
		}
		if propsLen != 1 {
			return corrupt("xz: LZMA2 properties of %d bytes", propsLen)
		}
		dictByte, _ = r.ReadByte()
	}
	for r.Len() > 0 {
		if b, _ := r.ReadByte(); b != 0 {
			return corrupt("xz: non-zero block header padding")
		}
	}
	dict, err := xzDictSize(dictByte)
	if err != nil {
		return err
	}
	if dict > x.maxDict {
		return fmt.Errorf("xz: dictionary of %d bytes: %w %d (Limits.XZDict)", dict, ErrLimit, x.maxDict)
	}
	if x.hash != nil {
		x.hash.Reset()
	}
	x.dataStart = x.src.n
	x.uncompressed = 0
	lz, err := lzma.Reader2Config{DictCap: int(max(dict, lzma.MinDictCap))}.NewReader2(x.src)
	if err != nil {
		return err
	}
	x.lz = lz
	return nil
}

// endBlock reads the block padding and check.
func (x *xzReader) endBlock() error {
	compressed := x.src.n - x.dataStart
	if x.hdrCompressed >= 0 && compressed != x.hdrCompressed {
		return corrupt("xz: block of %d compressed bytes where its header says %d", compressed, x.hdrCompressed)
	}
	if x.hdrUncompressed >= 0 && x.uncompressed != x.hdrUncompressed {
		return corrupt("xz: block of %d bytes where its header says %d", x.uncompressed, x.hdrUncompressed)
	}
	for range (4 - compressed%4) % 4 {
		c, err := x.src.ReadByte()
		if err != nil {
			return noEOF(err)
		}
		if c != 0 {
			return corrupt("xz: non-zero block padding")
		}
	}
	n := xzCheckSize(x.check)
	sum := x.hdr[:n]
	if _, err := io.ReadFull(x.src, sum); err != nil {
		return noEOF(err)
	}
	if x.hash != nil {
		x.sum = x.hash.Sum(x.sum[:0])
		if x.check == xzCheckCRC32 || x.check == xzCheckCRC64 {
			// xz stores CRCs little-endian; hash.Sum gives them big-endian.
			for i, j := 0, len(x.sum)-1; i < j; i, j = i+1, j-1 {
				x.sum[i], x.sum[j] = x.sum[j], x.sum[i]
			}
		}
		if !bytes.Equal(sum, x.sum) {
			return corrupt("xz: block check mismatch")
		}
	}
	headerSize := x.dataStart - x.blockStart
	x.blocks++
	x.unpaddedSum += uint64(headerSize + compressed + int64(n))
	x.uncompressedSum += uint64(x.uncompressed)
	x.lz = nil
	return nil
}

// hashByteReader feeds what it reads into a CRC-32.
type hashByteReader struct {
	src *source
	crc uint32
	n   int64
}

func (h *hashByteReader) ReadByte() (byte, error) {
	c, err := h.src.ReadByte()
	if err != nil {
		return 0, noEOF(err)
	}
	h.crc = crc32.Update(h.crc, crc32.IEEETable, []byte{c})
	h.n++
	return c, nil
}

// readIndexAndFooter reads the index (its indicator byte already read) and
// the stream footer.
func (x *xzReader) readIndexAndFooter() error {
	h := &hashByteReader{src: x.src, crc: crc32.Update(0, crc32.IEEETable, []byte{0}), n: 1}
	count, err := readUvarint(h)
	if err != nil {
		return err
	}
	if count != x.blocks {
		return corrupt("xz: index lists %d blocks where the stream has %d", count, x.blocks)
	}
	var unpadded, uncompressed uint64
	for range count {
		u, err := readUvarint(h)
		if err != nil {
			return err
		}
		v, err := readUvarint(h)
		if err != nil {
			return err
		}
		unpadded += u
		uncompressed += v
	}
	if unpadded != x.unpaddedSum || uncompressed != x.uncompressedSum {
		return corrupt("xz: index does not match the blocks")
	}
	for h.n%4 != 0 {
		c, err := h.ReadByte()
		if err != nil {
			return err
		}
		if c != 0 {
			return corrupt("xz: non-zero index padding")
		}
	}
	indexSize := h.n + 4
	crc := x.hdr[:4]
	if _, err := io.ReadFull(x.src, crc); err != nil {
		return noEOF(err)
	}
	if binary.LittleEndian.Uint32(crc) != h.crc {
		return corrupt("xz: index CRC-32 mismatch")
	}
	f := x.hdr[:12]
	if _, err := io.ReadFull(x.src, f); err != nil {
		return noEOF(err)
	}
	switch {
	case !bytes.Equal(f[10:], xzFooter):
		return corrupt("xz: no stream footer magic")
	case crc32.ChecksumIEEE(f[4:10]) != binary.LittleEndian.Uint32(f):
		return corrupt("xz: stream footer CRC-32 mismatch")
	case (int64(binary.LittleEndian.Uint32(f[4:]))+1)*4 != indexSize:
		return corrupt("xz: footer gives an index of %d bytes where it has %d", (int64(binary.LittleEndian.Uint32(f[4:]))+1)*4, indexSize)
	case f[8] != x.flags[0] || f[9] != x.flags[1]:
		return corrupt("xz: stream footer flags differ from the header")
	}
	return nil
}

// readStreamPadding skips zero bytes (in groups of four) after a stream;
// done is true at the end of the file.
func (x *xzReader) readStreamPadding() (done bool, err error) {
	zeros := 0
	for {
		b, err := x.src.br.Peek(1)
		if len(b) == 0 {
			if err == io.EOF {
				if zeros%4 != 0 {
					return false, corrupt("xz: stream padding of %d bytes is not a multiple of 4", zeros)
				}
				return true, nil
			}
			return false, err
		}
		if b[0] != 0 {
			if zeros%4 != 0 {
				return false, corrupt("xz: stream padding of %d bytes is not a multiple of 4", zeros)
			}
			return false, nil
		}
		x.src.discard(1)
		zeros++
	}
}

// readUvarint reads xz's multibyte integer: at most 9 bytes, 7 bits each,
// least significant first, no superfluous zero byte.
func readUvarint(r io.ByteReader) (uint64, error) {
	var v uint64
	for i := range 9 {
		c, err := r.ReadByte()
		if err != nil {
			return 0, noEOF(err)
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c&0x80 == 0 {
			if c == 0 && i > 0 {
				return 0, corrupt("xz: non-minimal integer")
			}
			return v, nil
		}
	}
	return 0, corrupt("xz: integer longer than 9 bytes")
}

func appendUvarint(dst []byte, v uint64) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// xzWriter writes xz streams, each holding one block (CRC-64 check, a
// single LZMA2 filter). Flush makes everything written so far decodable
// from the file: it ends the current stream (block end, index, footer), so
// the file is then a complete sequence of xz streams that xz, Kieker's
// XZInputStream and this package read whole, and the next Write starts a
// new stream. Ending a stream costs a new LZMA2 coder (about 3 ms and 50
// MB of memory for the 8 MiB dictionary), so a Flush within xzSealInterval
// of the last one that ended a stream only ends the current LZMA2 chunk:
// the bytes are decodable then too, and the file reads as truncated after
// them until the next stream end, Close or rotation.
type xzWriter struct {
	w        io.Writer
	dictCap  int
	now      func() time.Time
	lz       *lzma.Writer2
	cw       countWriter
	crc      hash.Hash64
	usize    int64
	started  bool      // the current stream has a block
	sealed   bool      // a stream has been ended; the next one needs its header
	lastSeal time.Time // when the last stream ended (or the writer began)
	closed   bool
}

// xzWriterDict is the dictionary of files tracebridge writes (xz's preset
// 6); readers need at most this much memory for them.
const xzWriterDict = 8 << 20

const xzBlockHeaderSize = 12

// xzSealInterval is the least time between two Flushes that end a stream
// (see xzWriter): the bridge's periodic flush (every second by default,
// give or take the timer's jitter) ends one each time, the extra flushes
// in between (acknowledgements of broker messages, every 50 ms) do not pay
// for a new coder.
const xzSealInterval = 900 * time.Millisecond

// newXZWriter starts an xz stream on w; now (nil: time.Now) times the
// stream ends of Flush.
func newXZWriter(w io.Writer, dictCap int, now func() time.Time) (*xzWriter, error) {
	if now == nil {
		now = time.Now
	}
	x := &xzWriter{w: w, dictCap: dictCap, now: now, crc: crc64.New(crc64Table)}
	x.lastSeal = now()
	// The stream header goes out at once, so that even an empty file
	// sniffs as xz.
	if _, err := w.Write(appendXZStreamHeader(nil)); err != nil {
		return nil, err
	}
	return x, nil
}

// appendXZStreamHeader appends the header of a stream with CRC-64 checks.
func appendXZStreamHeader(h []byte) []byte {
	h = append(h, xzMagic...)
	h = append(h, 0, xzCheckCRC64)
	return binary.LittleEndian.AppendUint32(h, crc32.ChecksumIEEE(h[len(h)-2:]))
}

// start writes the block header (after a stream header when a stream was
// ended before) and starts the LZMA2 coder.
func (x *xzWriter) start() error {
	if x.started {
		return nil
	}
	var h []byte
	if x.sealed {
		h = appendXZStreamHeader(h)
	}
	bh := len(h)
	h = append(h, xzBlockHeaderSize/4-1, 0x00, byte(xzFilterLZ2), 1, lzma.EncodeDictCap(int64(x.dictCap)), 0, 0, 0)
	h = binary.LittleEndian.AppendUint32(h, crc32.ChecksumIEEE(h[bh:]))
	if _, err := x.w.Write(h); err != nil {
		return err
	}
	x.started, x.sealed = true, false
	x.cw = countWriter{w: x.w}
	x.crc.Reset()
	x.usize = 0
	lz, err := lzma.Writer2Config{DictCap: x.dictCap}.NewWriter2(&x.cw)
	if err != nil {
		return err
	}
	x.lz = lz
	return nil
}

func (x *xzWriter) Write(p []byte) (int, error) {
	if x.closed {
		return 0, ErrClosed
	}
	if len(p) == 0 {
		return 0, nil
	}
	if err := x.start(); err != nil {
		return 0, err
	}
	n, err := x.lz.Write(p)
	x.crc.Write(p[:n])
	x.usize += int64(n)
	return n, err
}

// Flush ends the stream, or within xzSealInterval of the last stream end
// only the current LZMA2 chunk (see xzWriter).
func (x *xzWriter) Flush() error {
	if x.closed {
		return ErrClosed
	}
	if !x.started {
		return nil
	}
	if now := x.now(); now.Sub(x.lastSeal) >= xzSealInterval {
		x.lastSeal = now
		return x.endStream()
	}
	return x.lz.Flush()
}

// Close ends the stream. After a Flush that ended one and no Write since,
// there is nothing left to write.
func (x *xzWriter) Close() error {
	if x.closed {
		return nil
	}
	x.closed = true
	if x.sealed {
		return nil
	}
	return x.endStream()
}

// endStream ends the block, if one was started, and writes the index and
// the stream footer.
func (x *xzWriter) endStream() error {
	var b []byte
	index := []byte{0}
	if x.started {
		// Writer2.Close drops the error of its own flush.
		if err := x.lz.Flush(); err != nil {
			return err
		}
		if err := x.lz.Close(); err != nil {
			return err
		}
		compressed := x.cw.n
		for range (4 - compressed%4) % 4 {
			b = append(b, 0)
		}
		b = binary.LittleEndian.AppendUint64(b, x.crc.Sum64())
		index = appendUvarint(index, 1)
		index = appendUvarint(index, uint64(xzBlockHeaderSize+compressed+8))
		index = appendUvarint(index, uint64(x.usize))
	} else {
		index = appendUvarint(index, 0)
	}
	for len(index)%4 != 0 {
		index = append(index, 0)
	}
	index = binary.LittleEndian.AppendUint32(index, crc32.ChecksumIEEE(index))
	b = append(b, index...)
	footer := binary.LittleEndian.AppendUint32(nil, uint32(len(index)/4-1))
	footer = append(footer, 0, xzCheckCRC64)
	b = binary.LittleEndian.AppendUint32(b, crc32.ChecksumIEEE(footer))
	b = append(b, footer...)
	b = append(b, xzFooter...)
	x.started, x.sealed, x.lz = false, true, nil
	_, err := x.w.Write(b)
	return err
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
